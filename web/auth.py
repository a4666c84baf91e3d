"""Logins, when `CHAT_USERS_FILE` is set: Chainlit's password login checked against the users file, a
lockout after repeated wrong passwords (of one name from one address; `python -m web.accounts unlock NAME` lifts
it), password checks taken fairly between addresses (`FairChecks`), the session secret, and whether a login still
counts.

Chainlit signs a login token (a JWT in an httponly cookie, valid 15 days) and never looks at the users
file again; `Logins.session_user` does, on every request and message, so removing a user or changing a
password ends their sessions. The secret that signs the tokens is created once in `CHAT_STATE_DIR`, outside
the checkout. Knows nothing of the model.
"""

from __future__ import annotations

import asyncio
import heapq
import ipaddress
import itertools
import logging
import os
import secrets
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path

import jwt

from config.errors import ConfigError
from web.accounts import UsersFile

log = logging.getLogger(__name__)
SECRET_FILE = "auth_secret"
# The address a login comes from, set by the gate (`web.gate.AccessGate`) for Chainlit's login callback below it.
LOGIN_ADDRESS: ContextVar[str] = ContextVar("login_address", default="unknown")
# Sent with status 429. Chainlit's login page shows the translation of the status text instead
# ("too many requests" in .chainlit/translations/*.json, auth.login.errors), which says the same.
LOCKED_OUT = ("登录失败次数过多，已暂时锁定，请稍后再试。 Too many wrong passwords: logins are locked for a while; "
              "please try again later.")


def ensure_secret(state_dir: Path) -> str:
    """The secret that signs login tokens: read from the state folder, created there (owner-only) the first time."""
    path = state_dir / SECRET_FILE
    if not path.exists():
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


