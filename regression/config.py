# ReFrame's site configuration for the suite: generated from platform.xml
# when ReFrame loads it (caraml/regression/site.py), so a system is written
# once. Usage: docs/reframe.md.
import os
import sys
import tempfile
from pathlib import Path

from reframe.core import logging as rfm_logging

# appended, not inserted: ReFrame removes the folder it added by its position
sys.path.append(str(Path(__file__).resolve().parents[1]))
from caraml.regression.site import site_configuration

site_configuration = site_configuration()

# ReFrame logs its start to a new rfm-<random>.log in the temporary folder
# before it reads this file, and leaves it there (on a shared login node
# every run of every user adds one); from here on its log is reframe.log
# under the run's prefix, so the start-up one goes
try:
    _started = rfm_logging.log_files()
except AttributeError:  # loaded outside a ReFrame run: no log yet
    _started = []
for _log in map(Path, _started):
    if _log.parent == Path(tempfile.gettempdir()) and _log.name.startswith("rfm-"):
        os.unlink(_log)
