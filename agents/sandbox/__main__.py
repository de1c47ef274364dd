"""``python -m agents.sandbox --check``: what isolation this machine supports, and the layers in use."""

import sys

from agents.sandbox.check import main

sys.exit(main())
