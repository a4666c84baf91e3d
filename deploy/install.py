"""Install an unpacked offline bundle (`./install.sh` runs this with the system's Python), never using the network.

First every check, changing nothing when one fails and saying why in one line: the Python minor version,
CPU architecture and glibc the bundle's wheels were built for, Python's `venv` module, every file's
sha256 (`bundle/SHA256SUMS`), and the free disk space. Then: `.venv` from the bundled wheels only
(`pip install --no-index --no-deps --require-hashes`, each wheel's sha256 as recorded when the bundle was
built, with pip's own configuration and environment set aside), the model
folder copied into the cache (`CHAT_CACHE_DIR/bundled/<name>`) and verified against its manifest, and
`CHAT_MODEL` in `.env` pointed at it (other settings in `.env` are kept). Runs before `.venv` exists, so
it uses the standard library and the app's standard-library modules only (`config.settings`,
`modelprep.cache`). `deploy/bundle.py` is the other half.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(APP))

from config.errors import ChatError, DeployError, cannot  # noqa: E402
from config.settings import load_settings, read_env_file  # noqa: E402  (the app's folder is on the path only now)
from modelprep.cache import file_sha256, is_complete  # noqa: E402

BUNDLE = APP / "bundle"
STAMP = ".installed-requirements.txt"  # the stamp scripts/setup.sh checks: this lock is installed
PROJECT_STAMP = ".installed-project"  # and this one: the app's folder is installed in place
HASHED_LOCK = "requirements-hashed.txt"  # in bundle/: the lock with each wheel's sha256 (`deploy.bundle`)
DISK_MARGIN = 1.1


def check_machine(manifest: dict, python: str, machine: str, glibc: str | None, has_venv: bool) -> None:
    """Refuse a machine the bundle's wheels cannot run on; `glibc` is None where there is none (musl)."""
    if python != manifest["python"]:
        raise DeployError(f"This bundle is for Python {manifest['python']}, but this Python is {python}. Install "
                          f"Python {manifest['python']} and run: PYTHON=python{manifest['python']} ./install.sh")
    if machine != manifest["machine"]:
        raise DeployError(f"This bundle is for {manifest['machine']} CPUs, but this machine is {machine}. Build a "
                          "bundle on a machine of the same kind.")
    needed = tuple(map(int, manifest["glibc"].split(".")))
    if glibc is None or tuple(map(int, glibc.split(".")[:2])) < needed:
        raise DeployError(f"This bundle's wheels need glibc {manifest['glibc']} or newer, but this system has "
                          f"{glibc or 'no glibc'}. Use a newer Linux (e.g. Debian 12, Ubuntu 22.04, RHEL 9).")
    if not has_venv:
        raise DeployError(f"This Python {python} lacks the venv module (with ensurepip). Install it from the "
                          f"system's own media (Debian/Ubuntu: python{python}-venv) and run ./install.sh again.")


