"""The offline install's checks, without a bundle: each refusal is one line and comes before any change;
the systemd unit is one systemd accepts."""

import shutil
import subprocess

import pytest

from config.errors import DeployError
from config.settings import read_env_file
from deploy.bundle import glibc_needed
from deploy.install import check_files, check_machine, check_space, point_env_at
from tests.support import ROOT

pytestmark = pytest.mark.fast
MANIFEST = {"python": "3.11", "machine": "x86_64", "glibc": "2.28"}


def test_a_machine_like_the_bundles_passes():
    check_machine(MANIFEST, "3.11", "x86_64", "2.36", has_venv=True)


@pytest.mark.parametrize("python, machine, glibc, has_venv, message", [
    ("3.12", "x86_64", "2.36", True, "This bundle is for Python 3.11, but this Python is 3.12"),
    ("3.11", "aarch64", "2.36", True, "for x86_64 CPUs, but this machine is aarch64"),
    ("3.11", "x86_64", "2.17", True, "need glibc 2.28 or newer, but this system has 2.17"),
    ("3.11", "x86_64", None, True, "this system has no glibc"),
    ("3.11", "x86_64", "2.36", False, "lacks the venv module"),
])
def test_a_machine_the_wheels_cannot_run_on_is_refused(python, machine, glibc, has_venv, message):
    with pytest.raises(DeployError, match=message):
        check_machine(MANIFEST, python, machine, glibc, has_venv)


def test_a_changed_or_missing_file_is_refused(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (tmp_path / "app.py").write_text("print('hello')\n")
    digest = subprocess.run(["sha256sum", "app.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    (bundle / "SHA256SUMS").write_text(digest)
    check_files(bundle)
    (tmp_path / "app.py").write_text("print('hellO')\n")
    with pytest.raises(DeployError, match="app.py is missing or does not match its checksum"):
        check_files(bundle)
    (tmp_path / "app.py").unlink()
    with pytest.raises(DeployError, match="app.py is missing"):
        check_files(bundle)


def test_short_disk_space_is_refused(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    check_space({tmp_path / "venv": 1000, tmp_path / "cache" / "model": 1000})
    with pytest.raises(DeployError, match="Not enough disk space"):
        check_space({tmp_path / "venv": free // 2, tmp_path / "cache" / "model": free // 2})  # same disk: they add up


def test_the_env_file_keeps_every_setting_but_the_model(tmp_path):
    env = tmp_path / ".env"
    env.write_text("# site settings\nCHAT_PORT=9000\nCHAT_MODEL=/old/model\nexport CHAT_HOST='0.0.0.0'\n")
    point_env_at(env, tmp_path / "cache" / "bundled" / "demo")
    assert read_env_file(env) == {"CHAT_PORT": "9000", "CHAT_HOST": "0.0.0.0",
                                  "CHAT_MODEL": str(tmp_path / "cache" / "bundled" / "demo")}
    assert env.read_text().startswith("# site settings\n")


def test_the_glibc_a_bundle_needs_is_the_newest_its_wheels_need():
    assert glibc_needed(["a-1-py3-none-any.whl"]) == (0, 0)
    assert glibc_needed(["b-1-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64.whl",  # runs from 2.5
                         "c-1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                         "d-1-cp39-abi3-manylinux_2_31_x86_64.whl"]) == (2, 31)


def test_the_systemd_unit_is_accepted_by_systemd(tmp_path):
    unit = (ROOT / "deploy" / "qwen-cpu-chat.service").read_text()
    assert "KillMode=mixed" in unit and "Restart=on-failure" in unit and "ExecStart=/opt/qwen-cpu-chat/run.sh" in unit
    # As README's steps install it, with the app where this checkout is.
    (tmp_path / "qwen-cpu-chat.service").write_text(unit.replace("/opt/qwen-cpu-chat", str(ROOT)))
    verified = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "qwen-cpu-chat.service")],
                              capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr
