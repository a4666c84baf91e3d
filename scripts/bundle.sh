#!/usr/bin/env bash
# Build the offline bundle for a client site: scripts/bundle.sh [OUT_DIR]  (default dist/). Runs the set-up
# first; fetches the wheels from the package index the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m deploy.bundle "$@"