def check_files(bundle: Path) -> None:
    """Every file listed in SHA256SUMS is there with its recorded sha256."""
    for line in (bundle / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        path = bundle.parent / name
        if not path.is_file() or file_sha256(path) != digest:
            raise DeployError(f"{name} is missing or does not match its checksum: the bundle is damaged. Copy the "
                              "archive again and unpack it anew.")


def check_space(needs: dict[Path, int]) -> None:
    """Enough free space for each target; targets on the same file system add up."""
    by_device: dict[int, tuple[Path, int]] = {}
    for target, size in needs.items():
        existing = next(parent for parent in (target, *target.parents) if parent.exists())
        device = existing.stat().st_dev
        path, total = by_device.get(device, (existing, 0))
        by_device[device] = (path, total + int(size * DISK_MARGIN))
    for path, total in by_device.values():
        free = shutil.disk_usage(path).free
        if free < total:
            raise DeployError(f"Not enough disk space: {total / 1e9:.1f} GB needed on the file system of {path}, "
                              f"{free / 1e9:.1f} GB free. Free some space and run ./install.sh again.")


def install_venv(app: Path, bundle: Path) -> None:
    venv = app / ".venv"
    shutil.rmtree(venv, ignore_errors=True)  # an update replaces the old environment whole
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # Only the bundle's wheels: no index, and none of this machine's pip configuration or PIP_* settings.
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    environment["PIP_CONFIG_FILE"] = os.devnull
    # Hash-checking mode: pip installs a wheel only if its sha256 is the one recorded when the bundle was built.
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                    "--require-hashes", "--disable-pip-version-check", "--progress-bar", "off", "-q", "--find-links",
                    str(bundle / "wheels"), "-r", str(bundle / HASHED_LOCK)], check=True, env=environment)
    (venv / STAMP).write_text(file_sha256(app / "requirements.txt") + "\n")
    # The app's own packages, in place, as scripts/setup.sh installs them (its stamp: this folder).
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-q", "-e", str(app)], check=True, env=environment)
    pyproject = hashlib.sha256((app / "pyproject.toml").read_bytes()).hexdigest()
    (venv / PROJECT_STAMP).write_text(f"{app.resolve()} {pyproject}\n")


def install_model(source: Path, target: Path) -> None:
    if is_complete(target):
        return
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial)
    if not is_complete(partial, thorough=True):
        raise DeployError(f"The model copied to {partial} does not match its manifest; check the disk and run "
                          "./install.sh again.")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def point_env_at(env_file: Path, model: Path) -> None:
    lines = env_file.read_text(encoding="utf-8").splitlines() if env_file.exists() else []
    kept = [line for line in lines if line.strip().partition("=")[0].strip().removeprefix("export ").strip()
            != "CHAT_MODEL"]
    env_file.write_text("\n".join([*kept, f"CHAT_MODEL={model}"]) + "\n", encoding="utf-8")
    env_file.chmod(0o600)  # settings may hold tokens: the service user's alone


def main() -> int:
    try:
        manifest = json.loads((BUNDLE / "manifest.json").read_text(encoding="utf-8"))
        print(f"==> Bundle of {manifest['built']}: app {manifest['app']['commit']}, "
              + ", ".join(f"{name} {version}" for name, version in manifest["packages"].items())
              + f"; {manifest['wheels']['count']} wheels ({manifest['wheels']['bytes'] / 1e9:.2f} GB); model "
              f"{manifest['model']['name']} ({manifest['model']['weights']}, {manifest['model']['bytes'] / 1e9:.2f} GB);"
              f" for Python {manifest['python']} on {manifest['machine']}, glibc {manifest['glibc']} or newer")
        libc, version = platform.libc_ver()
        has_venv = all(importlib.util.find_spec(name) for name in ("venv", "ensurepip"))
        check_machine(manifest, "{}.{}".format(*sys.version_info[:2]), platform.machine(),
                      version if libc == "glibc" else None, has_venv)
        print("==> Checking every file's checksum")
        check_files(BUNDLE)
        settings = load_settings({**read_env_file(APP / ".env"), **os.environ})
        model_target = settings.cache_dir / "bundled" / manifest["model"]["name"]
        check_space({APP / ".venv": manifest["venv_bytes"], model_target: manifest["model"]["bytes"]})
        print("==> Installing the packages into .venv from the bundled wheels (no network)")
        install_venv(APP, BUNDLE)
        (APP / ".files").mkdir(mode=0o700, exist_ok=True)  # Chainlit's upload folder: the service may write only there
        print(f"==> Installing the model into {model_target}")
        install_model(APP / manifest["model"]["folder"], model_target)
        point_env_at(APP / ".env", model_target)
    except ChatError as error:
        return cannot("install", error)
    except subprocess.CalledProcessError as error:
        return cannot("install", f"{' '.join(error.cmd[:4])} ... failed (its message is above).")
    print(f"==> Installed. CHAT_MODEL={model_target} is set in .env. Start the app with ./run.sh, or as a service "
          "(docs/deployment.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
