"""Fixtures that put the fake device layers of jpwr_fakes in place: sysfs
and procfs trees through JPWR_SYSFS_ROOT / JPWR_PROCFS_ROOT, and vendor
bindings through sys.modules."""

from __future__ import annotations

import sys

import pytest
from jpwr_fakes import FakeProcStat, FakeSysfs, SyntheticPower, fake_sysfs, wait_for, without_vendor_libraries


@pytest.fixture
def sysfs(tmp_path, monkeypatch) -> FakeSysfs:
    return fake_sysfs(tmp_path, monkeypatch)


@pytest.fixture
def proc_stat(tmp_path, monkeypatch) -> FakeProcStat:
    root = tmp_path / "proc"
    root.mkdir()
    monkeypatch.setenv("JPWR_PROCFS_ROOT", str(root))
    stat = FakeProcStat(root, cpus=4)
    stat.advance(busy=1000, idle=1000)
    return stat


@pytest.fixture
def no_vendor_libraries(monkeypatch):
    """As on a node without accelerators, even where the test machine has
    some of the bindings installed."""
    without_vendor_libraries(monkeypatch)


@pytest.fixture
def install(monkeypatch, no_vendor_libraries):
    """install(name, module) puts a fake binding in place of the real one."""
    def put(name: str, module) -> None:
        monkeypatch.setitem(sys.modules, name, module)
    return put


@pytest.fixture
def synthetic():
    return SyntheticPower


@pytest.fixture
def wait():
    return wait_for
