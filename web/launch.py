"""`python -m web.launch [chainlit options]`: start the app on `CHAT_HOST` and `CHAT_PORT` (what `./run.sh` runs).

Chainlit takes its address from the command line before it imports the app, so the settings are read
here first (from `.env` too, as Chainlit does) and handed to `chainlit run`; options given after them
(`./run.sh --port 9000`) still win.
"""

from __future__ import annotations

import os
import sys

from config.errors import ChatError, cannot
from config.settings import load_env_file, load_settings


def main(argv: list[str]) -> None:
    load_env_file()
    try:
        settings = load_settings()
    except ChatError as error:
        sys.exit(cannot("start", error))
    chainlit = os.path.join(os.path.dirname(sys.executable), "chainlit")  # the same command users type
    os.execv(chainlit, [chainlit, "run", "app.py", "--host", settings.host, "--port", str(settings.port), *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
