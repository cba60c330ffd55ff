"""How `jpwr combine` scales with the ranks of a job: rank files as a
GH200 job leaves them (four ranks a node, every rank measuring its node's
four GPUs by NVML, with their energy counters, and the four superchip
modules, each with a `timed` window), made by jpwr's own scope and writer,
then combined by the command a benchmark's combine step runs (`python -m
jpwr combine FOLDER`), one process per size. Each size records the
combine's CPU seconds (user and system, its children included), its wall
seconds and its peak resident memory; the CPU seconds' slope over the
sizes (log-log least squares; and over the two largest, which the
interpreter's start, the same at every size, does not flatten)
extrapolates to a JUPITER-sized job of 24,000 ranks where it was not
measured.

    .venv/bin/python aux/perf/combine_scaling.py [--ranks 1024 4096 16384] [--repeats 3]
        [--extrapolate 24000] [--work /dev/shm] [--out docs/perf]

The rank files go into a temporary folder under --work (default: /dev/shm
where there is one, the files then in memory, else the temporary folder)
and are removed at the end. Writes a JSON record (every run's figures,
the slope, the extrapolation, the host's load) into --out and prints a
markdown table. CPU seconds hold still where other work loads the host,
wall seconds do not. A benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from jpwr.ctxmgr import get_power  # noqa: E402
from jpwr.files import RunFiles  # noqa: E402
from jpwr.method import Channel, Method  # noqa: E402

RANKS_PER_NODE = 4
GPUS = 4
OUT = ROOT / "docs" / "perf"


class _Steady(Method):
    """A node's devices at a steady draw, with an energy counter: NVML's
    GPUs or the superchip modules, as a GH200 node reports them"""

    def __init__(self, name: str, devices: list[str], watts: float) -> None:
        super().__init__()
        self.name = name
        self.channels = [Channel(device) for device in devices]
        self._watts, self._t0 = watts, time.monotonic()

    def read(self) -> list[float]:
        return [self._watts + i for i in range(len(self.channels))]

    def energy_j(self) -> list[float]:
        elapsed = time.monotonic() - self._t0
        return [(self._watts + i) * elapsed for i in range(len(self.channels))]


def node_run(work: Path) -> dict:
    """One rank's measurement, made by jpwr's scope: its samples, energy,
    window and counter tables and its metadata, for the other ranks' files"""
    methods = [_Steady("pynvml", [str(g) for g in range(GPUS)], 400.0),
               _Steady("gh", [f"module-{g}" for g in range(GPUS)], 520.0)]
    with get_power(methods, 20, out_dir=work / "template", suffix="_rank0") as scope:
        time.sleep(0.1)
        scope.begin_window("timed")
        time.sleep(0.3)
        scope.end_window("timed")
        time.sleep(0.1)
    energy, additional = scope.channel_energy()
    meta = json.loads((work / "template" / "meta_rank0.json").read_text())
    return {"samples": scope.samples(), "energy": energy, "windows": scope.windows(),
            "additional": additional, "meta": meta, "channels": scope.channels}


def write_job(folder: Path, ranks: int, template: dict) -> None:
    """`ranks` ranks' files in `folder`, as the suite's drivers leave them
    (suffix _rank<R>, one folder a job), by jpwr's writer"""
    samples = template["samples"]
    wide = samples.pivot_table(index="time", columns=["method", "device"], values="power_w",
                               sort=False)
    wide = wide[[(m, d) for m, d, _ in template["channels"]]]
    times, rows = wide.index.to_list(), wide.to_numpy().tolist()
    for rank in range(ranks):
        host = f"jpbo-{rank // RANKS_PER_NODE // 48:03d}-{rank // RANKS_PER_NODE % 48:02d}"
        files = RunFiles(folder, f"_rank{rank}", "csv")
        files.write_meta(template["meta"] | {"host": host, "rank": rank, "complete": False,
                                             "end_time": None, "suffix": f"_rank{rank}"})
        files.append_power(template["channels"], times, rows)
        files.close_power()
        for stem, table in [("windows", template["windows"]), ("energy", template["energy"]),
                            *((f"additional_{name}", t) for name, t in
                              template["additional"].items())]:
            files.write_table(table.assign(host=host, rank=rank), stem)
        files.write_meta(template["meta"] | {"host": host, "rank": rank,
                                             "suffix": f"_rank{rank}"})


def measure(folder: Path, work: Path) -> dict:
    """`jpwr combine FOLDER` in a process of its own: CPU seconds (its
    children's too), wall seconds, peak resident memory"""
    out_path, err_path = work / "combine.out", work / "combine.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "jpwr", "combine", str(folder)], cwd=ROOT,
                                stdout=out, stderr=err)
        # wait4: this process's own resource use, not all children's so far
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        last = err_path.read_text(errors="replace").strip().splitlines()[-1:]
        raise SystemExit(f"jpwr combine {folder} ended with status {proc.returncode}: "
                         f"{' '.join(last) or 'no message'}")
    summary = next((line for line in out_path.read_text().splitlines()
                    if line.startswith("jpwr-summary:")), "")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "user_s": usage.ru_utime,
            "system_s": usage.ru_stime, "wall_s": wall, "peak_rss_mib": usage.ru_maxrss / 1024,
            "summary": summary}


