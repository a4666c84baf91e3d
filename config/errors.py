"""Errors a user or an operator can cause, each with a message meant to be shown as it is.

Every message says what happened and what to do. The app shows `str(error)` in the chat or on the
console (`cannot`, the one way a command ends on such an error); anything that is not a `ChatError` is a bug
and is left to propagate.
"""

import sys


def cannot(doing: str, error: Exception | str) -> int:
    """End a command on an error the user can fix: "Cannot <doing>: <what to do>" on standard error; exit status 2."""
    print(f"\nCannot {doing}: {error}\n", file=sys.stderr)
    return 2


class ChatError(Exception):
    """Base of every error whose message is written for the person using the app."""


class ConfigError(ChatError):
    """A setting is missing or has a value the app cannot use."""


class ModelLoadError(ChatError):
    """The configured model cannot be loaded (missing folder, missing files, engine start failed)."""


class PersonaError(ChatError):
    """A persona file in prompts/ is missing, malformed or unknown."""


class MessageTooLongError(ChatError):
    """The newest message alone does not fit in the context together with the reply budget."""


class EngineUnavailableError(ChatError):
    """The engine failed or shut down; the reply cannot be produced."""


class MemoryLowError(ChatError):
    """The machine is short of memory, so no new reply is started until it recovers."""


class DeployError(ChatError):
    """The offline bundle cannot be built, or cannot be installed on this machine."""


class HistoryError(ChatError):
    """The conversations' database cannot be opened, read or written."""
