"""`python -m modelprep [--demo [demo-0.5b|demo-1.5b]]`: download or convert the configured model before the app starts.

The set-up step (`scripts/setup.sh`, so `./run.sh` and `./test.sh`) runs this; it is the only place
where models are downloaded or converted. It reads `.env` from the working directory as Chainlit does,
so it prepares the model the app will use. Exits 2 with a one-line reason when it cannot.
"""

from __future__ import annotations

import argparse
import sys

from config.errors import ChatError, cannot
from config.settings import load_env_file, load_settings
from modelprep.demo import DEMOS
from modelprep.source import resolve_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modelprep", description=__doc__.splitlines()[0])
    parser.add_argument("--demo", nargs="?", const="", choices=["", *DEMOS],
                        help="prepare a bundled demo model (the default one without a name) whatever CHAT_MODEL says")
    arguments = parser.parse_args(argv)
    load_env_file()
    try:
        settings = load_settings()
        folder = resolve_model(settings.model if arguments.demo is None else arguments.demo, settings.cache_dir,
                               prepare=True, weights=settings.weights)
    except ChatError as error:
        return cannot("prepare the model", error)
    print(f"==> Model ready: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
