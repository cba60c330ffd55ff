"""The benchmark table: every benchmark once, each entry's script and driver
in the checkout, its data step and job where it has them, and a site's own
benchmark joining through CARAML_BENCHMARKS. The tests read the table: a
site's registered benchmark is checked as the suite's own are."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from caraml import benchmarks


def test_each_built_in_benchmark_has_its_script_driver_and_outpath_in_the_checkout():
    for entry in benchmarks.BUILT_IN:
        assert benchmarks.script_path(entry).is_file(), entry.script
        assert (benchmarks.ROOT / (entry.driver.replace(".", "/") + ".py")).is_file(), entry.driver
        # JUBE's outpath is the script's folder's: the table's is the same from the checkout
        assert entry.outpath.rsplit("/", 1)[0] == entry.script.rsplit("/", 1)[0]
        assert os.path.basename(entry.outpath) in benchmarks.script_path(entry).read_text()


def test_a_registered_file_adds_a_benchmark_and_a_wrong_one_is_named(tmp_path):
    extra = tmp_path / "mine.py"
    extra.write_text("from caraml.benchmarks import Benchmark, Figures\n"
                     "BENCHMARK = Benchmark('mine', 'mine.train', 'mine/mine.xml', 'mine/run', "
                     "'samples', Figures('samples_per_s_mean', 'samples_per_s_median', "
                     "'samples_per_s_per_device'))\n")
    environ = {benchmarks.REGISTRY_ENV: str(extra)}
    assert benchmarks.names(environ) == (*(entry.name for entry in benchmarks.BUILT_IN), "mine")
    assert benchmarks.get("mine", environ).unit == "samples"
    with pytest.raises(benchmarks.UnknownBenchmark, match="unknown benchmark 'mine'"):
        benchmarks.get("mine", {})
    twice = {benchmarks.REGISTRY_ENV: os.pathsep.join([str(extra), str(extra)])}
    with pytest.raises(benchmarks.UnknownBenchmark, match="mine is defined twice"):
        benchmarks.names(twice)
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(benchmarks.UnknownBenchmark, match="defines no BENCHMARK"):
        benchmarks.names({benchmarks.REGISTRY_ENV: str(empty)})
    with pytest.raises(benchmarks.UnknownBenchmark, match="which is no Python file"):
        benchmarks.names({benchmarks.REGISTRY_ENV: str(tmp_path / "nowhere.py")})


def test_every_driver_is_a_contention_marker():
    from caraml.node import provenance
    for entry in benchmarks.BUILT_IN:
        assert entry.driver in provenance.benchmark_markers()


def test_a_registered_file_that_raises_is_named_in_one_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import caraml_no_such_site_module\n")
    with pytest.raises(benchmarks.UnknownBenchmark) as err:
        benchmarks.names({benchmarks.REGISTRY_ENV: str(broken)})
    assert str(err.value) == (f"CARAML_BENCHMARKS names {broken}, which fails as it is read "
                              "(ModuleNotFoundError: No module named 'caraml_no_such_site_module'): "
                              "fix the file or take it out of CARAML_BENCHMARKS")


@pytest.mark.parametrize("command", [["-m", "caraml.benchmarks", "scripts"],
                                     ["-m", "caraml.compare.cli", "{run}", "--out", "out"]])
def test_the_commands_say_a_missing_registered_file_in_one_line(tmp_path, command):
    from tests.compare import rowfixtures as fx
    run = fx.write_run(tmp_path, "a", [fx.a100()])
    command = [word.replace("{run}", str(run)) for word in command]
    missing = tmp_path / "nowhere.py"
    done = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, benchmarks.REGISTRY_ENV: str(missing)}, timeout=120)
    assert "Traceback" not in done.stderr and done.returncode != 0, done.stderr
    [line] = done.stderr.splitlines()
    assert f"CARAML_BENCHMARKS names {missing}, which is no Python file" in line, line


def test_every_entrys_data_step_and_job_are_whole():
    """A data step names a step and a parameter of its JUBE script; a job's
    settings are caraml-compare options no other job declares, and its work
    is a number for its representative configuration."""
    from caraml.compare import jobs

    settings = jobs.settings()  # one name, one setting
    for entry in benchmarks.all_benchmarks():
        script = benchmarks.script_path(entry).read_text()
        if entry.data_step is not None:
            assert f"{entry.data_step.step}" in script and f"{entry.data_step.args}" in script, entry.name
        if entry.job is not None:
            assert all(settings[s.name] == s and s.flag.startswith("--") for s in entry.job.settings)
            model, size = entry.job.representative
            work, how = entry.job.work({"model": model, "size": size, "params": None},
                                       jobs.Jobs().settings)
            assert work > 0 and how, entry.name
