"""The lock (aux/lock/) is complete and hashed for the platforms the suite
runs on, matches pyproject.toml, and keeps the test-only packages out of
the main command's layer."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "aux"))
import lock  # noqa: E402

# x86_64 and aarch64 (GH200) Linux, each Python the suite supports
NODES = [lock.target_env(python, machine) for machine in ("x86_64", "aarch64")
         for python in ("3.11", "3.12", "3.13")]


def _installed(names: list[str], env: dict) -> dict[str, lock.Entry]:
    """What `pip install -r` of these layers installs on that node: name -> entry"""
    chosen: dict[str, lock.Entry] = {}
    for layer in lock.layers_for(names):
        for entry in lock.entries(layer.path):
            if entry.applies(env):
                assert entry.name not in chosen, f"{entry.name} twice for {env['platform_machine']} " \
                                                 f"Python {env['python_version']}"
                chosen[entry.name] = entry
    return chosen


def test_every_line_of_every_layer_is_pinned_and_hashed():
    for layer in lock.LAYERS:
        text = layer.path.read_text()
        assert "#    python3 aux/lock.py" in text.splitlines()[1], layer.path
        found = lock.entries(layer.path)
        assert found, layer.path
        for entry in found:
            assert entry.version and "--hash=sha256:" in entry.text, entry.text
        heads = [line for line in text.splitlines() if line[:1].isalnum()]
        assert len(heads) == len(found) and all("==" in h for h in heads), layer.path


@pytest.mark.parametrize("env", NODES, ids=lambda e: f"{e['platform_machine']}-{e['python_version']}")
def test_each_layer_holds_what_pyproject_asks_for_on_every_node(env):
    """Each requirement of a layer's extras (and the core's and the build
    backend's) resolves to one locked version that satisfies it, on every
    node: the lock is current and complete for what the suite names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    # all of them together (a wheelhouse holds every layer): each package once
    _installed([c.name for c in lock.LAYERS], env)
    for layer in lock.LAYERS:
        chosen = _installed([layer.name], env)
        asked = project["project"]["dependencies"] + project["build-system"]["requires"]
        asked += [r for name in layer.extras for r in extras[name] if lock.name_of(r) != "caraml"]
        for text in asked:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate(env):
                continue
            entry = chosen.get(lock.name_of(requirement.name))
            assert entry, f"{text} (extra of layer {layer.name}) is not locked: run python3 aux/lock.py"
            assert requirement.specifier.contains(entry.version, prereleases=True), \
                f"{text}: the lock has {entry.version}; run python3 aux/lock.py"


def test_the_main_layer_has_no_test_packages_and_the_test_layer_adds_them():
    for env in NODES:
        main = _installed(["main"], env)
        assert not {"pytest", "transformers", "reframe-hpc", "tables", "wandb", "amdsmi"} & set(main)
        assert {"torch", "torchvision", "megatron-core", "neuraloperator", "setuptools"} <= set(main)
        with_tests = _installed(["test"], env)
        assert {"pytest", "transformers", "reframe-hpc", "tables"} <= set(with_tests)
        assert "wandb" not in with_tests


def test_a_layer_pins_nothing_its_bases_pin():
    for layer in lock.LAYERS:
        own = {e.name for e in lock.entries(layer.path) if e.marker != lock.NEVER}
        for base in layer.bases:
            theirs = {e.name for e in lock.entries(lock.layer(base).path) if e.marker != lock.NEVER}
            assert not own & theirs, f"{layer.name} pins again what {base} pins: {sorted(own & theirs)}"


def test_a_node_on_its_own_torch_gets_neither_torch_nor_its_cuda_libraries():
    found = lock.entries(lock.layer("main").path)
    only = lock.framework_only(found)
    assert {"torch", "torchvision", "triton", "nvidia-cublas", "nvidia-nccl-cu13"} <= only
    # what the suite or its other packages need stays, even when torch needs it too
    assert not {"numpy", "jinja2", "filelock", "fsspec", "setuptools", "typing-extensions"} & only


def test_the_layers_a_name_brings():
    assert [c.name for c in lock.layers_for([])] == ["main"]
    assert [c.name for c in lock.layers_for(["reframe"])] == ["main", "reframe"]
    assert [c.name for c in lock.layers_for(["test", "reframe"])] == ["main", "reframe", "h5", "test"]
    with pytest.raises(SystemExit, match="'hdf5' is no layer of the lock"):
        lock.layers_for(["hdf5"])
