#!/usr/bin/env bash
# Install what the app needs (first run only) and start it: ./run.sh [extra chainlit options]
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/chainlit run app.py "$@"
