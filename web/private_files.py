"""The app's private files stay its own: the state folder (login secret, users, database) and `.env` are
made readable by the user the app runs as and nobody else, each time the app starts.

New files are private already (the secret and users file are written 0600, folders 0700, and the service
runs with `UMask=0077`); this also tightens files made before that, or copied in by hand. Standard library
only; knows nothing of Chainlit or the model.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

log = logging.getLogger(__name__)


def make_private(state_dir: Path, files: list[Path]) -> None:
    """Owner-only access to `state_dir`, everything in it, and `files` (those that exist and are ours)."""
    paths = [state_dir, *state_dir.rglob("*")] if state_dir.is_dir() else []
    for path in [*paths, *files]:
        if not path.exists():
            continue
        try:
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or not mode & 0o077:
                continue
            path.chmod(stat.S_IMODE(mode) & 0o700)
            log.info("Made %s readable by this user only (it was %s)", path, stat.filemode(mode))
        except OSError as error:  # not ours, or gone: say so, and start all the same
            log.warning("Could not make %s private: %s", path, error)
