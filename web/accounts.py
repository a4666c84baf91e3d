"""The users who may log in: a small JSON file of names and argon2 password hashes, and the command that
manages it.

`python -m web.accounts add NAME` (and `remove`, `passwd`, `unlock`, `list`) edits the file named by
`CHAT_USERS_FILE`, or `users.json` in `CHAT_STATE_DIR` when that is not set; the password is read without
echo from a terminal, else as one line of standard input. Every change of a user's password also moves
the time from which their logins count (`valid_from`): a login token issued before it, or for a user
who no longer exists, is refused (`UsersFile.session_valid`). The file is replaced atomically and kept
readable by its owner only. `add NAME --operator` (or `passwd NAME --operator`) makes the user an operator, who
also reaches the operator's page (`web.operator`); `passwd` without it keeps what the user was. Knows nothing of the
web server.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from config.errors import ConfigError, cannot

HASHER = PasswordHasher()  # argon2id with the library's recommended cost (about 0.1 s and 64 MiB per hash)
# Compared against when the name is unknown, so a wrong name costs the same time as a wrong password.
_DUMMY_HASH = HASHER.hash("not a password")
MIN_PASSWORD_LENGTH = 8


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    valid_from: int  # Unix time of the last password change: logins issued before it are ended
    unlocked_at: int = 0  # Unix time of the last `unlock`: the app forgets the user's lockouts from before it
    operator: bool = False  # reaches the operator's page


class UsersFile:
    """The users file, re-read whenever it changes on disk (the command may edit it while the app runs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, User] = {}

    def users(self) -> dict[str, User]:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return {}
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            self._users, self._stamp = _read(self.path), stamp
        return self._users

    def verify(self, name: str, password: str) -> bool:
        """Whether `password` is `name`'s. Slow on purpose (argon2): call it off the event loop."""
        user = self.users().get(name)
        try:
            return HASHER.verify(user.password_hash if user else _DUMMY_HASH, password) and user is not None
        except (VerificationError, InvalidHashError):
            return False

    def session_valid(self, name: str, issued_at: float) -> bool:
        """Whether a login of `name` issued at `issued_at` (Unix time) still counts."""
        user = self.users().get(name)
        return user is not None and issued_at >= user.valid_from

    def is_operator(self, name: str) -> bool:
        user = self.users().get(name)
        return user is not None and user.operator

    def set_password(self, name: str, password: str, operator: bool = False) -> None:
        """Set `name`'s password; `operator` makes them an operator (and never takes it away)."""
        if len(password) < MIN_PASSWORD_LENGTH:
            raise ConfigError(f"The password is too short: use at least {MIN_PASSWORD_LENGTH} characters.")
        users = dict(self.users())
        known = users.get(name, User(name, "", 0))
        users[name] = User(name, HASHER.hash(password), int(time.time()), known.unlocked_at, operator or known.operator)
        self._write(users)

    def unlock(self, name: str) -> None:
        users = dict(self.users())
        if name not in users:
            raise ConfigError(f"There is no user {name!r} in {self.path}.")
        users[name] = replace(users[name], unlocked_at=max(int(time.time()), users[name].unlocked_at + 1))
        self._write(users)

    def remove(self, name: str) -> None:
        users = dict(self.users())
        if users.pop(name, None) is None:
            raise ConfigError(f"There is no user {name!r} in {self.path}.")
        self._write(users)

    def _write(self, users: dict[str, User]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        document = {"users": {user.name: {"password_hash": user.password_hash, "valid_from": user.valid_from,
                                          **({"unlocked_at": user.unlocked_at} if user.unlocked_at else {}),
                                          **({"operator": True} if user.operator else {})}
                              for user in users.values()}}
        with tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=".users-", delete=False) as file:
            json.dump(document, file, indent=1, ensure_ascii=False)
        os.chmod(file.name, 0o600)
        os.replace(file.name, self.path)


def _read(path: Path) -> dict[str, User]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["users"]
        return {name: User(name, entry["password_hash"], int(entry["valid_from"]), int(entry.get("unlocked_at", 0)),
                           entry.get("operator") is True) for name, entry in entries.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ConfigError(f"The users file {path} cannot be read ({error}). Restore it from a backup, or move "
                          "it away and add the users again with `python -m web.accounts add NAME`.") from None


def users_path(users_file: Path | None, state_dir: Path) -> Path:
    """The file the command edits: `CHAT_USERS_FILE`, or the default place in the state folder."""
    return users_file or state_dir / "users.json"


def _read_password(prompt: str) -> str:
    if sys.stdin.isatty():
        password = getpass.getpass(prompt)
        if getpass.getpass("Again: ") != password:
            raise ConfigError("The two passwords differ; nothing was changed.")
        return password
    return sys.stdin.readline().rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    from config.settings import load_env_file, load_settings

    parser = argparse.ArgumentParser(prog="python -m web.accounts", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command, text in (("add", "add a user (asks for the password)"), ("passwd", "set a new password"),
                          ("remove", "remove a user; their open sessions end"),
                          ("unlock", "lift the user's lockout after wrong passwords, from every address")):
        command_parser = commands.add_parser(command, help=text)
        command_parser.add_argument("name")
        if command in ("add", "passwd"):
            command_parser.add_argument("--operator", action="store_true",
                                        help="the user also reaches the operator's page (/operator)")
    commands.add_parser("list", help="list the users")
    arguments = parser.parse_args(argv)
    load_env_file()
    try:
        settings = load_settings()
        users = UsersFile(users_path(settings.users_file, settings.state_dir))
        known = users.users()
        if arguments.command == "list":
            for user in known.values():
                print(f"{user.name}\tpassword set {time.strftime('%Y-%m-%d %H:%M', time.localtime(user.valid_from))}"
                      + ("\toperator" if user.operator else ""))
        elif arguments.command == "unlock":
            users.unlock(arguments.name)
            print(f"Unlocked {arguments.name}: the running app lets them try again at once.")
        elif arguments.command == "remove":
            users.remove(arguments.name)
            print(f"Removed {arguments.name}; their open sessions end at their next page load or message.")
        else:
            if arguments.command == "add" and arguments.name in known:
                raise ConfigError(f"{arguments.name!r} exists already; use `passwd` to change the password.")
            if arguments.command == "passwd" and arguments.name not in known:
                raise ConfigError(f"There is no user {arguments.name!r}; use `add` to add one.")
            if not arguments.name.strip() or arguments.name != arguments.name.strip():
                raise ConfigError("A user name must not be empty or start or end with spaces.")
            users.set_password(arguments.name, _read_password(f"Password for {arguments.name}: "), arguments.operator)
            print(f"Saved {arguments.name}{' (operator)' if arguments.operator else ''} in {users.path}.")
        if settings.users_file is None and arguments.command != "list":
            print(f"Logins are on once CHAT_USERS_FILE={users.path} is set (in .env or the environment).")
    except ConfigError as error:
        return cannot(arguments.command, error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
