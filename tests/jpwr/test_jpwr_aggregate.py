"""Combining the files of all ranks and nodes of a job."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from jpwr.aggregate import (
    FROM_COUNTED_SAMPLES,
    FROM_ENERGY,
    FROM_SAMPLES,
    INCOMPLETE,
    NoEnergyData,
    combine,
    notes,
    summarize,
    summary_line,
)
from jpwr.counting import counted
from jpwr.ctxmgr import get_power

SUMMARY = re.compile(r"jpwr-summary: total_wh=(\S+) devices=(\d+) wh_per_device=(\S+) "
                     r"mean_w_per_device=(\S+) max_w=(\S+) duration_s=(\S+) "
                     r"methods=([a-z+]+) source=(measured|estimated|incomplete) scope=(\S+) "
                     r"basis=([a-z+]+) counter_vs_integrated_pct=(\S+) missing_pct=(\S+) "
                     r"complete=(yes|no) covered_pct=(\S+)")


def write_rank(directory, rank, host, channels, start=1000.0, duration=100.0):
    """Files as a finished rank leaves them; channels: (method, device, wh, max_w[, source])."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for method, device, wh, max_w, *source in channels:
        rows.append({"host": host, "rank": rank, "method": method, "device": device,
                     "source": source[0] if source else "measured", "counted": True,
                     "energy_wh": wh, "mean_w": wh * 3600 / duration, "max_w": max_w,
                     "duration_s": duration, "samples": 1001, "missing": 0,
                     "t_start": start, "t_end": start + duration})
    pd.DataFrame(rows).to_csv(directory / f"energy_rank{rank}.csv", index=False)
    (directory / f"meta_rank{rank}.json").write_text(json.dumps({"host": host, "rank": rank}))


def test_ranks_measuring_the_same_gpus_are_counted_once(tmp_path):
    gpus = [("pynvml", f"gpu{i}", 10.0 + i, 400.0) for i in range(4)]
    write_rank(tmp_path, 1, "n1", [(m, d, wh * 2, w) for m, d, wh, w in gpus])
    write_rank(tmp_path, 0, "n1", gpus)
    table = combine([tmp_path])
    assert len(table) == 4 and set(table["rank"]) == {0}
    summary = summarize(table)
    assert summary["total_wh"] == pytest.approx(10 + 11 + 12 + 13)
    assert summary["devices"] == 4


def test_two_nodes_sum_up(tmp_path):
    write_rank(tmp_path / "n1", 0, "n1", [("pynvml", "gpu0", 1.0, 300.0), ("pynvml", "gpu1", 2.0, 350.0)],
               start=1000.0)
    write_rank(tmp_path / "n2", 2, "n2", [("pynvml", "gpu0", 3.0, 500.0), ("pynvml", "gpu1", 4.0, 320.0)],
               start=1005.0)
    summary = summarize(combine([tmp_path]))
    assert summary == {
        "total_wh": pytest.approx(10.0), "devices": 4, "wh_per_device": pytest.approx(2.5),
        "mean_w_per_device": pytest.approx(2.5 * 3600 / 100), "max_w": 500.0,
        "duration_s": pytest.approx(105.0), "methods": "pynvml", "source": "measured",
        "scope": "gpu", "basis": "integrated", "counter_vs_integrated_pct": pytest.approx(np.nan,
                                                                                          nan_ok=True),
        "missing_pct": 0.0, "complete": "yes", "covered_pct": 100.0}


def test_summary_line_has_the_agreed_form(tmp_path):
    write_rank(tmp_path, 0, "n1", [("pynvml", "gpu0", 1.234, 301.0)])
    line = summary_line(summarize(combine([tmp_path])))
    found = SUMMARY.fullmatch(line)
    assert found, line
    assert float(found.group(1)) == pytest.approx(1.234) and found.group(5) == "301.0"


def host_rows(*channels):
    return pd.DataFrame([{"host": host, "method": m, "device": d} for host, m, d in channels])


def test_counting_rule_prefers_accelerators_then_gh_then_rapl_then_hwmon_then_estimate():
    rows = host_rows(
        ("gh200", "pynvml", "gpu0"), ("gh200", "gh", "module-0"), ("gh200", "gh", "grace-0"),
        ("ghonly", "gh", "module-0"), ("ghonly", "gh", "module-1"), ("ghonly", "gh", "cpu-0"),
        ("cpu", "rapl", "package-0"), ("cpu", "rapl", "package-0/core"),
        ("cpu", "rapl", "package-0/dram"), ("cpu", "rapl", "psys"), ("cpu", "hwmon", "psu/hwmon0/power1"),
        ("cpu", "estimate", "cpus"),
        ("psu", "hwmon", "psu/hwmon0/power1"), ("psu", "estimate", "cpus"),
        ("bare", "estimate", "cpus"))
    assert list(counted(rows)) == [
        True, False, False,
        True, True, False,
        True, False, True, False, False, False,
        True, False,
        True]


