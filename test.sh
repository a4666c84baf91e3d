#!/usr/bin/env bash
# Install what the tests need (first run only) and run them: ./test.sh [extra pytest options]
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
