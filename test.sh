#!/usr/bin/env bash
# Install what the tests need (first run only), lint, and run the tests: ./test.sh [extra pytest options]
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
.venv/bin/ruff check .  # lint: the rules are in pyproject.toml
exec .venv/bin/python -m pytest "$@"