def test_the_node_meter_counts_after_the_accelerators_and_the_superchip_and_before_rapl():
    rows = host_rows(
        ("gpus", "rocm", "gpu0"), ("gpus", "pm_counters", "accel0"), ("gpus", "pm_counters", "node"),
        ("gh", "gh", "module-0"), ("gh", "pm_counters", "accel0"), ("gh", "pm_counters", "node"),
        ("cray", "pm_counters", "node"), ("cray", "pm_counters", "cpu"),
        ("cray", "pm_counters", "memory"), ("cray", "pm_counters", "accel0"),
        ("cray", "pm_counters", "accel1"), ("cray", "rapl", "package-0"),
        ("cpu", "pm_counters", "node"), ("cpu", "pm_counters", "cpu"), ("cpu", "rapl", "package-0"),
        ("cpu", "hwmon", "psu/hwmon0/power1"))
    assert list(counted(rows)) == [
        True, False, False,
        True, False, False,
        False, False, False, True, True, False,
        True, False, False, False]


def test_estimated_counted_channel_makes_the_figure_estimated(tmp_path):
    write_rank(tmp_path / "a", 0, "n1", [("estimate", "cpus", 0.5, 20.0, "estimated")])
    write_rank(tmp_path / "b", 0, "n2", [("rapl", "package-0", 1.0, 100.0),
                                         ("estimate", "cpus", 0.5, 20.0, "estimated")])
    table = combine([tmp_path])
    summary = summarize(table)
    assert summary["source"] == "estimated"
    assert summary["methods"] == "estimate+rapl" and summary["total_wh"] == pytest.approx(1.5)
    n2 = table[table.host == "n2"].set_index("method")
    assert n2.loc["estimate", "counted"] == False  # noqa: E712 - numpy bool
    # Without the estimate-only node, the same data is measured.
    assert summarize(table[table.host == "n2"])["source"] == "measured"


def test_killed_run_is_integrated_from_its_flushed_samples(tmp_path):
    (tmp_path / "meta_rank3.json").write_text(json.dumps({"host": "n9", "rank": 3, "complete": False}))
    t = np.arange(0, 10.01, 0.1)
    lines = ["time,method,device,source,power_w"]
    lines += [f"{x:.6f},pynvml,gpu0,measured,250.0000" for x in t]
    text = "\n".join(lines) + "\n" + "10.100000,pynvml,gp"  # cut off by the kill
    (tmp_path / "power_rank3.csv").write_text(text)
    table = combine([tmp_path])
    row = table.iloc[0]
    assert (row.host, row["rank"], row.origin) == ("n9", 3, FROM_SAMPLES)
    assert row.energy_wh == pytest.approx(250 * 10 / 3600)
    assert row.samples == len(t) and row.missing == 0
    assert any("did not finish" in line for line in notes(table))


def test_a_run_that_counted_its_samples_has_the_unwritten_ones_missing(tmp_path):
    """A full disk took the power file's tail and the energy file; the meta
    file, completed in its room, says 400 samples were taken."""
    (tmp_path / "meta_rank0.json").write_text(
        json.dumps({"host": "n1", "rank": 0, "complete": True, "samples": 400}) + " " * 100)
    lines = ["time,method,device,source,power_w"]
    lines += [f"{x / 10:.6f},hwmon,s0,measured,100.0000" for x in range(100)]
    (tmp_path / "power_rank0.csv").write_text("\n".join(lines) + "\n")
    table = combine([tmp_path])
    row = table.iloc[0]
    assert (row.origin, row.samples, row.missing) == (FROM_COUNTED_SAMPLES, 100, 300)
    summary = summarize(table)
    assert summary["source"] == INCOMPLETE and summary["missing_pct"] == pytest.approx(75.0)
    assert any("did not finish or could not write" in line for line in notes(table))


def test_finished_and_killed_ranks_combine(tmp_path, synthetic, wait):
    with get_power([synthetic(lambda t: 100.0, devices=("s0",))], 20, out_dir=tmp_path,
                   suffix="_rank0") as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    (tmp_path / "meta_rank1.json").write_text(json.dumps({"host": "other", "rank": 1}))
    (tmp_path / "power_rank1.csv").write_text(
        "time,method,device,source,power_w\n0,hwmon,s0,measured,50\n3.6,hwmon,s0,measured,50\n")
    table = combine([tmp_path]).set_index("rank")
    assert table.loc[0, "origin"] == FROM_ENERGY and table.loc[1, "origin"] == FROM_SAMPLES
    assert table.loc[0, "energy_wh"] == pytest.approx(100 * table.loc[0, "duration_s"] / 3600)
    assert table.loc[1, "energy_wh"] == pytest.approx(0.05)


