"""The container definitions and the scripts that build and check images.
No image is built here (no registry, no Apptainer): what can be checked
without one is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.jube_runs import ROOT, JubeRun

CONTAINERS = ROOT / "containers"
DEFINITIONS = sorted(CONTAINERS.glob("*.def"))
FROM = re.compile(r"^From: *(\S+)@sha256:([0-9a-f]{64}) *$", re.MULTILINE)


def test_there_is_a_definition_per_vendor_image():
    assert [d.stem for d in DEFINITIONS] == ["ipu", "nvidia_arm64", "nvidia_x86", "rocm"]


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.stem)
def test_definitions_pin_their_base_and_install_the_suites_requirements(definition):
    text = definition.read_text()
    assert "Bootstrap: docker" in text
    [(image, digest)] = FROM.findall(text)
    assert ":" not in image.split("/")[-1], "a tag beside the digest: Apptainer refuses both"
    assert f"org.caraml.base-digest sha256:{digest}" in text
    for source in ("pyproject.toml", "containers/requirements.py", "containers/install_suite.sh"):
        assert (ROOT / source).is_file() and f"    {source} /opt/caraml/" in text
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for call in re.findall(r"install_suite\.sh (\S+)(.*)", text):
        assert set(call[1].split()) <= set(extras)


def test_the_ipu_image_pins_graphcores_examples():
    text = (CONTAINERS / "ipu.def").read_text()
    commit = re.search(r'^\s*commit=([0-9a-f]{40})$', text, re.MULTILINE).group(1)
    assert 'checkout --detach "$commit"' in text
    assert f"org.caraml.graphcore-examples {commit}" in text


def build(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CONTAINERS / "build.sh"), *args], text=True,
                          capture_output=True, **kwargs)


def test_build_refuses_an_unpinned_base(tmp_path):
    definition = tmp_path / "moving.def"
    definition.write_text("Bootstrap: docker\nFrom: nvcr.io/nvidia/pytorch:25.08-py3\n")
    done = build(str(definition), str(tmp_path / "x.sif"), "cuda", "python3", "python3")
    assert done.returncode == 1
    assert done.stderr.startswith(f"CARAML ERROR: {definition} does not pin its base image by digest")
    assert not (tmp_path / "x.sif").exists()


def test_build_needs_its_arguments(tmp_path):
    done = build(str(tmp_path / "missing.def"))
    assert done.returncode == 1 and "usage: build.sh DEFINITION IMAGE KIND" in done.stderr
    done = build(str(tmp_path / "missing.def"), "x.sif", "cuda", "python3", "python3")
    assert done.returncode == 1 and "missing.def not found" in done.stderr


def check(kind: str, tmp_path: Path, stubs: tuple[str, ...]) -> subprocess.CompletedProcess:
    """check.py with this Python as the image's, the named modules stubbed
    (torch and megatron-core too: importing the real ones takes long)."""
    for name in ("torch", "megatron/core", *stubs):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "__init__.py").write_text("__version__ = '9.9'\n")
    (tmp_path / "torch" / "cuda.py").write_text("def device_count():\n    return 3\n")
    with open(tmp_path / "torch" / "__init__.py", "a") as init:
        init.write("from . import cuda\n")
    return subprocess.run(
        [sys.executable, str(CONTAINERS / "check.py"), "--kind", kind,
         "--train-python", sys.executable, "--energy-python", sys.executable],
        text=True, capture_output=True, env={"PYTHONPATH": f"{ROOT}:{tmp_path}"})


def test_check_passes_an_image_that_has_everything(tmp_path):
    done = check("cuda", tmp_path, ("pynvml", "torchrun_jsc"))
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line == (f"CARAML container: {sys.executable}: torch=9.9 megatron.core=9.9 "
                    "torchrun_jsc=9.9 jpwr=ok pynvml=9.9 cuda_devices=3")


def test_check_names_each_missing_module(tmp_path):
    done = check("ipu", tmp_path, ())
    assert done.returncode == 1
    errors = done.stderr.strip().splitlines()
    assert errors[0] == (f"CARAML ERROR: {sys.executable} in this image cannot import poptorch "
                         "(ModuleNotFoundError: No module named 'poptorch')")
    assert errors[1].startswith(f"CARAML ERROR: {sys.executable} in this image cannot import gcipuinfo")
    assert len(errors) == 2


def requirements(tmp_path, *args):
    # the image's Python: without site-packages (-S), its distributions those
    # of tmp_path/image (PYTHONPATH), whatever this test's environment holds
    image = tmp_path / "image"
    return subprocess.run([sys.executable, "-S", str(CONTAINERS / "requirements.py"), *args],
                          text=True, capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(image)})


def test_requirements_leave_out_what_the_image_has(tmp_path):
    for dist, version in (("numpy", "2.1.0"), ("megatron_core", "0.16.1")):
        info = tmp_path / "image" / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy>=1", "no-such-dist-a>=2"]\n'
        '[project.optional-dependencies]\n'
        'gpu = ["megatron-core==0.16.1", "torchrun-jsc>=0.0.19", "No_Such.Dist-B"]\n')
    with_deps = requirements(tmp_path, "pyproject.toml", "gpu", "--with-deps")
    assert with_deps.stdout.split() == ["no-such-dist-a>=2", "No_Such.Dist-B"]
    # built on torch: without dependencies, and megatron-core is already here
    no_deps = requirements(tmp_path, "pyproject.toml", "gpu", "--no-deps")
    assert no_deps.stdout.split() == ["torchrun-jsc>=0.0.19"]
    unknown = requirements(tmp_path, "pyproject.toml", "tpu", "--no-deps")
    assert unknown.returncode == 1 and "no extra tpu" in unknown.stderr


# `jube result` after a container build: the `container` table (the build
# job of each system), never the benchmark's tables nor JUBE's error about a
# step the build does not have
@pytest.mark.parametrize("script, tags, system, container", [
    ("image_classification/image_classification_torch_benchmark.xml", ("A100",), "A100", "nvidia_x86"),
    ("llm_training/llm_benchmark_nvidia_amd.yaml", ("800M", "JEDI"), "JEDI", "nvidia_arm64"),
    ("llm_training/llm_benchmark_ipu.yaml", ("synthetic",), "GC200", "ipu"),
    ("operator_benchmark/fno_benchmark.xml", ("MI300X",), "MI300X", "rocm"),
], ids=["image", "llm", "ipu", "operator"])
def test_the_result_of_a_container_build_is_its_table(tmp_path, script, tags, system, container):
    run = JubeRun(script, tmp_path / "run", env={**os.environ, "CARAML_ACCOUNT": "p"})
    run.run(*tags, "container", "dryrun")
    # a dry run ends at once, its job scripts where docs/systems.md says
    assert run.status() == "FINISHED"
    assert all((work / "job.sh").is_file() for work in run.work_dirs("build_container"))
    shown = run.jube("result", str(run.outpath), "-i", "last")
    lines = shown.strip().splitlines()
    assert lines[0] == "container:" and "result:" not in lines and "issues:" not in lines, shown
    assert [c.strip() for c in lines[1].strip("|").split("|")] == ["System", "Container", "Status", "Cause"]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[3:]]
    rows = [row for row in cells if row[0]]  # a long cause goes on over the lines below its row
    assert rows and all(row[:3] == [system, container, "dry-run"] for row in rows), shown

    # the build job's end decides: built with status 0, failed otherwise; the
    # job script writes the row's lines at its end (aux/job.sh.in), as here
    [work, *_] = run.work_dirs("build_container")
    for status, expected in (("0", "built"), ("1", "failed")):
        (work / "job.out").write_text("CARAML job: start=2026-11-26T10:00:00+00:00 host=n1 job_id=7\n"
                                      f"CARAML job: end=2026-11-26T10:30:00+00:00 status={status}\n")
        subprocess.run([sys.executable, "-m", "caraml.row.row_out"], cwd=work, check=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        shown = run.jube("result", str(run.outpath), "-i", "last")
        first = [c.strip() for c in shown.strip().splitlines()[3].strip("|").split("|")]
        assert first[2] == expected, shown


def test_a_container_build_that_cannot_start_says_why_in_its_table(tmp_path):
    run = JubeRun("image_classification/image_classification_torch_benchmark.xml", tmp_path / "run")
    run.run("CPU", "container")
    shown = run.jube("result", str(run.outpath), "-i", "last")
    [row] = [line for line in shown.splitlines() if line.startswith("|    CPU")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "failed" and "CPU has no container" in cells[3], shown
