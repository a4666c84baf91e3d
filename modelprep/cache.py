"""Folders the app builds once into its cache (converted models), verified before every use.

A folder is built under a temporary name and renamed into place only after a manifest of every file's
size and sha256 has been written, so an interrupted build never looks finished. A folder whose files
no longer match its manifest (truncated, edited, half deleted) is not complete: it is rebuilt, never
loaded. Reading every byte at each start would cost seconds (docs/design-figures.md), so a full check is remembered (`VERIFIED`: each file's size, inode and modification time, the manifest's
too) and the next check reads the files again only if one of them changed since; as git does for its index,
a file modified within the clock tick of that check is read again every time. Knows nothing of what the
folders hold.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

MANIFEST = "manifest.json"
VERIFIED = ".verified.json"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def is_complete(folder: Path, thorough: bool = False) -> bool:
    """True when `folder` has a manifest and every file in it still has the recorded size and sha256 (read
    again only when a file changed since the last full check, or when `thorough`)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = {name: (folder / name).stat() for name in [*manifest, MANIFEST]}
        if any(files[name].st_size != entry["size"] for name, entry in manifest.items()):
            return False
        stamp = {name: [stat.st_size, stat.st_ino, stat.st_mtime_ns] for name, stat in files.items()}
        if not thorough and _verified(folder, stamp):
            return True
        if not all(file_sha256(folder / name) == entry["sha256"] for name, entry in manifest.items()):
            return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    try:
        (folder / VERIFIED).write_text(json.dumps(stamp))
    except OSError:  # a read-only copy: checked in full at each start
        pass
    return True


def _verified(folder: Path, stamp: dict[str, list[int]]) -> bool:
    """The files are as the last full check found them, and none was written within that check's clock tick."""
    try:
        record = folder / VERIFIED
        checked = record.stat().st_mtime_ns
        return json.loads(record.read_text()) == stamp and all(mtime < checked for _, _, mtime in stamp.values())
    except (OSError, ValueError):
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
            for path in sorted(folder.iterdir()) if path.is_file() and path.name not in (MANIFEST, VERIFIED)}
