"""`python -m engine.prepare`, the command's first name, kept for the scripts that use it: `python -m modelprep`."""

import sys

from modelprep.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
