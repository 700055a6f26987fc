"""``python -m moldau`` runs the ``moldau`` command."""

import sys

from .cli.main import main

sys.exit(main())
