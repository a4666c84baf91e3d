"""The names the app answers to, and a door that refuses every request for another name.

A page on a stranger's domain can point its name at the app's address (DNS rebinding): the visitor's browser then
sends the stranger's name as `Host` and treats the app as that stranger's own site, so its scripts drive the chat
and read `/healthz` and `/metrics` from a kiosk. Every request and socket whose `Host` is none of the app's names
is refused here, before any route: `localhost` and loopback addresses, this machine's own names and addresses
(read again when an unknown address arrives, as a LAN's addresses change), the hosts of `CHAT_ALLOWED_ORIGINS` (a
proxy's public address) and `CHAT_ALLOWED_HOSTS` (`*.example.cn` names every subdomain). Knows nothing of the model.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import psutil
from starlette.datastructures import Headers

from web.chainlit_patches import add_middleware

log = logging.getLogger(__name__)
Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
REREAD_SECONDS = 5.0  # how often this machine's addresses may be read again for a Host that is not yet known
MAX_LOGGED = 100  # refused names logged, each once


def host_name(netloc: str) -> str:
    """The name of a `Host` header or an origin's netloc: without port or brackets, lower case, no final dot."""
    try:
        name = urlsplit(f"//{netloc}").hostname or ""
    except ValueError:  # a malformed IPv6 literal
        return ""
    return name.rstrip(".")


class AppNames:
    """The names a request may be addressed to."""

    def __init__(self, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...], listen_host: str) -> None:
        given = {name.lower().rstrip(".") for name in allowed_hosts}
        self._suffixes = tuple(name[1:] for name in given if name.startswith("*."))  # ".example.cn"
        self._names = ({"localhost", listen_host.lower(), *given, *map(host_name, allowed_origins)}
                       | _own_names()) - {""}
        self._addresses: frozenset[str] = frozenset()
        self._read_at = float("-inf")

    def knows(self, netloc: str) -> bool:
        name = host_name(netloc)
        if not name:
            return False
        if name in self._names or name.endswith((".localhost", *self._suffixes)):
            return True
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return False
        if address.is_loopback:
            return True
        if name not in self._addresses and time.monotonic() - self._read_at > REREAD_SECONDS:
            self._addresses, self._read_at = _own_addresses(), time.monotonic()
        return name in self._addresses


def _own_names() -> set[str]:
    """This machine's name, and its mDNS name (`NAME.local`). Not its DNS names: looking them up could wait on an
    unreachable name server at start; a public name goes in `CHAT_ALLOWED_HOSTS`."""
    name = socket.gethostname().lower()
    return {name, f"{name.split('.')[0]}.local"} if name else set()


def _own_addresses() -> frozenset[str]:
    return frozenset(str(ipaddress.ip_address(entry.address.split("%")[0]))
                     for entries in psutil.net_if_addrs().values() for entry in entries
                     if entry.family in (socket.AF_INET, socket.AF_INET6))


class HostCheck:
    """ASGI middleware: a request or socket for a name the app does not answer to gets 400 (a socket: closed)."""

    def __init__(self, app: Callable, names: AppNames) -> None:
        self.app = app
        self.names = names
        self.logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        host = Headers(scope=scope).get("host", "")
        if self.names.knows(host):
            return await self.app(scope, receive, send)
        if len(self.logged) < MAX_LOGGED and host not in self.logged:
            self.logged.add(host)
            log.warning("Refused requests for the name %.80r (from %s): not one of this app's names. If it is the "
                        "app's public name, add it to CHAT_ALLOWED_HOSTS", host, (scope.get("client") or ("?",))[0])
        if scope["type"] == "websocket":
            await receive()
            return await send({"type": "websocket.close", "code": 1008})
        body = json.dumps({"detail": f"本服务器不使用这个名字。 This server does not answer to the name {host[:80]!r}: open "
                                     "it by its own address, or add the name to CHAT_ALLOWED_HOSTS."},
                          ensure_ascii=False).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def answer_only_to(names: AppNames) -> None:
    add_middleware(HostCheck, names=names)
