"""Which thread ids the app accepts: the canonical text of a UUID, as Chainlit's page makes them.

A thread id arrives from the visitor's browser (the socket's `auth.threadId`) before any thread exists, and
Chainlit takes any string there; refusing everything but a UUID keeps crafted text out of every query and
log line. Standard library only.
"""

from __future__ import annotations

import uuid


def is_uuid(value: object) -> bool:
    """Whether `value` is a UUID written the way `str(uuid.uuid4())` writes one."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False
