"""The operator benchmark's job scripts on every system (dry runs, see
conftest.py): the same resources, launcher, container and network settings
as the other benchmarks, the FNO driver with upstream's four samples per
device, and IPUs refused before submission."""

from __future__ import annotations

import subprocess

import pytest

from tests.systems.conftest import OP_SCRIPT, SYSTEMS
from tests.systems.test_job_scripts import (
    check_environment,
    check_launch,
    check_resources,
    rundir_of,
)


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_operator_job_scripts(dryruns, root, system):
    packages = dryruns[(OP_SCRIPT, (system,))]
    e = SYSTEMS[system]
    assert len(packages) == 2  # the default problems: rbc2d and rbc3d
    if e.kind == "ipu":
        for pkg in packages:
            assert f"{system} (ipu devices) is not run by fno_benchmark.xml" in pkg.stderr
            assert not (pkg.work / "job.sh").exists()
        return
    problems = []
    for pkg in packages:
        assert "CARAML dryrun:" in pkg.stderr and "CARAML ERROR" not in pkg.stderr
        check_resources(pkg, system, nodes=1)
        check_environment(pkg, system)
        driver = check_launch(pkg, system, 1, root, rundir_of(pkg))
        assert driver[:2] == ["-m", "operator_benchmark.fno_training"]
        problems.append(_value(driver, "--problem"))
        # upstream's batch of four samples on every device, eager, fp32, the problem's own data
        assert _value(driver, "--global-batch-size") == str(4 * e.devices)
        assert (_value(driver, "--compile"), _value(driver, "--precision")) == ("none", "fp32")
        assert "--data" not in driver
        assert _value(driver, "--device") == "cuda"
        methods = driver[driver.index("--energy-methods") + 1:]
        methods = methods[:next((i for i, a in enumerate(methods) if a.startswith("--")),
                                len(methods))]
        assert methods == e.energy.split()
        subprocess.run(["bash", "-n", str(pkg.work / "job.sh")], check=True)
    assert sorted(problems) == ["rbc2d", "rbc3d"]


def test_a_host_without_accelerators_trains_the_cpu_sized_problems(dryruns, root):
    packages = dryruns[(OP_SCRIPT, ("CPU",))]
    launches = [pkg.launch() for pkg in packages]
    assert sorted(_value(argv, "--problem") for argv in launches) == ["rbc2d-small", "rbc3d-small"]
    for pkg, argv in zip(packages, launches):
        assert argv[:2] == [str(root / ".venv/bin/python"), "-m"]
        assert "srun" not in argv and "apptainer" not in argv
        assert _value(argv, "--global-batch-size") == "4" and _value(argv, "--device") == "cpu"
        assert "CARAML dryrun:" in pkg.stderr


def test_problem_tags_on_a_gpu_system_train_the_full_problems(dryruns, root):
    """Each problem tag adds its problem at full size; compile reaches the driver."""
    packages = dryruns[(OP_SCRIPT, ("JEDI", "pic3d", "navier_stokes2d", "compile"))]
    drivers = [check_launch(pkg, "JEDI", 1, root, rundir_of(pkg)) for pkg in packages]
    assert sorted(_value(d, "--problem") for d in drivers) == ["navier_stokes2d", "pic3d"]
    for pkg, driver in zip(packages, drivers):
        assert "CARAML dryrun:" in pkg.stderr and "CARAML ERROR" not in pkg.stderr
        assert _value(driver, "--compile") == "default"
        assert _value(driver, "--global-batch-size") == "16"


def test_the_precision_sweep_leaves_out_what_the_driver_refuses(dryruns, root):
    """fp16 needs a gradient scaler, which cannot unscale the FNO's complex
    gradients: the driver refuses it (operator_benchmark/config.py), so the
    sweep never asks for it."""
    packages = dryruns[(OP_SCRIPT, ("A100", "rbc3d", "precision"))]
    drivers = [check_launch(pkg, "A100", 1, root, rundir_of(pkg)) for pkg in packages]
    assert sorted(_value(d, "--precision") for d in drivers) == ["bf16", "fp32", "tf32"]
    assert {_value(d, "--problem") for d in drivers} == {"rbc3d"}


@pytest.mark.parametrize("system", ["A100", "MI300X"])
def test_rocms_tf32_switch_is_on_for_the_tf32_row_alone(dryruns, root, system):
    """ROCm's torch uses TF32 only with HIPBLASLT_ALLOW_TF32=1
    (caraml/rocm_tf32.py): the MI300X tf32 row exports it, its fp32 and bf16
    rows do not, and no NVIDIA row does."""
    exported = {}
    for pkg in dryruns[(OP_SCRIPT, (system, "rbc3d", "precision"))]:
        driver = check_launch(pkg, system, 1, root, rundir_of(pkg))
        exported[_value(driver, "--precision")] = \
            "\nexport HIPBLASLT_ALLOW_TF32=1\n" in pkg.job
    assert exported == {"fp32": False, "bf16": False, "tf32": SYSTEMS[system].kind == "rocm"}
