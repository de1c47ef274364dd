"""``python -m gf2env``: the ``gf2`` command line."""

import sys

from gf2env.cli import main

sys.exit(main())
