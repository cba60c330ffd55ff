"""`python -m caraml.row`: the combine step's command (caraml/row/run.py, main)."""

import sys

from caraml.row.run import main

sys.exit(main())
