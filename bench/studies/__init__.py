"""Studies: each answered one question once, and is kept to answer it again; `python -m bench` runs none of them.

- `demos`: which bundled demo model a demo audience sees (both models' quality and speed);
- `quality`: what int8 (and 4-bit) weights cost in quality (perplexity, greedy answers);
- `soak`: does the app's memory settle over a compressed day of visitors (30 minutes and more);
- `operator_year`: the operator's page on a year of a busy site's history;
- `storage_cost`: what storing conversations costs the web server;
- `speculation_speed`: what prompt-lookup speculation gives one visitor, against llama.cpp's server.

Each is `python -m bench.studies.NAME` and writes `docs/benchmark/NAME.json` (or `--out`); docs/performance.md and
the pages that cite them give their latest figures.
"""
