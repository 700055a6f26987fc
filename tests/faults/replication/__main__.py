"""``python -m tests.faults.replication``: see :mod:`.runner`."""

import sys

from .runner import main

sys.exit(main())
