"""``python -m gf2env.agents.sandbox --check``: what isolation this machine supports,
and the layers in use."""

import sys

from gf2env.agents.sandbox.check import main

sys.exit(main())