def test_gaps_and_silent_channels_are_noted():
    table = pd.DataFrame([
        {"host": "n1", "method": "pynvml", "device": "gpu0", "scope": "gpu", "counted": True,
         "energy_wh": 1.0, "samples": 988, "missing": 12, "origin": FROM_ENERGY, "file": "x"},
        {"host": "n1", "method": "pynvml", "device": "gpu1", "scope": "gpu", "counted": True,
         "energy_wh": np.nan, "samples": 0, "missing": 99, "origin": FROM_ENERGY, "file": "x"}])
    found = notes(table)
    assert any("gpu0: 12 samples missing" in line for line in found)
    assert any("gpu1: no usable samples; it is left out of the total" in line for line in found)


def test_no_data_names_the_path(tmp_path):
    (tmp_path / "unrelated.csv").write_text("a,b\n1,2\n")
    (tmp_path / "metadata.json").write_text("not jpwr's, not even JSON")
    with pytest.raises(NoEnergyData, match=re.escape(str(tmp_path))):
        combine([tmp_path])
    with pytest.raises(NoEnergyData, match="no such file or directory"):
        combine([tmp_path / "missing"])


def test_a_single_file_is_enough(tmp_path):
    write_rank(tmp_path, 4, "n1", [("pynvml", "gpu0", 2.0, 300.0)])
    write_rank(tmp_path, 5, "n1", [("pynvml", "gpu1", 3.0, 300.0)])
    table = combine([tmp_path / "energy_rank5.csv"])
    assert list(table.device) == ["gpu1"]


def test_h5_energy_files_are_read(tmp_path, synthetic, wait):
    pytest.importorskip("tables")
    with get_power([synthetic(lambda t: 42.0)], 20, out_dir=tmp_path, filetype="h5") as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    (tmp_path / "power.csv").unlink()  # so the figure can only come from the h5 energy file
    table = combine([tmp_path])
    assert table.iloc[0].origin == FROM_ENERGY and table.iloc[0].max_w == pytest.approx(42.0)


def _run_times(directory, rank, start, end):
    meta = directory / f"meta_rank{rank}.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "start_time": start, "end_time": end}))


def test_a_requeued_rank_counts_once_from_its_last_attempt(tmp_path):
    # the first attempt of rank 0 ran on n1, Slurm requeued the job onto n2
    write_rank(tmp_path / "first", 0, "n1", [("pynvml", "gpu0", 5.0, 300.0)])
    _run_times(tmp_path / "first", 0, "2026-11-27T10:00:00+00:00", None)  # killed: no end
    write_rank(tmp_path / "second", 0, "n2", [("pynvml", "gpu0", 2.0, 300.0)])
    _run_times(tmp_path / "second", 0, "2026-11-27T10:10:00+00:00", "2026-11-27T10:20:00+00:00")
    # rank 1 ran alongside the first attempt on another node: a process of its own
    write_rank(tmp_path / "other", 1, "n3", [("pynvml", "gpu0", 1.0, 300.0)])
    _run_times(tmp_path / "other", 1, "2026-11-27T10:00:01+00:00", "2026-11-27T10:04:00+00:00")
    table = combine([tmp_path])
    assert sorted(table["host"]) == ["n2", "n3"]
    assert summarize(table)["total_wh"] == pytest.approx(3.0)
    [note] = [line for line in notes(table) if "earlier run" in line]
    assert note.startswith(f"{tmp_path / 'first' / 'meta_rank0.json'}: an earlier run of rank 0 than "
                           f"{tmp_path / 'second' / 'meta_rank0.json'}; only the later one counts")


def test_runs_of_one_rank_that_overlap_in_time_all_count(tmp_path):
    write_rank(tmp_path / "a", 0, "n1", [("pynvml", "gpu0", 5.0, 300.0)])
    _run_times(tmp_path / "a", 0, "2026-11-27T10:00:00+00:00", "2026-11-27T10:10:00+00:00")
    write_rank(tmp_path / "b", 0, "n2", [("pynvml", "gpu0", 2.0, 300.0)])
    _run_times(tmp_path / "b", 0, "2026-11-27T10:05:00+00:00", "2026-11-27T10:15:00+00:00")
    table = combine([tmp_path])
    assert summarize(table)["total_wh"] == pytest.approx(7.0)
    assert not [line for line in notes(table) if "earlier run" in line]


