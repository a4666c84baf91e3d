#!/usr/bin/env bash
# Install this offline bundle without network: ./install.sh  (PYTHON=python3.11 ./install.sh picks the Python).
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [[ $(id -u) == 0 ]]; then
    echo "Cannot install as root: the app would then run as root. Install it as the user the service runs as," \
         "e.g. sudo -u qwen-chat ./install.sh (docs/deployment.md)." >&2
    exit 2
fi
if ! command -v "$python" >/dev/null; then
    echo "Cannot install: $python is not installed; install the Python version bundle/manifest.json names." >&2
    exit 2
fi
exec "$python" deploy/install.py
