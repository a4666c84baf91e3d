"""Users and logins without a server: the users file and its command, the lockout, the login token check."""

import asyncio
import os
import stat
import subprocess
import sys
import threading
import time

import jwt
import pytest

from config.errors import ConfigError
from tests.support import ROOT
from web.accounts import UsersFile, main
from web.auth import Logins, LoginThrottle, ensure_secret, login_keys

pytestmark = pytest.mark.fast


def users_command(*arguments, state_dir, password=None):
    return subprocess.run([sys.executable, "-m", "web.accounts", *arguments], input=password, capture_output=True,
                          text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "CHAT_STATE_DIR": str(state_dir)},
                          timeout=60)


def test_the_command_adds_lists_changes_and_removes_users(tmp_path):
    added = users_command("add", "alice", state_dir=tmp_path, password="correct horse\n")
    assert added.returncode == 0, added.stderr
    users = UsersFile(tmp_path / "users.json")
    assert stat.S_IMODE((tmp_path / "users.json").stat().st_mode) == 0o600
    assert users.verify("alice", "correct horse") and not users.verify("alice", "wrong horse")
    assert "correct horse" not in (tmp_path / "users.json").read_text()  # only the argon2 hash is kept
    assert users.users()["alice"].password_hash.startswith("$argon2id$")
    assert "Logins are on once CHAT_USERS_FILE=" in added.stdout

    again = users_command("add", "alice", state_dir=tmp_path, password="another one\n")
    assert again.returncode == 2 and "exists already; use `passwd`" in again.stderr
    assert users_command("passwd", "alice", state_dir=tmp_path, password="battery staple\n").returncode == 0
    assert users.verify("alice", "battery staple") and not users.verify("alice", "correct horse")
    assert users_command("list", state_dir=tmp_path).stdout.startswith("alice\t")

    short = users_command("add", "bob", state_dir=tmp_path, password="short\n")
    assert short.returncode == 2 and "too short" in short.stderr and "Traceback" not in short.stderr
    assert users_command("remove", "alice", state_dir=tmp_path).returncode == 0
    assert users.users() == {}
    missing = users_command("remove", "alice", state_dir=tmp_path)
    assert missing.returncode == 2 and "There is no user 'alice'" in missing.stderr


def test_a_login_counts_until_the_password_changes_or_the_user_goes(tmp_path):
    users = UsersFile(tmp_path / "users.json")
    users.set_password("alice", "correct horse")
    login_time = time.time()
    assert users.session_valid("alice", login_time)
    time.sleep(1.1)  # valid_from has a resolution of one second
    users.set_password("alice", "battery staple")
    assert not users.session_valid("alice", login_time)
    assert users.session_valid("alice", time.time())
    users.remove("alice")
    assert not users.session_valid("alice", time.time())
    assert not users.verify("nobody", "correct horse")


def test_a_broken_users_file_is_named(tmp_path):
    (tmp_path / "users.json").write_text("{not json")
    with pytest.raises(ConfigError, match="users.json cannot be read"):
        UsersFile(tmp_path / "users.json").users()


def test_logins_need_at_least_one_user(tmp_path):
    with pytest.raises(ConfigError, match="holds no users yet. Add one with"):
        Logins(tmp_path / "users.json", tmp_path, 5, 900)


def test_the_session_secret_is_made_once_and_kept_private(tmp_path):
    secret = ensure_secret(tmp_path / "state")
    assert len(secret) >= 48 and ensure_secret(tmp_path / "state") == secret
    assert stat.S_IMODE((tmp_path / "state" / "auth_secret").stat().st_mode) == 0o600


