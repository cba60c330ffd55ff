"""The jpwr command: bad input, exit status, signals, a SIGKILL'd run, and
jpwr combine."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from jpwr_fakes import wait_for

from jpwr.aggregate import FROM_SAMPLES, combine
from jpwr.cli import main, split_command


@pytest.fixture
def cli_env(sysfs):
    """Environment for a jpwr subprocess: an empty sysfs, and the machine's
    own /proc/stat, whose ticks move on as the estimate needs."""
    env = dict(os.environ)
    env.pop("JPWR_PROCFS_ROOT", None)
    env.update(JPWR_SYSFS_ROOT=str(sysfs.root), PYTHONUNBUFFERED="1")
    return env


def jpwr(*args, **popen):
    return subprocess.Popen([sys.executable, "-m", "jpwr", *args], stdin=subprocess.DEVNULL,
                            start_new_session=True, **popen)


def test_split_command_finds_where_the_command_begins():
    assert split_command(["--methods", "pynvml", "gh", "--interval", "50", "python", "-m", "x"]) == (
        ["--methods", "pynvml", "gh", "--interval", "50"], ["python", "-m", "x"])
    assert split_command(["--methods", "pynvml,gh", "gh-tool", "--methods"]) == (
        ["--methods", "pynvml,gh"], ["gh-tool", "--methods"])
    assert split_command(["--methods", "nvml", "sleep", "1"]) == (["--methods", "nvml"], ["sleep", "1"])
    assert split_command(["--methods", "rapl", "--", "rapl", "x"]) == (["--methods", "rapl"], ["rapl", "x"])


@pytest.mark.parametrize("args, message", [
    (["--methods", "nvml"], "unknown method 'nvml'"),
    (["--methods", "estimate", "--interval", "0"], "--interval must be a positive"),
    (["--methods", "estimate", "--interval", "-3"], "--interval must be a positive"),
    (["--methods", "estimate", "--df-filetype", "xls"], "invalid choice: 'xls'"),
    (["--methods", "estimate", "--df-suffix", "_%q{JPWR_TEST_UNSET}", "--df-out", "{tmp}"],
     "JPWR_TEST_UNSET is not set"),
    (["--interval", "10"], "required: --methods"),
    # upstream's MPI options (tests/jpwr/test_jpwr_mpi.py): the ranks need --use-mpi
    (["--methods", "estimate", "--mpi-ranks", "0", "1"], "--mpi-ranks needs --use-mpi"),
])
def test_bad_input_is_one_line_and_the_command_never_starts(args, message, tmp_path, proc_stat,
                                                            capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    marker = tmp_path / "started"
    args = [a.replace("{blocker}", str(blocker)).replace("{tmp}", str(tmp_path)) for a in args]
    status = main([*args, "touch", str(marker)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and not marker.exists()
    assert len(err) == 1 and err[0].startswith("jpwr: error: ") and message in err[0], err


def test_missing_command(proc_stat, capsys):
    assert main(["--methods", "estimate"]) == 2
    assert capsys.readouterr().err.startswith("jpwr: error: no command given")


def test_command_not_found(proc_stat, capsys):
    assert main(["--methods", "estimate", "jpwr-no-such-command"]) == 127
    assert capsys.readouterr().err.strip() == "jpwr: error: command not found: jpwr-no-such-command"


def test_unavailable_method_is_one_line(sysfs, no_vendor_libraries, capsys):
    assert main(["--methods", "rapl", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jpwr: error: rapl: no powercap zone with energy_uj under {sysfs.root}/class/powercap"]


def test_runs_the_command_and_passes_its_exit_status(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("JPWR_PROCFS_ROOT", raising=False)
    monkeypatch.setenv("JPWR_TEST_R", "7")
    out = tmp_path / "out"
    status = main(["--methods", "estimate", "--interval", "10", "--df-out", str(out),
                   "--df-suffix", "_r%q{JPWR_TEST_R}", "sh", "-c", "sleep 0.2; exit 3"])
    assert status == 3
    err = capsys.readouterr().err
    assert re.search(r"jpwr: total \S+ Wh over \S+ s, 1 device\(s\) counted \(estimate, ESTIMATED\)", err)
    # host and pid end each name, as upstream jpwr's do (this run's pid: main ran here)
    tail = f"_r7.{socket.gethostname()}.{os.getpid()}"
    assert {p.name for p in out.iterdir()} == {f"power{tail}.csv", f"energy{tail}.csv", f"meta{tail}.json"}
    assert pd.read_csv(out / f"energy{tail}.csv").iloc[0].samples >= 2


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 7), (signal.SIGINT, 5), (signal.SIGUSR1, 9)])
def test_signal_is_forwarded_and_the_data_still_written(sig, code, cli_env, tmp_path):
    child = ("import signal, sys, time\n"
             f"signal.signal({int(sig)}, lambda *a: sys.exit({code}))\n"
             "print('ready', flush=True)\n"
             "time.sleep(60)\n")
    out = tmp_path / "out"
    proc = jpwr("--methods", "estimate", "--interval", "10", "--flush-s", "0.01",
                "--df-out", str(out), sys.executable, "-c", child, env=cli_env,
                stdout=subprocess.PIPE, text=True)
    power = out / f"power.{socket.gethostname()}.{proc.pid}.csv"  # jpwr's own pid
    try:
        assert proc.stdout.readline().strip() == "ready"
        # The energy needs two samples; the child can be ready before the
        # sampler's first one, so wait until two have reached the file.
        wait_for(lambda: power.exists() and len(power.read_text().splitlines()) > 2,
                 "two flushed samples")
        proc.send_signal(sig)  # to jpwr only: its process group is its own
        assert proc.wait(timeout=30) == code
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    energy = pd.read_csv(power.with_name(power.name.replace("power", "energy")))
    assert energy.iloc[0].samples >= 2 and energy.iloc[0].source == "estimated"


def test_sigkilled_run_leaves_its_flushed_samples_for_combine(cli_env, tmp_path):
    out = tmp_path / "out"
    proc = jpwr("--methods", "estimate", "--interval", "10", "--flush-s", "0.1",
                "--df-out", str(out), "--df-suffix", "_rank0", "sleep", "60", env=cli_env)
    power = out / f"power_rank0.{socket.gethostname()}.{proc.pid}.csv"
    try:
        wait_for(lambda: power.exists() and len(power.read_text().splitlines()) > 20,
                 "20 flushed samples")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not list(out.glob("energy*"))
    flushed = len(power.read_text().splitlines()) - 1
    row = combine([out]).iloc[0]
    assert row.origin == FROM_SAMPLES and row.source == "estimated"
    assert row.samples + row.missing >= min(flushed, 20) and row.energy_wh > 0
    result = subprocess.run([sys.executable, "-m", "jpwr", "combine", str(out)],
                            capture_output=True, text=True, env=cli_env)
    assert result.returncode == 0
    assert "did not finish" in result.stderr
    assert len([s for s in result.stdout.splitlines() if s.startswith("jpwr-summary:")]) == 1
    assert "source=estimated" in result.stdout
    # jpwr/README.md shows this run's output: the same columns, lines and note
    readme = (Path(__file__).resolve().parents[2] / "jpwr" / "README.md").read_text()
    shown = readme.split("    $ jpwr combine jpwr-killed\n", 1)[1].split("\n\n", 1)[0]
    shown = [line.removeprefix("    ") for line in shown.splitlines()]

    # every figure (pandas may print one as 1.2e-05), and the folder's name
    figure, folder = r"\d+(\.\d+)?(e[-+]?\d+)?|nan|vm|\S+(?= +0 +estimate)", r"\S*jpwr-killed|\S*/out"

    def shape(lines):
        # a line's words with every figure and the folder's name masked
        return [re.sub(folder, "DIR", re.sub(figure, "N", line)).split() for line in lines]
    assert shape(shown) == shape(result.stdout.splitlines() + result.stderr.splitlines())


def test_combine_prints_a_table_and_exactly_one_summary_line(tmp_path, capsys):
    for rank, device in ((0, "gpu0"), (1, "gpu1")):
        pd.DataFrame([{"host": "n1", "rank": rank, "method": "pynvml", "device": device,
                       "source": "measured", "counted": True, "energy_wh": 0.5, "mean_w": 180.0,
                       "max_w": 200.0, "duration_s": 10.0, "samples": 101, "missing": 0,
                       "t_start": 0.0, "t_end": 10.0}]).to_csv(tmp_path / f"energy_rank{rank}.csv",
                                                              index=False)
        (tmp_path / f"meta_rank{rank}.json").write_text("{}")
    out = tmp_path / "combined.csv"
    assert main(["combine", "--out", str(out), str(tmp_path)]) == 0
    stdout = capsys.readouterr().out.splitlines()
    summary = [line for line in stdout if line.startswith("jpwr-summary:")]
    assert summary == ["jpwr-summary: total_wh=1.0 devices=2 wh_per_device=0.5 "
                       "mean_w_per_device=180.0 max_w=200.0 duration_s=10.0 methods=pynvml "
                       "source=measured scope=gpu basis=integrated counter_vs_integrated_pct=nan "
                       "missing_pct=0.0 complete=yes covered_pct=100.0"]
    assert any("gpu1" in line and "measured" in line for line in stdout)
    assert len(pd.read_csv(out)) == 2


def test_combine_without_data_fails_naming_the_path(tmp_path, capsys):
    assert main(["combine", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0] and err[0].startswith("jpwr: error:")


def test_sigkill_of_jpwr_takes_its_command_with_it(cli_env, tmp_path):
    proc = jpwr("--methods", "estimate", sys.executable, "-c",
                "import os, time; print(os.getpid(), flush=True); time.sleep(60)",
                env=cli_env, stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    try:
        os.kill(proc.pid, signal.SIGKILL)  # jpwr alone, not its process group
        proc.wait()
        wait_for(lambda: not _alive(child), "the command to die with jpwr")
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid):
    """Running, as opposed to gone or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_output_lost_mid_run_keeps_the_commands_status_and_the_summary(sysfs, no_vendor_libraries,
                                                                      tmp_path, capfd):
    """The output directory becomes unwritable while the command runs (here
    the command replaces it by a file): jpwr reports it, prints its summary
    and still exits with the command's status."""
    sysfs.hwmon(0, "psu", power1_input=50_000_000)
    out = tmp_path / "out"
    status = main(["--methods", "hwmon", "--interval", "10", "--df-out", str(out),
                   "sh", "-c", f"sleep 0.1; rm -r '{out}'; touch '{out}'; exit 3"])
    err = capfd.readouterr().err
    assert status == 3
    assert "Traceback" not in err
    assert "jpwr: error: could not write the results" in err
    assert re.search(r"jpwr: total \S+ Wh over", err)


