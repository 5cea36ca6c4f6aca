"""python -m braze.cli: the braze command."""

import sys

from . import main

sys.exit(main())
