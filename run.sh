#!/usr/bin/env bash
# Install what the app needs (first run only) and start it on CHAT_HOST:CHAT_PORT: ./run.sh [extra chainlit options]
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/python -m web.launch "$@"
