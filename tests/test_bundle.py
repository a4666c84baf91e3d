"""The offline bundle end to end: built from this machine's own set-up, unpacked elsewhere, installed and run
inside a network namespace with nothing but loopback, every connection of the install and of the app's
whole process tree traced, and a chat answered there.

With only loopback, a library that reaches out (a model hub, a package index, telemetry) fails at once
and usually swallows the error, so the test reads every `connect` the processes made (`strace -f`) and
fails on any address that is not loopback or a local socket. It needs root (for the namespace), strace
and the wheels `./test.sh`'s set-up fetched; it bundles the tiny test model instead of the demo model. The
install and the app run as `nobody`, as a service user would: `install.sh` refuses root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.app_process import free_port
from tests.support import ARTIFACTS, ROOT

NOBODY = 65534  # the unprivileged user the install and the app run as here
LOCAL_ADDRESS = re.compile(r'sa_family=AF_(UNIX|NETLINK|UNSPEC)|inet_addr\("127\.|inet_pton\(AF_INET6, "::1"'
                           r'|inet_pton\(AF_INET6, "::ffff:127\.')


def outside_connections(trace: Path) -> list[str]:
    """Every traced connect() to an address that is neither loopback nor a local socket."""
    return [line for line in trace.read_text().splitlines()
            if " connect(" in line and not LOCAL_ADDRESS.search(line)]


def programs_run(trace: Path) -> set[str]:
    return {Path(match[1]).name for match in re.finditer(r'execve\("([^"]+)"', trace.read_text())}


class Namespace:
    """A network namespace with loopback only, held open by a sleeping process; commands enter it."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(["unshare", "--net", "--fork", "sleep", "infinity"], start_new_session=True)
        deadline = time.monotonic() + 10
        # unshare forks: the sleeping child is the process that lives in the new namespace.
        while not (children := psutil.Process(self.holder.pid).children()):
            assert self.holder.poll() is None and time.monotonic() < deadline, "unshare --net failed (needs root)"
            time.sleep(0.1)
        self.pid = children[0].pid
        subprocess.run(self.enter("ip", "link", "set", "lo", "up"), check=True)

    def enter(self, *command: str) -> list[str]:
        return ["nsenter", "-t", str(self.pid), "-n", *command]

    def close(self) -> None:
        os.killpg(self.holder.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def bundle(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    built = subprocess.run([str(ROOT / "scripts" / "bundle.sh"), str(out)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "CHAT_MODEL": str(tiny_model_dir)}, timeout=900)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    archives = list(out.iterdir())
    assert len(archives) == 1 and archives[0].suffix == ".tar", archives
    print(f"bundle: {archives[0].stat().st_size / 1e9:.2f} GB, built in {time.monotonic() - started:.0f} s")
    return archives[0]


@pytest.fixture(scope="module")
def site(bundle: Path) -> Path:
    """The bundle unpacked on the 'server' by its service user (`nobody` here), with that user's home: its top folder.
    Outside pytest's own temporary folders, which only root may enter."""
    folder = Path(tempfile.mkdtemp(prefix="qwen-site-"))
    with tarfile.open(bundle) as archive:
        archive.extractall(folder, filter="tar")
    (folder / "home").mkdir()
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, NOBODY, NOBODY)
    yield folder / "qwen-cpu-chat"
    shutil.rmtree(folder, ignore_errors=True)


def as_service_user(*command: str) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]


