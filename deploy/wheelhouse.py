"""`python -m deploy.wheelhouse`: the wheels of `requirements.txt` for this machine's platform and Python, kept
once in the cache (`CHAT_CACHE_DIR/wheels/<lock digest>`), for the offline bundle.

The set-up of the tests (`./test.sh`) and the bundle command fetch them on a connected machine; nothing
else does. `pip wheel --no-deps` takes each pinned release as a wheel from the index (or pip's cache) and
builds the few that exist only as source into wheels here, so the offline install never builds anything.
The folder is verified against its manifest like the model folders (`modelprep.cache`).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from config.errors import DeployError
from config.settings import PROJECT_ROOT, load_settings
from modelprep.cache import build_once

LOCK = PROJECT_ROOT / "requirements.txt"


def wheelhouse(cache_dir: Path) -> Path:
    """The verified wheel folder for the current lock file, fetched and built first if it is not there.
    Folders of earlier lock files are removed: a bundle always carries the current lock."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    folder = build_once(cache_dir / "wheels" / digest, _fetch)
    for other in folder.parent.iterdir():
        if other != folder:
            shutil.rmtree(other)
    return folder


def _fetch(folder: Path) -> None:
    print(f"==> Fetching the wheels of {LOCK.name} for the offline bundle into {folder.parent}")
    fetched = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--progress-bar", "off", "-q",
                              "-r", str(LOCK), "-w", str(folder)])
    if fetched.returncode != 0:
        raise DeployError("The wheels could not be fetched (see pip's message above). The bundle is built on a "
                          "machine that reaches the package index.")


if __name__ == "__main__":
    print(f"==> Wheels ready: {wheelhouse(load_settings().cache_dir)}")
