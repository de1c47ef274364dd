import sys

from gf2env.cli import main

sys.exit(main())