def test_a_rank_run_three_times_counts_once_and_each_earlier_run_names_the_next(tmp_path):
    for attempt, start, end in (("a", "10:00", "10:05"), ("b", "10:06", "10:09"), ("c", "10:10", "10:20")):
        write_rank(tmp_path / attempt, 0, f"n-{attempt}", [("pynvml", "gpu0", 1.0, 300.0)])
        _run_times(tmp_path / attempt, 0, f"2026-11-27T{start}:00+00:00", f"2026-11-27T{end}:00+00:00")
    table = combine([tmp_path])
    assert list(table["host"]) == ["n-c"]
    earlier = [line for line in notes(table) if "earlier run" in line]
    assert [line.split(": an earlier run of rank 0 than ")[1].split(";")[0] for line in earlier] == [
        str(tmp_path / "b" / "meta_rank0.json"), str(tmp_path / "c" / "meta_rank0.json")]


def test_many_ranks_parsed_together_keep_each_files_rows_and_name_the_broken_one(tmp_path):
    """The energy files of all ranks are parsed together; a file that is
    broken, has a blank line or quotes a device name is read on its own,
    and only the broken one is left out, named"""
    for rank in range(40):
        write_rank(tmp_path, rank, f"n{rank // 4}", [("pynvml", f"gpu{rank % 4}", float(rank), 300.0)])
    with open(tmp_path / "energy_rank5.csv", "a") as f:
        f.write("\n")
    quoted = tmp_path / "energy_rank6.csv"
    quoted.write_text(quoted.read_text().replace(",gpu2,", ',"gpu,2",'))
    broken = tmp_path / "energy_rank7.csv"
    broken.write_text(broken.read_text() + "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20\n")
    table = combine([tmp_path])
    assert summarize(table)["total_wh"] == pytest.approx(sum(range(40)) - 7)
    assert table.set_index("rank").loc[6, "device"] == "gpu,2"
    assert list(table["rank"]) == sorted(set(range(40)) - {7}, key=lambda r: (f"n{r // 4}", r))
    [unreadable] = [line for line in notes(table) if "energy_rank7.csv" in line]
    assert unreadable.startswith(f"{broken}: not a readable jpwr energy file")


def test_every_file_is_read_once(tmp_path, monkeypatch, capsys):
    """`jpwr combine`: each rank's meta, energy and windows file read once
    (the combined table and the windows come from one reading of the job)"""
    from collections import Counter

    from jpwr import aggregate, cli

    for rank in range(3):
        write_rank(tmp_path, rank, "n1", [("pynvml", f"gpu{rank}", 1.0, 300.0)])
        window = pd.read_csv(tmp_path / f"energy_rank{rank}.csv")
        window = window.assign(window="timed", scope="gpu", basis="integrated")
        window.to_csv(tmp_path / f"windows_rank{rank}.csv", index=False)
    reads = Counter()
    read = aggregate._read_text
    monkeypatch.setattr(aggregate, "_read_text", lambda path: reads.update([path.name]) or read(path))
    assert cli.main(["combine", str(tmp_path)]) == 0
    assert "jpwr-window: window=timed" in capsys.readouterr().out
    assert reads == Counter({f"{stem}_rank{rank}.{ext}": 1 for rank in range(3)
                             for stem, ext in (("meta", "json"), ("energy", "csv"), ("windows", "csv"))})


@pytest.mark.parametrize("slow_file_s, by_threads", [(0.0, True), (float("inf"), False)])
def test_files_read_by_threads_come_back_in_order_with_their_errors(tmp_path, monkeypatch,
                                                                    slow_file_s, by_threads):
    """Where the first files were slow to come (a parallel file system),
    the rest are read by threads; either way the texts keep the order of
    the paths, a file that cannot be read its error"""
    from concurrent.futures import ThreadPoolExecutor

    from jpwr import aggregate

    paths = [tmp_path / f"f{i}.txt" for i in range(300)]
    for i, path in enumerate(paths):
        if i != 200:
            path.write_text(f"text {i}")
    pools = []

    class Pool(ThreadPoolExecutor):
        def __init__(self, workers):
            pools.append(workers)
            super().__init__(workers)

    monkeypatch.setattr(aggregate, "SLOW_FILE_S", slow_file_s)
    monkeypatch.setattr(aggregate, "ThreadPoolExecutor", Pool)
    texts = aggregate.read_texts(paths)
    assert bool(pools) == by_threads
    assert texts[:200] + texts[201:] == [f"text {i}" for i in range(300) if i != 200]
    assert isinstance(texts[200], FileNotFoundError)
