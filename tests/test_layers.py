"""The layers: imports run one way only (aux -> benchmarks -> caraml ->
jpwr; inside caraml, compare and regression -> login -> row -> job -> the
shared modules, and node -> the shared modules), jpwr knows nothing of
JUBE, the node side (caraml/node/) reads and writes no row, the row model
imports no login tool, the job script's helpers (caraml/job/) nothing
above them, and the login-node tools need nothing beyond the standard
library and the suite's JUBE adapter (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from caraml import benchmarks

REPO = Path(__file__).resolve().parents[1]
# the benchmarks' packages, from the benchmark table: each driver's top package
BENCHMARKS = tuple(sorted({entry.driver.split(".")[0] for entry in benchmarks.BUILT_IN}))


def imported(path: Path, members: bool = False) -> set[str]:
    """Every module the file imports, at any depth; with members, also each
    name of `from package import name` as package.name (a module or not)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
            if members:
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, set[str]]:
    found = {}
    for path in modules(package):
        bad = {name for name in imported(path) if name.split(".")[0] in forbidden}
        if bad:
            found[str(path.relative_to(REPO))] = bad
    return found


def test_caraml_imports_no_benchmark():
    assert offenders("caraml", (*BENCHMARKS, "aux")) == {}


# What the node side may import of the suite: the JUBE adapter and the
# tables both sides share, never the row model, the login tools, the
# comparison or ReFrame's checks
NODE_SHARED = ("caraml.report", "caraml.benchmarks", "caraml.benchmark_entry", "caraml.device_peaks",
               "caraml.power_limit",
               "caraml.rocm_tf32")


def suite_imports(package: str, allowed: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of the package that imports a module of caraml other than
    the allowed ones (each allowed name with what lies below it)."""
    found = {}
    for path in modules(package):
        bad = {name for name in imported(path, members=True) if name.startswith("caraml")
               and not name.startswith(allowed) and name != "caraml"}
        if bad:
            found[str(path.relative_to(REPO))] = bad
    return found


def test_the_node_side_imports_no_row_and_no_login_tool():
    assert suite_imports("caraml/node", ("caraml.node", *NODE_SHARED)) == {}


# What lies above the row model: the login tools, the comparison, ReFrame's
# checks; and the node side, which is no layer of the row's
ABOVE_THE_ROW = ("caraml.login", "caraml.compare", "caraml.regression", "caraml.node")


def importing(package: str, forbidden: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of the package that imports one of the forbidden modules
    or packages (or what lies in them)."""
    return {str(path.relative_to(REPO)): bad for path in modules(package)
            if (bad := {n for n in imported(path, members=True)
                        if any(n == f or n.startswith(f + ".") for f in forbidden)})}


def test_the_row_model_imports_no_login_tool():
    """The row model reads what the job's helpers left (caraml/job/), never
    a tool that runs it (caraml/login/), the comparison or ReFrame's checks."""
    assert importing("caraml/row", ABOVE_THE_ROW) == {}


def test_the_job_script_helpers_import_nothing_above_them():
    """caraml/job/ runs on the node beside the driver and the row model reads
    what it leaves: it imports only the shared modules (the JUBE adapter, the
    power-limit points), never the row model or what lies above it."""
    assert suite_imports("caraml/job", ("caraml.job", *NODE_SHARED)) == {}


def test_jpwr_imports_nothing_of_the_suite():
    assert offenders("jpwr", ("caraml", *BENCHMARKS, "aux")) == {}


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_benchmarks_do_not_import_each_other_or_aux(benchmark):
    others = tuple(b for b in BENCHMARKS if b != benchmark)
    assert offenders(benchmark, (*others, "aux")) == {}


def test_jpwr_knows_nothing_of_jube():
    assert [str(p) for p in (REPO / "jpwr").rglob("*") if p.is_file()
            and p.suffix in (".py", ".md") and "jube" in p.read_text().lower()] == []


# What the login node's python3 (and the node's, for the job script's
# helpers) may import of the suite besides the login tools, the row model
# and caraml/job: the JUBE adapter, JUBE's record of a run, and the tables
# and rules the row reads, all standard library only (jpwr's power limit
# scopes too, which are)
LOGIN_SHARED = ("caraml/report.py", "caraml/jube_run.py", "caraml/device_peaks.py", "caraml/benchmarks.py",
                "caraml/benchmark_entry.py",
                "caraml/power_limit.py", "caraml/rocm_tf32.py", "jpwr/gpu/power_limit.py",
                "jpwr/gpu/visible.py", "jpwr/method.py", "jpwr/notice.py")
LOGIN_PACKAGES = ("caraml/login", "caraml/row", "caraml/job")


def _login_files() -> list[Path]:
    return [p for package in LOGIN_PACKAGES for p in modules(package)] + [REPO / p for p in LOGIN_SHARED]


def test_login_tools_and_the_row_model_need_the_standard_library_and_the_jube_adapter_only():
    # PyYAML: JUBE needs it
    allowed = {_module(p) for p in _login_files()} | {"caraml", "jpwr", "jpwr.gpu", "yaml"}
    found = {str(p.relative_to(REPO)): bad for p in _login_files()
             if (bad := {n for n in imported(p, members=True) if n not in allowed
                         and n.split(".")[0] not in sys.stdlib_module_names
                         and not (n.rpartition(".")[0] in allowed and n.rpartition(".")[0] not in
                                  ("caraml", "jpwr", "jpwr.gpu"))})}
    assert found == {}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def test_no_module_of_the_suite_imports_one_that_imports_it_back():
    """No circle between modules, not even for a type."""
    paths = [p for package in ("caraml", "jpwr", *BENCHMARKS) for p in modules(package)]
    known = {_module(p) for p in paths}
    graph = {_module(p): {n for n in imported(p, members=True) if n in known} for p in paths}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and not seen.add(n) and reaches(n, goal, seen))
                   for n in graph.get(start, ()))
    assert sorted(m for m in graph if reaches(m, m, set())) == []


def test_the_row_model_is_read_in_files_of_at_most_300_lines():
    long = {str(p.relative_to(REPO)): n for p in modules("caraml/row")
            if (n := len(p.read_text().splitlines())) > 300}
    assert long == {}
