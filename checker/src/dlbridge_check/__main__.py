"""``python -m dlbridge_check``: the same as ``python -m dlbridge check``."""

import sys

from . import main

sys.exit(main())
