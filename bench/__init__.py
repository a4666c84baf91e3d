"""The benchmark: this app's engine against plain transformers and llama.cpp on one fixed workload.

`python -m bench` (see docs/performance.md) runs every system on the same machine in one run and writes JSON, a
chart and the table in docs/performance.md; `python -m bench.quality` compares an int8 model with its 16-bit original.
"""