def site_environment(site: Path, **extra: str) -> dict[str, str]:
    """A clean environment as on a fresh server: no pip settings, no caches, no CHAT_ settings of this machine."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(site.parent / "home"), "LANG": "C.UTF-8", **extra}


def test_the_bundle_holds_the_app_the_wheels_the_model_and_what_it_needs(site):
    assert (site / "install.sh").is_file() and os.access(site / "install.sh", os.X_OK)
    assert (site / "run.sh").is_file() and (site / "app.py").is_file() and (site / ".chainlit" / "config.toml").is_file()
    manifest = json.loads((site / "bundle" / "manifest.json").read_text())
    assert manifest["python"] == "{}.{}".format(*sys.version_info[:2]) and manifest["model"]["name"] == "tiny-qwen2"
    wheels = sorted(path.name for path in (site / "bundle" / "wheels").iterdir())
    pinned = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line and line[0] != "#"]
    assert len(wheels) == manifest["wheels"]["count"] == len(pinned)  # exactly the lock's wheels, one each
    assert not (site / ".venv").exists() and not (site / ".env").exists()


def test_a_damaged_bundle_is_refused_and_nothing_changes(site):
    config = site / "bundle" / "model" / "tiny-qwen2" / "config.json"
    original = config.read_bytes()
    config.write_bytes(original.replace(b"{", b"{ ", 1))
    try:
        refused = subprocess.run(as_service_user("./install.sh"), cwd=site, capture_output=True, text=True,
                                 timeout=300, env=site_environment(site))
    finally:
        config.write_bytes(original)
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("Cannot install: bundle/model/tiny-qwen2/config.json is missing or does not "
                                      "match its checksum: the bundle is damaged. Copy the archive again and unpack "
                                      "it anew.")
    assert not (site / ".venv").exists() and not any((site.parent / "home").iterdir())


def test_install_refuses_root_and_a_wheel_that_is_not_the_bundled_one(site, tmp_path):
    as_root = subprocess.run(["./install.sh"], cwd=site, capture_output=True, text=True, timeout=60,
                             env=site_environment(site))
    assert as_root.returncode == 2 and as_root.stderr.startswith("Cannot install as root")
    hashed = (site / "bundle" / "requirements-hashed.txt").read_text().splitlines()
    wheels = sorted(path.name for path in (site / "bundle" / "wheels").iterdir())
    assert len(hashed) == len(wheels) and all(" --hash=sha256:" in line for line in hashed)
    # pip's hash-checking mode, as install.py runs it, refuses a wheel whose bytes changed since the build.
    wheel = next(site.glob("bundle/wheels/six-*.whl"), None) or next(site.glob("bundle/wheels/*-py3-none-any.whl"))
    shutil.copy(wheel, tmp_path / wheel.name)
    with open(tmp_path / wheel.name, "ab") as changed:
        changed.write(b"\0")
    line = next(line for line in hashed if line.lower().startswith(wheel.name.split("-")[0].lower() + "=="))
    (tmp_path / "one.txt").write_text(line + "\n")
    checked = subprocess.run([sys.executable, "-m", "pip", "download", "--no-index", "--no-deps", "--require-hashes",
                              "--find-links", str(tmp_path), "-d", str(tmp_path / "out"), "-r", str(tmp_path / "one.txt")],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in checked.stderr


def test_installed_and_run_without_any_network_it_answers_a_chat(site):
    namespace = Namespace()
    app = None
    try:
        started = time.monotonic()
        installed = subprocess.run(namespace.enter("strace", "-f", "--seccomp-bpf", "-e", "trace=connect,execve",
                                                   "-o", str(site.parent / "trace-install.txt"),
                                                   *as_service_user("./install.sh")),
                                   cwd=site, capture_output=True, text=True, timeout=900, env=site_environment(site))
        assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
        install_seconds = time.monotonic() - started
        assert "CHAT_MODEL=" in (site / ".env").read_text()

        port = free_port()
        log_path = ARTIFACTS / "app-offline.log"
        ARTIFACTS.mkdir(exist_ok=True)
        started = time.monotonic()
        app = subprocess.Popen(namespace.enter("strace", "-f", "--seccomp-bpf", "-e", "trace=connect,execve", "-o",
                                               str(site.parent / "trace-run.txt"),
                                               *as_service_user("./run.sh", "--headless")),
                               cwd=site, env=site_environment(site, CHAT_PORT=str(port), CHAT_KV_CACHE_GIB="1",
                                                              CHAT_MAX_NEW_TOKENS="64"),
                               stdout=log_path.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        while "Engine ready" not in log_path.read_text(errors="replace"):
            assert app.poll() is None and time.monotonic() < deadline, log_path.read_text()[-5000:]
            time.sleep(0.5)
        chat = subprocess.run(namespace.enter(sys.executable, "-m", "harness.visitor", f"http://127.0.0.1:{port}",
                                              "你好，请介绍一下广州。"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert chat.returncode == 0, chat.stderr[-3000:]
        reply = json.loads(chat.stdout)
        first_reply_seconds = time.monotonic() - started
        assert reply["tokens"] > 0 and reply["text"], reply
        assert reply["deltas"] >= 2  # streamed, not one finished block
        print(f"offline install {install_seconds:.0f} s; ./run.sh to the first reply {first_reply_seconds:.0f} s")
    finally:
        if app is not None and app.poll() is None:
            os.killpg(app.pid, signal.SIGTERM)
            app.wait(timeout=60)
        namespace.close()

    for trace in ("trace-install.txt", "trace-run.txt"):
        assert " connect(" in (site.parent / trace).read_text()  # the trace did see connections (local ones)
        assert outside_connections(site.parent / trace) == [], trace
    assert not {"pip", "pip3", "apt-get", "apt", "sudo"} & programs_run(site.parent / "trace-run.txt")
