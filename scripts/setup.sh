#!/usr/bin/env bash
# Prepare this checkout: a virtual environment in .venv with the pinned packages and this project (in place),
# Debian's tcmalloc where this user may install it (when .venv is first created), and the model the app will
# use (the bundled demo model in int8 unless CHAT_MODEL / CHAT_WEIGHTS say otherwise: downloaded, converted
# and quantised once into a cache outside the checkout). With "test": also the test and benchmark packages, Debian's
# Chromium, a CJK font, strace and systemd-analyze, always both demo models, and the wheels of the offline
# bundle. Safe to run again: it skips what is done, and then touches no network.
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

install_project() {  # this checkout's packages, in place, so every process the app starts imports them
    # pip maps each package to its folder when it installs: again when the folder or pyproject.toml changes
    local stamp="$venv/.installed-project" want; want="$(pwd -P) $(sha256sum pyproject.toml | cut -d' ' -f1)"
    if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then return; fi
    echo "==> Installing this checkout ($(pwd -P)) into $venv"
    "$venv/bin/pip" install --no-deps --no-build-isolation --no-index -q -e .
    echo "$want" > "$stamp"
}

created=false
[[ -x $venv/bin/python ]] || { echo "==> Creating $venv"; "$python" -m venv "$venv"; created=true; }
install_locked requirements.txt
install_project

# tcmalloc makes the engine about 5 % faster (docs/performance.md); the app runs without it too.
has_tcmalloc() { ldconfig -p | grep -q libtcmalloc_minimal.so.4; }

if [[ ${1:-} == test ]]; then
    install_locked requirements-test.txt
    if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || ! has_tcmalloc \
            || ! command -v strace >/dev/null || ! command -v systemd-analyze >/dev/null; then
        apt_install chromium fonts-noto-cjk libtcmalloc-minimal4 strace systemd
    fi
    "$venv/bin/python" -m modelprep --demo demo-0.5b  # the tests' demo model
    "$venv/bin/python" -m modelprep --demo demo-1.5b  # for one end-to-end test and bench.studies.demos
    "$venv/bin/python" -m deploy.wheelhouse
else
    # Only with a new .venv: later runs, and an install from the offline bundle, never reach for apt.
    if $created && ! has_tcmalloc; then
        apt_install libtcmalloc-minimal4 || echo "==> Note: libtcmalloc-minimal4 is not installed; the engine runs without it"
    fi
    "$venv/bin/python" -m modelprep
fi
