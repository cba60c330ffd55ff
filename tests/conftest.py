"""Fixtures shared by the test suite: a temporary results history, real
Slurm clusters, one node on localhost and two nodes in namespaces of this
machine, and the JUBE runs that several tests read."""

from __future__ import annotations

import os

import pytest

try:
    from _pytest.nodeid import NodeId
except ImportError:  # pytest before 9 reads xdist's attribute itself (a GPU node's own pytest)
    NodeId = None

from caraml.row import history
from tests.checkouts import RUNNABLE, MainCommand, checkout_with_venv, main_command
from tests.jube_runs import JubeRun
from tests.pm_counters_files import DrivenCounters, PmCounterFolder
from tests.slurm_cluster import (
    METER_CONFIG,
    NODE_PARTS,
    NODE_WATTS,
    LocalSlurm,
    NamespacedSlurm,
    SlurmUnavailable,
)

# the process group a driver makes, for the tests that run driver code here
pytest_plugins = ("tests.dist_fixtures",)

# The suite runs on three workers (pytest-xdist; pyproject.toml's addopts).
# Tests that share something costly run on one worker, so that it is made
# once: a module fixture, or one of the suite's session fixtures (a Slurm
# cluster: two clusters of this host would hand the same job ids, and so
# the same rendezvous ports, to jobs at once; a JUBE run; the systems' dry
# runs). The GPU tests take turns on the node's GPUs. Any other test goes
# wherever a worker is free.
NOT_SHARED = {"history_file"}  # autouse and cheap: every test has its own worker's


def _find(parent: dict[str, str], key: str) -> str:
    while parent.setdefault(key, key) != key:
        key = parent[key]
    return key


def _shared(item) -> list[str]:
    """The test itself, then what it shares with others: the suite's
    session and module fixtures it uses (pytest's own have no base node),
    and the GPU."""
    keys = [item.nodeid]
    for name, defs in item._fixtureinfo.name2fixturedefs.items():
        scope, base = defs[-1].scope, defs[-1].baseid
        if base and name not in NOT_SHARED and scope in ("session", "module"):
            keys.append(f"{name} of {item.path}" if scope == "module" else name)
    return keys + (["gpu"] if item.get_closest_marker("gpu") else [])


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups too
def pytest_collection_modifyitems(config, items):
    parent: dict[str, str] = {}
    shared = [_shared(item) for item in items]
    for test, *others in shared:
        for key in others:
            parent[_find(parent, key)] = _find(parent, test)
    for item, (test, *others) in zip(items, shared):
        if others:
            item.add_marker(pytest.mark.xdist_group(_find(parent, test)))


@pytest.hookimpl(tryfirst=True)  # before a worker reports its tests
def pytest_collection_finish(session):
    if NodeId is not None and session.config.getoption("loadgroup", False):  # on a worker
        # pytest-xdist 3.8 puts the group into the test's id through an
        # attribute that pytest 9 no longer reads: the id as it means it
        for item in session.items:
            for mark in item.iter_markers("xdist_group"):
                item._id = NodeId.parse(f"{item.nodeid}@{mark.args[0]}")