def test_an_output_folder_that_cannot_be_written_runs_the_command_as_the_readme_says(tmp_path, proc_stat,
                                                                                     capsys):
    """The choice: the command is what the user came for, so it runs and its
    exit status is jpwr's; one line says the files are lost. The README says
    the same, and does not list the folder among the refusals."""
    blocker = tmp_path / "blocker"
    blocker.write_text("")  # a file: no folder can be made below it, root or not
    marker = tmp_path / "started"
    status = main(["--methods", "estimate", "--df-out", str(blocker / "out"), "sh", "-c",
                   f"touch '{marker}'; exit 4"])
    err = capsys.readouterr().err
    assert status == 4 and marker.exists()
    warned = [line for line in err.splitlines() if f"cannot write to {blocker / 'out'}" in line]
    assert len(warned) == 1 and warned[0].startswith("jpwr: warning: "), err
    readme = " ".join((Path(__file__).resolve().parents[2] / "jpwr" / "README.md").read_text().split())
    refused = readme.split("Bad input is refused with one line and exit status 2", 1)[1].split(".")[0]
    assert "output" not in refused, refused
    assert ("An output directory that cannot be written (no permission, a full disk, a path "
            "below a file) does not stop CMD") in readme


def test_two_runs_into_one_folder_keep_their_files_and_combine_says_which_counts(cli_env, tmp_path,
                                                                              capsys):
    out = tmp_path / "out"
    for seconds in ("0.05", "0.3"):  # the second starts after the first ended, as a rerun does
        run = jpwr("--methods", "estimate", "--interval", "10", "--df-out", str(out), "sleep", seconds,
                   env=cli_env, stderr=subprocess.DEVNULL)
        assert run.wait(timeout=60) == 0
    metas = sorted(out.glob("meta*.json"), key=lambda p: json.loads(p.read_text())["start_time"])
    assert len(metas) == 2 and len(list(out.glob("energy*.csv"))) == 2
    host = socket.gethostname()
    assert all(re.fullmatch(rf"meta\.{re.escape(host)}\.\d+\.json", p.name) for p in metas)
    assert main(["combine", str(out)]) == 0
    done = capsys.readouterr()
    # the later run's figure alone (its 0.3 s), and a note names the earlier one
    summary = next(line for line in done.out.splitlines() if line.startswith("jpwr-summary:"))
    assert float(summary.split("duration_s=")[1].split()[0]) > 0.25, summary
    assert f"{metas[0]}: an earlier run of host {host} than {metas[1]}; only the later one counts" \
        in done.err, done.err


