"""``python -m fireside.engine`` is the ``fireside`` command."""

import sys

from .cli import main

sys.exit(main())
