#!/usr/bin/env bash
# Prepare this checkout: a virtual environment in .venv with the pinned packages and the model the app
# will use (the bundled demo model unless CHAT_MODEL says otherwise: downloaded and converted once into
# a cache outside the checkout). With "test": also the test packages, Debian's Chromium and a CJK font,
# and always the demo model. Safe to run again: it skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
python=${PYTHON:-python3}

install_locked() {  # install a lock file with --no-deps unless this exact file is already installed
    local lock=$1 stamp="$venv/.installed-$(basename "$1")"
    local digest; digest=$(sha256sum "$lock" | cut -d' ' -f1)
    if [[ -f $stamp && $(cat "$stamp") == "$digest" ]]; then return; fi
    echo "==> Installing $lock into $venv"
    "$venv/bin/pip" install --no-deps --progress-bar on -r "$lock"
    echo "$digest" > "$stamp"
}

[[ -x $venv/bin/python ]] || { echo "==> Creating $venv"; "$python" -m venv "$venv"; }
install_locked requirements.txt

if [[ ${1:-} == test ]]; then
    install_locked requirements-test.txt
    if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK"; then
        echo "==> Installing Debian's chromium and fonts-noto-cjk"
        sudo_=""; [[ $(id -u) == 0 ]] || sudo_=sudo
        $sudo_ apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
    fi
    "$venv/bin/python" -m engine.prepare --demo
else
    "$venv/bin/python" -m engine.prepare
fi