def test_a_token_counts_only_if_signed_here_unexpired_and_current(tmp_path):
    UsersFile(tmp_path / "users.json").set_password("alice", "correct horse")
    logins = Logins(tmp_path / "users.json", tmp_path, 5, 900)
    now = int(time.time())

    def token(secret=logins.secret, **claims):
        return jwt.encode({"identifier": "alice", "iat": now, "exp": now + 60, **claims}, secret, algorithm="HS256")

    assert logins.session_user(token()) == "alice"
    assert logins.session_user(token(secret="forged" * 8)) is None
    assert logins.session_user(token(exp=now - 1)) is None
    assert logins.session_user(token(iat=now - 3600)) is None  # issued before the password was set
    assert logins.session_user(token(identifier="mallory")) is None
    assert logins.session_user(None) is None and logins.session_user("garbage") is None


def test_wrong_passwords_slow_down_then_lock_out_that_name_from_that_address_only():
    now = [1000.0]
    throttle = LoginThrottle(max_failures=4, lockout=60, clock=lambda: now[0])
    alice_here, alice_there, bob_here = login_keys("alice", "a"), login_keys("alice", "b"), login_keys("bob", "a")
    delays = []
    for _ in range(3):
        delays.append(throttle.delay(alice_here))
        throttle.failed(alice_here)
        now[0] += 1
    assert delays == [0.0, 1.0, 2.0] and throttle.locked_for(alice_here) == 0
    throttle.failed(alice_here)  # the fourth: alice is locked out from this address
    assert throttle.locked_for(alice_here) == 60
    assert throttle.locked_for(alice_there) == 0  # the same user from elsewhere: a lockout is no weapon
    assert throttle.locked_for(bob_here) == 0 and throttle.delay(bob_here) == 8.0  # the address is slowed, not locked
    assert throttle.begin(bob_here)
    throttle.end(bob_here, True)
    assert throttle.delay(bob_here) == 8.0  # one right password does not clear an address
    now[0] += 59.5
    assert throttle.locked_for(alice_here) == pytest.approx(0.5)
    now[0] += 1
    assert throttle.locked_for(alice_here) == 0  # the lockout ends by itself
    alice_elsewhere = login_keys("alice", "c")
    throttle.failed(alice_elsewhere)
    throttle.succeeded(alice_elsewhere)
    assert throttle.delay(alice_elsewhere[:1]) == 0.0  # a right password clears the name there
    now[0] += LoginThrottle.WINDOW
    assert throttle.delay(alice_here) == 0.0  # failures count for a while only


def test_an_operator_unlocks_a_name_from_every_address(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CHAT_USERS_FILE", str(tmp_path / "users.json"))
    users = UsersFile(tmp_path / "users.json")
    users.set_password("teacher", "teacher-password")
    logins = Logins(tmp_path / "users.json", tmp_path, max_failures=2, lockout_seconds=600)
    for address in ("10.0.0.1", "10.0.0.2"):
        for _ in range(2):
            logins.throttle.failed(login_keys("teacher", address))
    assert logins.throttle.locked_for(login_keys("teacher", "10.0.0.1")) > 0
    logins.apply_unlock("teacher")
    assert logins.throttle.locked_for(login_keys("teacher", "10.0.0.1")) > 0  # nobody has unlocked yet
    assert main(["unlock", "teacher"]) == 0
    logins.apply_unlock("teacher")
    assert all(logins.throttle.locked_for(login_keys("teacher", address)) == 0 for address in ("10.0.0.1", "10.0.0.2"))
    assert users.verify("teacher", "teacher-password")  # the password is untouched


async def test_passwords_are_checked_one_at_a_time_at_the_lowest_cpu_priority(tmp_path):
    UsersFile(tmp_path / "users.json").set_password("wang", "wang-password")
    logins = Logins(tmp_path / "users.json", tmp_path, 3, 60)
    assert await logins.check_password("wang", "wang-password") and not await logins.check_password("wang", "guess")
    checker = await asyncio.get_running_loop().run_in_executor(
        logins._hashing, lambda: (threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    assert checker[1] == 19 and checker[0] != threading.get_native_id() and logins._hashing._max_workers == 1
