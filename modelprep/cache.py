"""Folders the app builds once into its cache (converted models), verified before every use.

A folder is built under a temporary name and renamed into place only after a manifest of every file's
size and sha256 has been written, so an interrupted build never looks finished. A folder whose files
no longer match its manifest (truncated, edited, half deleted) is not complete: it is rebuilt, never
loaded. Knows nothing of what the folders hold.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from collections.abc import Callable

MANIFEST = "manifest.json"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def is_complete(folder: Path) -> bool:
    """True when `folder` has a manifest and every file in it still has the recorded size and sha256."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return all((folder / name).stat().st_size == entry["size"] and file_sha256(folder / name) == entry["sha256"]
                   for name, entry in manifest.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def build_once(folder: Path, build: Callable[[Path], None]) -> Path:
    """Return `folder`, first filling it with `build(staging_folder)` unless it is already complete."""
    if is_complete(folder):
        return folder
    if folder.exists():
        print(f"==> {folder} is incomplete or damaged; building it again")
        shutil.rmtree(folder)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    build(staging)
    (staging / MANIFEST).write_text(json.dumps(manifest_of(staging), indent=1))
    staging.rename(folder)
    return folder


def manifest_of(folder: Path) -> dict[str, dict]:
    """Size and sha256 of every file directly in `folder` but the manifest itself."""
    return {path.name: {"size": path.stat().st_size, "sha256": file_sha256(path)}
            for path in sorted(folder.iterdir()) if path.is_file() and path.name != MANIFEST}
