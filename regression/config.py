# ReFrame's site configuration for the suite: generated from platform.xml
# when ReFrame loads it (caraml/regression/site.py), so a system is written
# once. Usage: docs/reframe.md.
import sys
from pathlib import Path

# appended, not inserted: ReFrame removes the folder it added by its position
sys.path.append(str(Path(__file__).resolve().parents[1]))
from caraml.regression.site import site_configuration  # noqa: E402

site_configuration = site_configuration()