def test_quiet_leaves_the_notes_out_and_verbose_adds_how_it_measured(monkeypatch, capsys):
    """-q: no per-channel table, no total; -v: the methods' channels and
    the sampling besides; JPWR_LOG_LEVEL and CARAML_LOG_LEVEL set the level
    without them, and a level that is none is named."""
    monkeypatch.delenv("JPWR_PROCFS_ROOT", raising=False)
    monkeypatch.delenv("JPWR_LOG_LEVEL", raising=False)
    monkeypatch.delenv("CARAML_LOG_LEVEL", raising=False)
    run = ["--methods", "estimate", "--interval", "10", "true"]

    def said(*options: str) -> str:
        assert main([*options, *run]) == 0
        return capsys.readouterr().err

    default, quiet, verbose = said(), said("-q"), said("-v")
    assert "jpwr: total" in default and "energy_wh" in default and "a sample every" not in default
    assert quiet == ""
    assert "jpwr: total" in verbose and "jpwr: estimate: cpus (estimated)" in verbose
    assert "jpwr: a sample every 10 ms" in verbose
    monkeypatch.setenv("CARAML_LOG_LEVEL", "warning")
    assert said() == ""
    monkeypatch.setenv("JPWR_LOG_LEVEL", "DEBUG")  # jpwr's own wins
    assert "a sample every" in said()
    monkeypatch.setenv("JPWR_LOG_LEVEL", "loud")
    assert main(run) == 2
    assert capsys.readouterr().err.strip() == ("jpwr: error: JPWR_LOG_LEVEL=loud is no log level: give one "
                                               "of DEBUG INFO WARNING ERROR (or -q, -v)")


def test_combine_keeps_its_data_lines_at_every_level(tmp_path, capsys):
    pd.DataFrame([{"host": "n1", "rank": 0, "method": "pynvml", "device": "gpu0", "source": "measured",
                   "counted": True, "energy_wh": 0.5, "mean_w": 180.0, "max_w": 200.0, "duration_s": 10.0,
                   "samples": 90, "missing": 11, "t_start": 0.0, "t_end": 10.0}]).to_csv(
        tmp_path / "energy_rank0.csv", index=False)
    (tmp_path / "meta_rank0.json").write_text("{}")
    outputs = {}
    for level in ("-q", "", "-v"):
        assert main(["combine", *filter(None, [level]), str(tmp_path)]) == 0
        outputs[level] = capsys.readouterr()
    for captured in outputs.values():  # what the row model reads, whatever the level
        assert sum(line.startswith("jpwr-summary:") for line in captured.out.splitlines()) == 1
    assert outputs["-q"].err == ""
    assert "jpwr: note: n1 pynvml gpu0: 11 samples missing" in outputs[""].err
    assert "read" not in outputs[""].err
    assert f"jpwr: read {tmp_path / 'energy_rank0.csv'}: 1 channel(s)" in outputs["-v"].err
