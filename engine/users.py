"""`python -m engine.users`, the command's first name, kept for the scripts that use it: `python -m web.accounts`."""

import sys

from web.accounts import main

if __name__ == "__main__":
    sys.exit(main())
