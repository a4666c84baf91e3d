#!/usr/bin/env bash
# Prepare this checkout: a virtual environment in .venv with the pinned packages, Debian's tcmalloc where
# this user may install it, and the model the app will use (the bundled demo model in int8 unless
# CHAT_MODEL / CHAT_WEIGHTS say otherwise: downloaded, converted and quantised once into a cache outside
# the checkout). With "test": also the test and benchmark packages, Debian's Chromium and a CJK font, and
# always the demo model. Safe to run again: it skips what is done.
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

apt_install() {  # Debian packages, installed only where missing and only if this user may
    local sudo_=""; [[ $(id -u) == 0 ]] || sudo_="sudo -n"
    echo "==> Installing Debian's $*"
    $sudo_ apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "$@" >/dev/null
}

[[ -x $venv/bin/python ]] || { echo "==> Creating $venv"; "$python" -m venv "$venv"; }
install_locked requirements.txt

# tcmalloc makes the engine about 5 % faster (README, Performance); the app runs without it too.
has_tcmalloc() { ldconfig -p | grep -q libtcmalloc_minimal.so.4; }

if [[ ${1:-} == test ]]; then
    install_locked requirements-test.txt
    if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || ! has_tcmalloc; then
        apt_install chromium fonts-noto-cjk libtcmalloc-minimal4
    fi
    "$venv/bin/python" -m engine.prepare --demo
else
    has_tcmalloc || apt_install libtcmalloc-minimal4 || echo "==> Note: libtcmalloc-minimal4 is not installed; the engine runs without it"
    "$venv/bin/python" -m engine.prepare
fi
