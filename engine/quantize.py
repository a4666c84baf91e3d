"""`python -m engine.quantize`, the command's first name, kept for the scripts that use it: `python -m modelprep.quantization`."""

import sys

from modelprep.quantization import main

if __name__ == "__main__":
    sys.exit(main())
