"""The benchmark: this app's engine against plain transformers and llama.cpp on one fixed workload, and its stages.

`python -m bench` (see docs/performance.md) runs every system on the same machine in one run, then the other stages
(`bench.__main__.STAGES`), and writes JSON, a chart and the table in docs/performance.md. The studies that answered
one question once (`bench/studies/`) are commands of their own, not run by it.
"""
