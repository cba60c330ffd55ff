"""The timed iterations as a named energy window: where the driver core's
loop opens and closes it, and that a real driver run leaves it in the energy files
for `jpwr combine`."""

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass

import pandas as pd

from caraml.node import driver
from caraml.node.energy import TIMED
from caraml.node.options import DriverOptions
from caraml.node.stopping import StopCondition
from llm_training.pretrain_gpt import main as pretrain_main

# tests/llm/llm_helpers.py's tiny GPT, spelled out: that module is not a package.
TINY_GPT = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
            "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
            "--micro-batch-size", "2", "--global-batch-size", "4", "--num-workers", "0",
            "--device", "cpu", "--log-interval", "1"]


@dataclass(frozen=True, kw_only=True)
class Opts(DriverOptions):
    pass


class Recorder:
    """Stands in for a jpwr scope and the device sync: records what happens
    when, on the loop's own iteration count."""

    def __init__(self):
        self.events = []
        self.iteration = 0

    def begin_window(self, name):
        self.events.append(("begin", name, self.iteration))

    def end_window(self, name):
        self.events.append(("end", name, self.iteration))

    def sync(self):
        self.events.append(("sync", None, self.iteration))


def loop_with(recorder, dist, monkeypatch, iterations, warmup):
    """The driver core's loop with the recorder as the energy scope and as
    the device sync."""
    monkeypatch.setattr(type(dist), "sync", lambda self: recorder.sync())

    def step():
        recorder.iteration += 1

    opts = Opts(train_iters=iterations, warmup_iters=warmup, log_interval=1000,
                energy_methods=("estimate",), energy_dir="unused")
    return driver.train_loop(step, opts, dist, StopCondition(max_iterations=iterations),
                             lambda rank: contextlib.nullcontext(recorder),
                             lambda *a: "progress")


def test_the_loop_brackets_exactly_the_timed_iterations(single_cpu, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # where provenance.json goes
    recorder = Recorder()
    result = loop_with(recorder, single_cpu, monkeypatch, iterations=7, warmup=3)
    assert len(result.durations) == 4
    edges = [e for e in recorder.events if e[0] != "sync"]
    assert edges == [("begin", TIMED, 3), ("end", TIMED, 7)]
    # The device is synchronised right before each edge.
    for edge in edges:
        assert recorder.events[recorder.events.index(edge) - 1][0] == "sync"


def test_no_window_without_timed_iterations(single_cpu, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    recorder = Recorder()
    loop_with(recorder, single_cpu, monkeypatch, iterations=3, warmup=5)
    assert [e for e in recorder.events if e[0] != "sync"] == []


def test_an_llm_run_leaves_its_timed_window_for_combine(tmp_path, capsys):
    before = time.time()
    code = pretrain_main([*TINY_GPT, "--train-iters", "6", "--warmup-iters", "2",
                          "--energy-methods", "estimate", "--energy-dir", str(tmp_path)])
    after = time.time()
    capsys.readouterr()
    assert code == 0
    run = pd.read_csv(tmp_path / "energy_rank0.csv").iloc[0]
    window = pd.read_csv(tmp_path / "windows_rank0.csv").iloc[0]
    assert window.window == TIMED and window.scope == "host-estimate"
    # Opened and closed during the run, in this order; where the sampler's
    # first and last samples fall around it depends on the machine's speed.
    assert before < window.t_start < window.t_end < after
    assert before < run.t_start <= run.t_end < after
    combined = subprocess.run([sys.executable, "-m", "jpwr", "combine", str(tmp_path)],
                              capture_output=True, text=True, check=True).stdout
    assert any(line.startswith("jpwr-window: window=timed ") for line in combined.splitlines())


def test_a_full_disk_at_the_close_keeps_the_drivers_result_lines(tmp_path, capsys, monkeypatch):
    from jpwr import files

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.RunFiles, "close_power", full)
    monkeypatch.setattr(files.RunFiles, "write_table", full)
    code = pretrain_main([*TINY_GPT, "--train-iters", "3", "--warmup-iters", "1",
                          "--energy-methods", "estimate", "--energy-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0
    assert "CARAML global:" in out.out and "tokens_per_s=" in out.out
    assert "No space left on device" in out.err
