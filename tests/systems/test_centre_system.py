"""A centre's own system as docs/jube.md adds it, step by step: the doc's
block of platform.xml in a copy of the checkout, and the doc's dry run,
which plans its jobs with the real JUBE: the job script asks Slurm for
what the block declares and measures as it says."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.checkouts import checkout_with_venv
from tests.docs.documented import ROOT, commands_in

DOC = "docs/jube.md"


@pytest.mark.jube
def test_the_centres_own_system_of_the_jube_doc_plans_its_jobs(tmp_path):
    [block] = re.findall(r"```xml\n(.*?)```", (ROOT / DOC).read_text(), re.DOTALL)
    checkout = checkout_with_venv(tmp_path / "caraml")
    platform = checkout / "platform.xml"
    text = platform.read_text()
    # after the last system, before what follows the systems' blocks
    after = text.index("    <!-- JSC's partitions charge a project")
    platform.write_text(text[:after] + block + "\n" + text[after:])
    [command] = commands_in(DOC, "jube run image_classification/image_classification_torch_benchmark.xml "
                                 "--tag MYHPC dryrun")
    env = {**os.environ, "PATH": f"{checkout / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = checkout / "image_classification" / "image_classification_benchmark_run"
    jobs = sorted(run.glob("*/*_execute/work/job.sh"))
    # the GPU sweep of global batch sizes, one job script each, none submitted
    assert len(jobs) == 7, done.stdout[-3000:]
    script = jobs[0].read_text()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gres=gpu:4", "#SBATCH --cpus-per-task=64",
                 "#SBATCH --nodes=1"):
        assert line in script, script
    assert "caraml_nvidia_x86.sif" in script and " --nv " in script
    facts = (jobs[0].parent / "job.facts").read_text()
    assert "node_meter=ipmi\n" in facts and "energy_methods=pynvml\n" in facts
    assert not (jobs[0].parent / "job.out").exists()
