"""`python -m modelprep.quantization`: `modelprep.quantization.command`."""

import sys

from modelprep.quantization.command import main

sys.exit(main())
