"""An installed Transformer Engine (or Apex) that fails to import, as one
built against another torch does, counts as absent: the megatron model
takes megatron-core's local layer spec with torch's SDPA attention instead
of failing on the TE spec. The broken packages are fakes on PYTHONPATH (the
device boundary: TE's kernels); megatron-core and the model are real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core")

REPO = Path(__file__).resolve().parents[2]
# How a broken TE fails: an extension built against another torch, or a
# CUDA library its loader (ctypes) does not find.
FAILURES = {
    "ImportError: lib{name}.so: undefined symbol":
        'raise ImportError("lib{name}.so: undefined symbol: _ZN3c1017Regi")',
    "OSError: libcudnn.so.9: cannot open shared object file":
        'raise OSError("libcudnn.so.9: cannot open shared object file")',
}
PROBE = """
from llm_training import gpt_megatron
print(gpt_megatron.attention_implementation(), gpt_megatron.HAVE_TRANSFORMER_ENGINE,
      gpt_megatron.HAVE_APEX)
spec = gpt_megatron.layer_spec()
print(spec.submodules.self_attention.submodules.core_attention.__name__)
"""


@pytest.mark.parametrize("failure", FAILURES)
def test_a_broken_transformer_engine_and_apex_fall_back_to_the_local_spec(tmp_path, failure):
    for name in ("transformer_engine", "apex"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(FAILURES[failure].format(name=name) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["torch-sdpa", "False", "False", "SdpaCoreAttention"]
    # the warning names the cause
    assert ("transformer_engine is installed but does not import ("
            + failure.format(name="transformer_engine")) in proc.stderr