class LoginThrottle:
    """Wrong passwords counted per key over the last `WINDOW` seconds. Each attempt after a failure waits longer
    (1, 2, 4, 8 s), by the most failures of any of its keys; the `max_failures`-th failure locks a key out for
    `lockout` seconds, except keys marked `SLOW_ONLY`, which only slow attempts down. A check under way counts as a
    failure until it ends (`begin`, `end`), so guesses sent all at once get no more checks than guesses sent one by one.

    The app's keys (`login_keys`): a user name with the address it comes from (locked: five wrong passwords for the
    teacher's name from a student's laptop lock the teacher out of that laptop only, never out of everywhere), and the
    address alone (slowed: guesses over many names from one address take ever longer).

    Checks under way are bounded per address (`max_failures`) and, past `MAX_CHECKING` in all, only for addresses that
    already have one: a neighbour with many addresses fills no door that a user's first attempt must pass."""

    WINDOW = 900.0
    MAX_DELAY = 8.0
    MAX_KEYS = 10_000
    MAX_CHECKING = 32  # checks under way at once, in all, beyond which an address gets one at a time
    SLOW_ONLY = "address:"

    def __init__(self, max_failures: int, lockout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.lockout = lockout
        self._clock = clock
        self._failures: dict[str, deque[float]] = defaultdict(deque)
        self._locked_until: dict[str, float] = {}
        self._checking: dict[str, int] = defaultdict(int)  # checks under way, per key
        self._under_way = 0  # checks under way, in all

    def _recent(self, key: str) -> deque[float]:
        failures = self._failures[key]
        while failures and failures[0] <= self._clock() - self.WINDOW:
            failures.popleft()
        return failures

    def locked_for(self, keys: list[str]) -> float:
        """Seconds until every key may try again; 0 when none is locked out."""
        return max(0.0, *(self._locked_until.get(key, 0.0) - self._clock() for key in keys))

    def delay(self, keys: list[str]) -> float:
        """How long this attempt waits before its password is checked: longer after each recent failure."""
        failures = max(len(self._recent(key)) for key in keys)
        return 0.0 if failures == 0 else min(2.0 ** (failures - 1), self.MAX_DELAY)

    def begin(self, keys: list[str]) -> bool:
        """Reserve a password check for `keys`; False (nothing reserved) when one is locked out, when the recent
        failures and the checks under way already reach the limit for a key that locks (for one that only slows, the
        checks under way alone), or when many checks run at once and this address already has one."""
        if (self.locked_for(keys)
                or any((0 if key.startswith(self.SLOW_ONLY) else len(self._recent(key))) + self._checking[key]
                       >= self.max_failures for key in keys)
                or (self._under_way >= self.MAX_CHECKING
                    and any(self._checking[key] for key in keys if key.startswith(self.SLOW_ONLY)))):
            return False
        self._under_way += 1
        for key in keys:
            self._checking[key] += 1
        return True

    def end(self, keys: list[str], succeeded: bool | None) -> None:
        """A reserved check is over: it succeeded, failed, or (None) ended without a verdict."""
        self._under_way -= 1
        for key in keys:
            self._checking[key] -= 1
            if not self._checking[key]:
                del self._checking[key]
        if succeeded:
            self.succeeded(keys)
        elif succeeded is False:
            self.failed(keys)

    def has_failed(self, key: str) -> bool:
        """Whether `key` had a wrong password within the window."""
        return key in self._failures and bool(self._recent(key))

    def failed(self, keys: list[str]) -> None:
        for key in keys:
            recent = self._recent(key)
            recent.append(self._clock())
            if len(recent) >= self.max_failures and not key.startswith(self.SLOW_ONLY):
                self._locked_until[key] = self._clock() + self.lockout
                recent.clear()
        if len(self._failures) + len(self._locked_until) > self.MAX_KEYS:  # made-up names must not fill memory
            self._failures = defaultdict(deque, {key: recent for key in list(self._failures)
                                                 if (recent := self._recent(key))})
            self._locked_until = {key: until for key, until in self._locked_until.items() if until > self._clock()}

    def succeeded(self, keys: list[str]) -> None:
        for key in keys:
            if not key.startswith(self.SLOW_ONLY):  # one right password does not vouch for a whole address
                self._failures.pop(key, None)

    def forget(self, name: str) -> None:
        """An operator unlocked `name`: its failures and lockouts from every address are forgotten."""
        prefix = login_keys(name, "")[0]
        for table in (self._failures, self._locked_until):
            for key in [key for key in table if key.startswith(prefix)]:
                del table[key]


def login_keys(name: str, address: str) -> list[str]:
    """The throttle's keys for a login of `name` from `address` (`LoginThrottle`)."""
    return [f"user:{len(name)}:{name}@{address}", f"{LoginThrottle.SLOW_ONLY}{network_of(address)}"]


def network_of(address: str) -> str:
    """The address a client is counted by: an IPv6 client by its /64, the network one machine is given (it can use
    any address in it), an IPv4 client by its own address."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    return str(ipaddress.ip_network(f"{parsed}/64", strict=False)) if parsed.version == 6 else str(parsed)


class FairChecks:
    """Password checks, one at a time on one thread, taken in a fair order rather than as they arrive: first those
    from addresses without a recent wrong password (a user typing theirs), then each address's first waiting check
    before any address's second. Whatever a neighbour sends from however many addresses, a user's right password
    waits for the check under way and the other users' first attempts, not for the guesses."""

    def __init__(self, executor: ThreadPoolExecutor, suspect: Callable[[str], bool]) -> None:
        self._executor = executor
        self._suspect = suspect  # whether an address had a recent wrong password
        self._waiting: list[tuple[tuple[bool, int, int], asyncio.Future, Callable[[], bool], str]] = []
        self._queued: Counter[str] = Counter()  # checks waiting, per address
        self._arrivals = itertools.count()
        self._busy = False

    async def run(self, address: str, check: Callable[[], bool]) -> bool:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        heapq.heappush(self._waiting, ((self._suspect(address), self._queued[address], next(self._arrivals)), done,
                                       check, address))
        self._queued[address] += 1
        self._start_next(loop)
        return await done

    def _start_next(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._busy and self._waiting:
            _, done, check, address = heapq.heappop(self._waiting)
            self._queued[address] -= 1
            if not self._queued[address]:
                del self._queued[address]
            if done.cancelled():  # the client left while it waited
                continue
            self._busy = True
            loop.run_in_executor(self._executor, check).add_done_callback(
                lambda result, done=done: self._finished(loop, result, done))

    def _finished(self, loop: asyncio.AbstractEventLoop, result: asyncio.Future, done: asyncio.Future) -> None:
        self._busy = False
        if not done.cancelled():
            if result.exception() is not None:
                done.set_exception(result.exception())
            else:
                done.set_result(result.result())
        self._start_next(loop)


def _yield_cpu() -> None:
    """Give the calling thread the lowest CPU priority (Linux keeps a niceness per thread)."""
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class Logins:
    """The users file, the signing secret and the throttle of one app."""

    def __init__(self, users_file: Path, state_dir: Path, max_failures: int, lockout_seconds: int) -> None:
        self.users = UsersFile(users_file)
        if not self.users.users():
            raise ConfigError(f"CHAT_USERS_FILE={users_file} holds no users yet. Add one with "
                              "`.venv/bin/python -m web.accounts add NAME`, or unset CHAT_USERS_FILE for no logins.")
        self.secret = ensure_secret(state_dir)
        self.throttle = LoginThrottle(max_failures, lockout_seconds)
        self._unlocks_applied: dict[str, int] = {}  # the time of each user's last `unlock` the throttle has applied
        # Hashing a password takes 64 MiB and a core for a moment: one at a time, on a thread of its own at the
        # lowest CPU priority, so a burst of logins neither fills the memory, nor takes the threads that replies
        # and the sidebar use, nor the cores of the engine (itself at CHAT_ENGINE_NICE, 19 by default).
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="password-check", initializer=_yield_cpu)
        self._checks = FairChecks(self._hashing, lambda address: self.throttle.has_failed(
            login_keys("", address)[1]))

    def apply_unlock(self, name: str) -> None:
        """If an operator ran `python -m web.accounts unlock NAME` since the last look, forget `name`'s lockouts."""
        user = self.users.users().get(name)
        if user is not None and user.unlocked_at > self._unlocks_applied.get(name, 0):
            self._unlocks_applied[name] = user.unlocked_at
            self.throttle.forget(name)
            log.info("Logins: %s was unlocked by an operator", name)

    async def check_password(self, name: str, password: str) -> bool:
        """Whether `password` is `name`'s, checked in its turn among the logins waiting (`FairChecks`), by the address
        the gate saw (`LOGIN_ADDRESS`)."""
        address = network_of(LOGIN_ADDRESS.get())
        return await self._checks.run(address, lambda: self._verify(name, password))

    def _verify(self, name: str, password: str) -> bool:
        try:
            return self.users.verify(name, password)
        except ConfigError as error:  # the file was broken while the app runs: nobody gets in until it is fixed
            log.error("%s", error)
            return False

    def session_user(self, token: str | None) -> str | None:
        """The user a login token belongs to, if it is genuine, unexpired and still counts."""
        if not token:
            return None
        try:
            claims = jwt.decode(token, self.secret, algorithms=["HS256"], options={"require": ["exp", "iat"]})
        except jwt.InvalidTokenError:
            return None
        name = claims.get("identifier")
        try:
            return name if isinstance(name, str) and self.users.session_valid(name, claims["iat"]) else None
        except ConfigError as error:
            log.error("%s", error)
            return None