def slope(ranks: list[int], seconds: list[float]) -> float:
    """The exponent k of seconds ~ ranks^k, least squares over log-log"""
    return float(np.polyfit(np.log(ranks), np.log(seconds), 1)[0])


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--repeats", type=int, default=3, help="combines per size (their median counts)")
    p.add_argument("--extrapolate", type=int, default=24000, help="ranks to extrapolate to")
    p.add_argument("--work", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                   help="where the rank files are made (default: /dev/shm, else $TMPDIR)")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args()
    if len(a.ranks) < 2 or min(a.ranks) < 1 or a.repeats < 1:
        p.error("--ranks needs two sizes or more, each at least 1; --repeats at least 1")
    return a


def commit() -> str:
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                          capture_output=True, text=True)
    return head.stdout.strip() or "unknown"


def main() -> int:
    a = parse()
    record = {"benchmark": "combine_scaling",
              "command": " ".join(["aux/perf/combine_scaling.py", *sys.argv[1:]]),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": commit(), "host": platform.node(), "cpus": os.cpu_count(),
              "processor": platform.processor() or platform.machine(),
              "python": platform.python_version(), "load_at_start": os.getloadavg(),
              "ranks_per_node": RANKS_PER_NODE, "sizes": []}
    with tempfile.TemporaryDirectory(dir=a.work, prefix="combine_scaling.") as tmp:
        work = Path(tmp)
        template = node_run(work)
        for ranks in sorted(a.ranks):
            folder = work / f"job{ranks}"
            made = time.perf_counter()
            write_job(folder, ranks, template)
            made = time.perf_counter() - made
            runs = [measure(folder, work) for _ in range(a.repeats)]
            size = {"ranks": ranks, "files": sum(1 for _ in folder.iterdir()),
                    "bytes": sum(f.stat().st_size for f in folder.iterdir()),
                    "written_s": made, "runs": runs,
                    "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                    "wall_s": statistics.median(r["wall_s"] for r in runs),
                    "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
                    "load": os.getloadavg()}
            record["sizes"].append(size)
            print(f"# {ranks} ranks ({size['files']} files, {size['bytes'] / 2**20:.0f} MiB, made in "
                  f"{made:.0f} s): {size['cpu_s']:.2f} CPU-s, {size['wall_s']:.2f} s wall, "
                  f"{size['peak_rss_mib']:.0f} MiB peak, load {size['load'][0]:.2f}", flush=True)
            shutil.rmtree(folder)
    sizes = record["sizes"]
    ranks = [s["ranks"] for s in sizes]
    cpu = [s["cpu_s"] for s in sizes]
    k_cpu, k_wall = slope(ranks, cpu), slope(ranks, [s["wall_s"] for s in sizes])
    k_rss = slope(ranks, [s["peak_rss_mib"] for s in sizes])
    # the fit over all sizes holds the interpreter's start, the same at every size; the two
    # largest sizes show the growth itself
    k_top = slope(ranks[-2:], cpu[-2:])
    largest = sizes[-1]
    factor = a.extrapolate / largest["ranks"]
    record |= {"slope_cpu": k_cpu, "slope_cpu_two_largest": k_top, "slope_wall": k_wall,
               "slope_rss": k_rss, "extrapolated_ranks": a.extrapolate,
               "extrapolated_cpu_s": largest["cpu_s"] * factor ** max(k_cpu, k_top, 1.0),
               "extrapolated_wall_s": largest["wall_s"] * factor ** max(k_wall, 1.0),
               "load_at_end": os.getloadavg()}
    print("| ranks | files | CPU s | wall s | peak RSS MiB | load (1 min) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s in sizes:
        print(f"| {s['ranks']:,} | {s['files']:,} | {s['cpu_s']:.2f} | {s['wall_s']:.2f} | "
              f"{s['peak_rss_mib']:.0f} | {s['load'][0]:.2f} |")
    print(f"slope (log-log): CPU {k_cpu:.3f} (the two largest sizes {k_top:.3f}), wall {k_wall:.3f}, "
          f"peak RSS {k_rss:.3f}")
    if largest["ranks"] < a.extrapolate:
        print(f"{a.extrapolate:,} ranks, extrapolated from {largest['ranks']:,} at the larger of the "
              f"CPU slopes and 1: {record['extrapolated_cpu_s']:.1f} CPU-s, "
              f"{record['extrapolated_wall_s']:.1f} s wall (an estimate)")
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"combine_scaling_{record['date'][:10]}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"# written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
