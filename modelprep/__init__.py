"""Getting a model ready before the app serves it: acquire (the demo models, ModelScope, a folder), convert
(`.gguf`), quantise (int8, 4-bit), size (memory needed) and check (the CPU, the files, the memory).

`python -m modelprep` prepares the configured model (the set-up runs it); `python -m modelprep.quantization`
and `python -m modelprep.sizing` are the operator's commands. The app itself never downloads or converts.
"""