@pytest.fixture(scope="session", autouse=True)
def history_file(tmp_path_factory):
    """The results history of every row the tests' runs decide: a temporary
    file, never the checkout's results/caraml_rows.sqlite (the row model and
    every JUBE run the tests start read $CARAML_HISTORY)."""
    path = tmp_path_factory.mktemp("history") / "caraml_rows.sqlite"
    before = os.environ.get(history.ENV)
    os.environ[history.ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(history.ENV, None)
    else:
        os.environ[history.ENV] = before


# One JUBE run of each for the whole session, shared by the tests that check
# different things of the same run (its row, its tables, the history, what
# other commands make of it). They only read it: a test that changes a run's
# files (to see what the row model makes of them) runs its own.
def _cpu_smoke(tmp_path_factory, script: str) -> JubeRun:
    run = JubeRun(script, tmp_path_factory.mktemp("cpu_smoke") / "run", env=dict(os.environ))
    run.run("CPU", "smoke")
    return run


@pytest.fixture(scope="session")
def image_cpu_smoke(tmp_path_factory, history_file) -> JubeRun:
    """The image benchmark's CPU smoke run on this host."""
    return _cpu_smoke(tmp_path_factory, "image_classification/image_classification_torch_benchmark.xml")


@pytest.fixture(scope="session")
def llm_cpu_smoke(tmp_path_factory, history_file) -> JubeRun:
    """The LLM benchmark's CPU smoke run on this host, on its local corpus."""
    return _cpu_smoke(tmp_path_factory, "llm_training/llm_benchmark_nvidia_amd.yaml")


def _started(cluster: LocalSlurm, what: str):
    """The cluster, started; a skip (or, where CI sets CARAML_REQUIRE_SLURM=1,
    a failure) with the reason where it cannot be had."""
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        cluster.stop()
        if os.environ.get("CARAML_REQUIRE_SLURM"):
            raise
        pytest.skip(f"no {what}: {exc}")
    return cluster


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real slurmctld + slurmd on localhost for the whole session."""
    cluster = _started(LocalSlurm(tmp_path_factory.mktemp("slurm")), "local Slurm cluster")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def image_slurm_smoke(slurm, tmp_path_factory, history_file):
    """The image benchmark's CPU smoke run through the session's Slurm
    cluster: (the run, its table looked at while the job was held in the
    queue, its table once the job had run)."""
    run = JubeRun("image_classification/image_classification_torch_benchmark.xml",
                  tmp_path_factory.mktemp("image_slurm_smoke") / "run", env=slurm.env)
    with slurm.queue_held():  # until the first look is done
        run.run("CPU", "smoke", "slurm")
        while_queued = run.table()
    return run, while_queued, run.after_slurm(slurm)


@pytest.fixture(scope="session")
def main_command_through_slurm(slurm, tmp_path_factory, history_file) -> MainCommand:
    """The README's main command, its CPU smoke run through the session's
    Slurm cluster, from a copy of the checkout under a RUNNABLE path: what it
    printed (tests/reliability/test_following_a_run.py) and its runs, whose
    rows each benchmark's end-to-end tests check."""
    checkout = checkout_with_venv(tmp_path_factory.mktemp("through_slurm") / RUNNABLE / "caraml")
    return MainCommand(checkout, main_command(checkout, "CPU", "smoke", "slurm", env=slurm.env))


@pytest.fixture(scope="session")
def slurm2n(tmp_path_factory):
    """Two Slurm nodes, cn1 and cn2, each slurmd in its own network, UTS and
    mount namespace, one CPU each, for the whole session."""
    cluster = _started(NamespacedSlurm(tmp_path_factory.mktemp("slurm2n"), nodes=2),
                       "two-node Slurm cluster")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def metered_slurm2n(tmp_path_factory):
    """Two nodes in namespaces (as slurm2n) whose slurmd reads node energy
    through acct_gather_energy/pm_counters from /sys/cray/pm_counters,
    where each node sees counters of its own that a thread of this process
    drives at NODE_WATTS, updated 20 times a second."""
    cluster = NamespacedSlurm(tmp_path_factory.mktemp("metered"), nodes=2,
                              extra_config=METER_CONFIG + "PrologFlags=Contain\n",
                              pm_counters=True)
    drivers = [DrivenCounters(PmCounterFolder(cluster.pm_counters_dir(node), raw_scan_hz=20),
                              watts, NODE_PARTS).start() for node, watts in NODE_WATTS.items()]
    try:
        yield _started(cluster, "two-node Slurm cluster with node meters")
        cluster.stop()
    finally:
        for driver in drivers:
            driver.stop()


@pytest.fixture(scope="module")
def meterless_slurm(tmp_path_factory):
    """One node on localhost whose Slurm reads node energy through
    acct_gather_energy/pm_counters, on a host that has no such counters:
    a meter that never answers. Without an extern step, as many clusters."""
    cluster = LocalSlurm(tmp_path_factory.mktemp("meterless"), extra_config=METER_CONFIG)
    yield _started(cluster, "local Slurm cluster with a node meter configured")
    cluster.stop()


# Partitions that refuse by their own rules: `alpha` lets only the account
# alpha in (without an accounting database Slurm knows no account, so it
# takes no job at all), `short` runs 5 minutes at most; the default
# partition is alpha.
LIMITED_PARTITIONS = ("PartitionName=alpha Nodes=localhost AllowAccounts=alpha Default=YES "
                      "MaxTime=INFINITE State=UP\n"
                      "PartitionName=short Nodes=localhost MaxTime=00:05:00 State=UP\n")


def _limited(tmp_path_factory, enforce: str):
    cluster = LocalSlurm(tmp_path_factory.mktemp(f"slurm-limits-{enforce.lower()}"),
                         extra_config=LIMITED_PARTITIONS + f"EnforcePartLimits={enforce}\n")
    return _started(cluster, "local Slurm cluster with partition limits")


@pytest.fixture(scope="module")
def strict_slurm(tmp_path_factory):
    """A one-node cluster whose sbatch refuses a job that breaks a
    partition's limits or AllowAccounts (EnforcePartLimits=ALL)."""
    cluster = _limited(tmp_path_factory, "ALL")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def lenient_slurm(tmp_path_factory):
    """The same partitions, and sbatch takes such a job, which then pends
    for ever (EnforcePartLimits=NO)."""
    cluster = _limited(tmp_path_factory, "NO")
    yield cluster
    cluster.stop()
