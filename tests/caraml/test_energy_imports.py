"""caraml/node/energy.py: a driver that measures energy has jpwr's scope
(and pandas under it) imported when its methods are checked, before the
model's memory exists, not at the loop's start; one that measures none
never imports it. Each case runs in a fresh interpreter, where nothing
else has imported pandas."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHECK_THEN_LIST = textwrap.dedent("""
    import json, sys
    from caraml.node import driver
    from caraml.node.options import EnergyOptions
    before = sorted(m for m in ("pandas", "jpwr.ctxmgr") if m in sys.modules)
    driver.energy_meter(EnergyOptions(energy_methods=tuple(sys.argv[1:]), energy_dir="unused"))
    print(json.dumps([before, sorted(m for m in ("pandas", "jpwr.ctxmgr") if m in sys.modules)]))
""")


@pytest.mark.parametrize("methods, imported", [
    (["estimate"], ["jpwr.ctxmgr", "pandas"]),
    (["none"], []),
])
def test_checking_the_methods_imports_the_scope(methods, imported):
    proc = subprocess.run([sys.executable, "-c", CHECK_THEN_LIST, *methods],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, after = json.loads(proc.stdout)
    assert before == []
    assert after == imported
