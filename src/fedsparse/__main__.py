"""``python -m fedsparse``: the same as the ``fedsparse`` command."""

import sys

from .cli import main

sys.exit(main())
