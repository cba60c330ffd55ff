"""`python -m caraml.row`: the combine step's command (caraml/row/combine.py)."""

import sys

from caraml.row.combine import main

sys.exit(main())
