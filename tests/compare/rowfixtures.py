"""row.json files written by hand into folders shaped like JUBE run
directories, following the row contract (schema caraml-row/1) exactly, for
figures whose expected values are computed by hand: GPU-shaped systems
(GH200 counted at module scope, A100 at GPU scope, MI250 whose energy
devices are cards while throughput counts GCDs), CPU rows against a
measured matmul rate and with estimated energy, a failed system, rows that
stopped early, and as many systems as a scale test needs."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pandas as pd

from jpwr.ctxmgr import WINDOW_COLUMNS
from jpwr.energy import POWER_COLUMNS

# Rows written by hand keep no raw evidence: caraml-compare ranks them only
# where it accepts unaudited rows (docs/run_rules.md), and says so in every
# sentence. The tests of what it computes from rows read them so.
ACCEPT_UNAUDITED = "--accept-unaudited"


def compare(argv: list[str]) -> int:
    """caraml-compare's exit status on these rows, unaudited rows accepted."""
    from caraml.compare import cli

    return cli.main([*argv, ACCEPT_UNAUDITED])


def load(arguments: list[str], all_runs: bool = False) -> pd.DataFrame:
    """The comparison's lines of these rows, unaudited rows accepted."""
    from caraml.compare import rows

    return rows.load(arguments, all_runs, accept_unaudited=True)


def _merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _window(wh: float, work: float, devices: int, seconds: float) -> dict:
    return {"wh": wh, "wh_per_device": wh / devices, "work_per_wh": work / wh,
            "mean_power_w_per_device": wh * 3600 / seconds / devices, "seconds": seconds,
            "complete": True, "missing_pct": 0.0}


def row(name: str = "A100", benchmark: str = "llm", *, devices: int = 4, nodes: int = 1,
        per_s_per_device: float = 20000.0, global_batch: int = 512, scope: str = "gpu",
        timed_wh: float = 240.0, seconds: float = 600.0, energy_devices: int | None = None,
        peak: float = 312.0, basis: str = "datasheet", mfu: float | None = 0.4,
        estimated: bool = False, state: str = "ok", reason: str = "", **changes) -> dict:
    """One row as the row model writes it; keyword changes are merged in (nested dicts key by key)."""
    llm = benchmark == "llm"
    total = per_s_per_device * devices
    energy_devices = energy_devices or devices
    timed_work = total * seconds
    base = {
        "schema": "caraml-row/1", "benchmark": benchmark, "work_package": "",
        "system": {"name": name, "description": f"{name} test node", "device_kind": "cuda",
                   "device_unit": "GPU", "tdp_w": 400.0, "nodes": nodes, "devices_per_node": devices // nodes,
                   "devices": devices},
        "config": {"model": "800M" if llm else "resnet50", "precision": "bf16", "global_batch": global_batch,
                   "sequence_length": 2048 if llm else None, "image_size": None if llm else 224,
                   "backend": "megatron" if llm else "torch", "tp": 1, "pp": 1, "dp": devices,
                   "micro_batch": 4, "params": 908_759_040 if llm else 25_557_032, "compile": None,
                   "label": f"batch {global_batch}"},
        "throughput": {"unit": "tokens" if llm else "images", "per_s": total,
                       "per_s_per_device": per_s_per_device, "per_s_per_node": total / nodes,
                       "per_s_median": total, "iterations": 90, "time_per_iteration_s": seconds / 90},
        "mfu": None if mfu is None else {
            "value": mfu, "model_tflops_per_device": mfu * peak,
            "hardware_tflops_per_device": mfu * peak * 1.1,
            "peak_tflops": peak, "peak_basis": basis, "peak_source": f"{basis} test peak"},
        "energy": {"scope": scope, "estimated": estimated, "methods": "estimate" if estimated else "pynvml",
                   "basis": "integrated" if estimated else "counter", "devices": energy_devices,
                   "headline_window": "timed",
                   "windows": {"run": _window(timed_wh * 1.2, timed_work, energy_devices, seconds * 1.3),
                               "timed": _window(timed_wh, timed_work, energy_devices, seconds)},
                   # the whole run's Wh per scope, as jpwr's jpwr-scopes line gives them
                   "by_scope": {scope: timed_wh * 1.2}, "by_node": {"node1": timed_wh * 1.2}},
        "status": {"state": state, "reason": reason},
        "flags": [],
        "provenance": {"commit": "abc1234", "clean": True, "suite_version": "0.1.0+abc1234",
                       "torch": "2.13.0", "cuda": "12.8", "rocm": None,
                       "date": "2026-11-24T05:00:00+00:00", "host": f"{name.lower()}-node1"},
    }
    if state not in ("ok", "ok-stopped-early"):
        base.update(throughput=None, mfu=None, energy=None)
    return _merge(base, changes)


def _preset(name: str, benchmark: str, defaults: dict, changes: dict) -> dict:
    """A row of name with defaults, changes (keywords of row or nested keys) winning."""
    return row(name, benchmark, **_merge(defaults, changes))


SUPERCHIP = "GH200 superchip (Grace CPU and H100 GPU)"  # platform.xml's device unit of GH200, JEDI, JUPITER


def gh200(**changes) -> dict:
    """GH200: the module (superchip) is what the energy counts; the GPU alone is in by_scope (whole run)."""
    return _preset("GH200", "llm", {
        "per_s_per_device": 47505.0, "scope": "module", "timed_wh": 450.0, "peak": 989.0,
        "energy": {"by_scope": {"gpu": 456.0, "module": 540.0}},
        "system": {"tdp_w": 680.0, "description": "JURECA GH200: 4x GH200 superchips",
                   "device_unit": SUPERCHIP}}, changes)


def a100(**changes) -> dict:
    return _preset("A100", "llm", {"per_s_per_device": 19390.0, "scope": "gpu", "timed_wh": 240.0,
                                   "peak": 312.0}, changes)


def mi250(**changes) -> dict:
    """MI250: throughput per GCD (8), energy per card (4 energy devices)."""
    return _preset("MI250", "llm", {
        "devices": 8, "per_s_per_device": 11077.6, "scope": "gpu", "timed_wh": 330.0, "energy_devices": 4,
        "peak": 181.0, "system": {"device_kind": "rocm", "device_unit": "GCD", "tdp_w": 500.0},
        "provenance": {"cuda": None, "rocm": "6.2"}}, changes)


CPU_SYSTEM = {"device_kind": "cpu", "device_unit": "CPU", "tdp_w": None}


def cpu_matmul(**changes) -> dict:
    """A CPU LLM row whose MFU is against a measured matmul rate; its energy is estimated."""
    return _preset("CPU", "llm", {
        "devices": 1, "per_s_per_device": 1842.1, "global_batch": 4, "scope": "host", "timed_wh": 5.0,
        "peak": 0.5, "basis": "measured-matmul", "estimated": True, "system": CPU_SYSTEM,
        "config": {"model": "cpu-small", "precision": "fp32", "sequence_length": 256, "backend": "torch",
                   "params": 5_256_704},
        "provenance": {"cuda": None}}, changes)


def cpu_image(**changes) -> dict:
    """The CPU smoke configuration of the image benchmark: resnet18 at 64 px, energy estimated."""
    return _preset("CPU", "image", {
        "devices": 1, "per_s_per_device": 45.4, "global_batch": 16, "scope": "host", "timed_wh": 4.0,
        "mfu": None, "estimated": True, "system": CPU_SYSTEM,
        "config": {"model": "resnet18", "precision": "fp32", "image_size": 64},
        "provenance": {"cuda": None}}, changes)


def operator(name: str = "A100", problem: str = "rbc3d", compile_mode: str = "none", **changes) -> dict:
    """An FNO row (the operator benchmark): samples of one problem, four a device, no MFU."""
    return _preset(name, "operator", {
        "per_s_per_device": 80.0, "global_batch": 16, "timed_wh": 60.0, "mfu": None,
        "config": {"model": f"FNO {problem}", "precision": "fp32", "sequence_length": None,
                   "image_size": None, "backend": "neuraloperator", "tp": None, "pp": None, "dp": None,
                   "params": None, "compile": compile_mode},
        "throughput": {"unit": "samples"}}, changes)


def failed(name: str = "H100", reason: str = "CUDA out of memory", **changes) -> dict:
    return row(name, state="failed", reason=reason, **changes)


def write_run(root: Path, name: str, rows: list[dict], run_id: int = 0,
              power: dict[int, pd.DataFrame] | None = None) -> Path:
    """Outpath root/name with run run_id holding one work package per row
    (row.json in its work folder, work_package set to that folder); power
    maps a row's index to jpwr samples written into its energy folder,
    with the timed window at the middle half. Returns the outpath."""
    run = root / name / f"{run_id:06d}"
    run.mkdir(parents=True)
    for marker in ("configuration.xml", "workpackages.xml"):
        (run / marker).write_text("<jube/>\n")
    for index, data in enumerate(rows):
        work = run / f"{index:06d}_execute" / "work"
        work.mkdir(parents=True)
        data = _merge(data, {"work_package": str(work)})
        (work / "row.json").write_text(json.dumps(data, indent=1))
        if power and index in power:
            write_power(work / "energy", power[index])
    return root / name


def samples(devices: int = 4, seconds: int = 40, watts: float = 300.0, start: float = 1.7e9) -> pd.DataFrame:
    """jpwr power samples, one a second per device: idle, then a plateau."""
    lines = [{"time": start + t, "method": "pynvml", "device": str(d), "source": "measured",
              "power_w": watts * (0.3 if t < seconds // 4 else 1.0) + d} for t in range(seconds)
             for d in range(devices)]
    return pd.DataFrame(lines, columns=POWER_COLUMNS)


def write_power(energy_dir: Path, power: pd.DataFrame) -> None:
    energy_dir.mkdir(parents=True)
    (energy_dir / "meta_rank0.json").write_text(json.dumps({"host": "node1", "rank": 0}))
    power.to_csv(energy_dir / "power_rank0.csv", index=False)
    start, end = power["time"].min(), power["time"].max()
    span = end - start
    window = {column: None for column in WINDOW_COLUMNS}
    window.update(window="timed", host="node1", rank=0, method="pynvml", device="0", source="measured",
                  t_start=start + span / 4, t_end=start + 3 * span / 4)
    pd.DataFrame([window], columns=WINDOW_COLUMNS).to_csv(energy_dir / "windows_rank0.csv", index=False)


def many_systems(root: Path, count: int, runs_per_system: int = 1, power: bool = False) -> list[str]:
    """count systems named S01.. with A100-shaped rows at two batches per run;
    the [SYSTEM=]PATH arguments for caraml-compare."""
    args = []
    for s in range(count):
        name = f"S{s + 1:02d}"
        for r in range(runs_per_system):
            rows = [a100(per_s_per_device=15000.0 + 700 * s + 10 * r, global_batch=256),
                    a100(per_s_per_device=16000.0 + 700 * s + 10 * r, global_batch=512)]
            write_run(root / name, "llm_run", rows, run_id=r,
                      power={1: samples(devices=4, seconds=30)} if power and r == 0 else None)
        args.append(f"{name}={root / name / 'llm_run'}")
    return args


def demo(root: Path) -> list[str]:
    """The GPU-shaped systems (FNO rows of two of them too), the CPU rows
    (one image row stopped early) and a failed system, with power samples
    for two; the arguments for
    caraml-compare. `python -m tests.compare.rowfixtures DIR [--systems N]`
    writes them (or N systems of many_systems) and prints the arguments,
    for the screenshots in docs/compare.md."""
    stopped = cpu_image(global_batch=8, per_s_per_device=40.1,
                        status={"state": "ok-stopped-early",
                                "reason": "walltime reached after 40 of 90 iterations"})
    return [f"GH200={write_run(root, 'gh200', [gh200()], power={0: samples(watts=650.0)})}",
            f"A100={write_run(root, 'a100', [a100(), a100(global_batch=256)], power={0: samples()})}",
            f"MI250={write_run(root, 'mi250', [mi250()])}",
            f"CPU={write_run(root, 'cpu', [cpu_matmul(), cpu_image(), stopped])}",
            f"H100={write_run(root, 'h100', [failed()])}",
            f"GH200={write_run(root, 'gh200_fno', [operator('GH200', per_s_per_device=150.0)])}",
            f"A100={write_run(root, 'a100_fno', [operator(), operator(problem='rbc2d')])}"]


def smoke(name: str = "MI300X", **changes) -> dict:
    """A smoke run: 4 timed iterations in 12 s, fast enough to look like 2.14x the A100."""
    return _preset(name, "llm", {
        "per_s_per_device": 41500.0, "seconds": 12.0, "timed_wh": 9.0, "peak": 1307.0,
        "system": {"device_kind": "rocm", "device_unit": "GPU", "tdp_w": 750.0},
        "throughput": {"iterations": 4, "time_per_iteration_s": 3.0},
        "provenance": {"cuda": None, "rocm": "6.2"}}, changes)


def power_limit(asked: str, reported: float | None = None, *, tdp: float = 400.0, before: float = 400.0,
                restored: bool = True) -> dict:
    """A row's power_limit as a sweep point writes it: `default` asks for no
    watts (the device keeps its limit), a value up to 1 is a fraction of
    the TDP, a larger one watts per device."""
    asked_w = None if asked == "default" else float(asked) * tdp if float(asked) <= 1 else float(asked)
    return {"asked": asked, "asked_w": asked_w, "before_w": before,
            "reported_w": reported if reported is not None else asked_w or before, "restored": restored}


def a100_sweep() -> list[dict]:
    """A100's power-limit sweep of the 800M job, expected figures by hand
    (tokens/Wh of the timed window: 2400 s of one device's tokens per Wh
    times per_s_per_device): default 400 W 193,900 (dominated by 360 W,
    which is faster and more frugal); 360 W 208,000, 300 W 233,684 and
    250 W 247,273 (the most) on the front; 200 W 215,172 (dominated by
    250 W); a smoke run at 150 W; 280 W not restored; 100 W failed. Each
    point draws no more than its limit (the audit's power bound)."""
    def point(asked: str, per_s: float, wh: float, **changes) -> dict:
        return a100(per_s_per_device=per_s, timed_wh=wh, power_limit=power_limit(asked), **changes)
    smoke_run = {"seconds": 12.0, "throughput": {"iterations": 4, "time_per_iteration_s": 3.0}}
    return [point("default", 19390.0, 240.0), point("0.9", 19500.0, 225.0), point("300", 18500.0, 190.0),
            point("250", 17000.0, 165.0), point("200", 13000.0, 145.0),
            point("150", 9000.0, 1.5, **smoke_run),
            a100(per_s_per_device=17800.0, timed_wh=170.0, power_limit=power_limit("280", restored=False)),
            failed("A100", reason="power limit 100 W is below the device's minimum of 150 W; give 150 to 400",
                   power_limit={**power_limit("100", None), "reported_w": 400.0})]


def sweep_demo(root: Path) -> list[str]:
    """GH200 without a sweep beside A100's power-limit sweep (a100_sweep); the arguments for
    caraml-compare."""
    return [f"GH200={write_run(root, 'gh200', [gh200()])}",
            f"A100={write_run(root, 'a100_sweep', a100_sweep())}"]


def committee(root: Path) -> list[str]:
    """The twelve systems a procurement committee compares (committee_rows);
    the arguments for caraml-compare."""
    return [f"{name}={write_run(root, name.lower(), data)}" for name, data in committee_rows().items()]


def committee_rows() -> dict[str, list[dict]]:
    """The twelve systems a procurement committee compares: GPU-scope cards
    (A100, H100, WestAI H100), GH200 superchips counted at module scope
    (GH200, JEDI, JUPITER), a GB200 whose image benchmark failed beside a
    good LLM row, MI250 and MI250X (throughput per GCD, energy per card), a
    smoke MI300X, an MI300A that failed and the CPU; their rows by system."""
    def image(name: str, per_device: float, wh: float) -> dict:
        return row(name, "image", per_s_per_device=per_device, global_batch=1024, timed_wh=wh,
                   config={"model": "resnet50", "image_size": 224})

    def superchip(name: str, per_device: float, gpu_wh: float, module_wh: float) -> dict:
        return gh200(system={"name": name, "description": f"{name}: 4x GH200 superchips"},
                     per_s_per_device=per_device, timed_wh=module_wh,
                     energy={"by_scope": {"gpu": gpu_wh * 1.2, "module": module_wh * 1.2}})

    systems = {
        "A100": [a100(global_batch=256, per_s_per_device=18100.0), a100(), image("A100", 2500.0, 160.0)],
        # an H100 SXM draws up to 700 W, a B200 in a GB200 up to 1,200 W: their rows draw more than an A100's
        "H100": [a100(system={"name": "H100", "tdp_w": 700.0}, per_s_per_device=33100.0, timed_wh=310.0,
                      peak=989.0),
                 image("H100", 4300.0, 200.0)],
        "WAIH100": [a100(system={"name": "WAIH100", "tdp_w": 700.0}, per_s_per_device=43000.0, timed_wh=350.0,
                         peak=989.0)],
        "GH200": [superchip("GH200", 47505.0, 380.0, 450.0)],
        "JEDI": [superchip("JEDI", 39538.2, 340.0, 410.0)],
        "JUPITER": [superchip("JUPITER", 45000.0, 365.0, 440.0)],
        # a B200 GPU is the device, two of them and a Grace CPU the package; energy of the GPUs alone
        "GB200": [a100(system={"name": "GB200", "tdp_w": 1200.0,
                               "device_unit": "GPU (B200; the Grace CPUs are outside every figure)"},
                       per_s_per_device=44000.0,
                       timed_wh=400.0, peak=2250.0),
                  row("GB200", "image", state="failed", reason="CUDA error: no kernel image for sm_100",
                      config={"model": "resnet50", "image_size": 224})],
        "MI250": [mi250()],
        "MI250X": [mi250(per_s_per_device=12400.0, timed_wh=350.0, system={"description": "MI250X node"})],
        "MI300X": [smoke()],
        "MI300A": [failed("MI300A", reason="HIP out of memory")],
        "CPU": [cpu_matmul()],
    }
    return systems


# the repeats of repeated_committee: one run slower, one faster than the first, all on different days
REPEATS = ((1.0, "2026-11-24"), (0.985, "2026-11-25"), (1.015, "2026-11-26"))


def repeated(data: dict, factor: float, date: str) -> dict:
    """A row of another run of the same configuration: its rates and work per Wh times factor, on date."""
    out = _merge(data, {"provenance": {"date": f"{date}T05:00:00+00:00"}})
    if out.get("throughput") is None:
        return out
    for key in ("per_s", "per_s_per_device", "per_s_per_node", "per_s_median"):
        out["throughput"][key] *= factor
    for window in out["energy"]["windows"].values():
        window["work_per_wh"] *= factor
    return out


def nan_loss(data: dict, at: int = 3) -> dict:
    """The row as row.json of the record's schema, its loss not finite from iteration at on (a diverged
    run that is fast all the same), judged by the one verdict."""
    from caraml.row import row_json, verdict

    row = dataclasses.replace(row_json.from_dict(data), loss_first=8.3, loss_nonfinite="nan",
                              loss_nonfinite_at=at)
    return row_json.to_dict(verdict.judged(row))


def repeated_committee(root: Path, history_db: Path) -> list[str]:
    """The committee's twelve systems, three runs each (REPEATS); GH200 with
    a healthy batch sweep below its best batch (the shipped reference of
    its best batch applies to that batch alone); JUPITER without a GPU-only
    energy channel (a system that keeps its node-hours' cost, its
    electricity missing); MI300X's smoke row and an H100 row at batch 1024
    whose loss is nan from iteration 3 (and which would lead every
    ranking), both of which the verdict marks no measurement; and in
    history_db an earlier A100 run of 2026-11-20 that was 1/0.85 as fast as
    the A100 runs here (A100 15 % below it). The
    arguments for caraml-compare."""
    from caraml.row import history, row_json

    systems = committee_rows()
    systems["GH200"] += [gh200(global_batch=batch, per_s_per_device=rate)
                         for batch, rate in ((64, 21000.0), (256, 36000.0))]
    for data in systems["JUPITER"]:
        data["energy"]["by_scope"].pop("gpu")
    diverged = a100(system={"name": "H100"}, global_batch=1024, per_s_per_device=90000.0, peak=989.0)
    args = []
    for name, data in systems.items():
        for run_id, (factor, date) in enumerate(REPEATS):
            written = [repeated(d, factor, date) for d in data]
            written += [nan_loss(repeated(diverged, factor, date))] if name == "H100" else []
            write_run(root, name.lower(), written, run_id=run_id)
        args.append(f"{name}={root / name.lower()}")
    earlier = write_run(root / "history", "a100", [repeated(a100(), 1 / 0.85, "2026-11-20")])
    work = earlier / "000000" / "000000_execute" / "work"
    history.write(row_json.read(work / "row.json"), work, history_db)
    return args


def committee_prices(path: Path) -> Path:
    """A prices file for repeated_committee: every GPU system of the LLM
    decision, and A1000, a system the comparison does not hold."""
    names = ["A100", "H100", "WAIH100", "GH200", "JEDI", "JUPITER", "GB200", "MI250", "MI250X", "A1000"]
    path.write_text("currency: EUR\nprices:\n" + "".join(
        f"  - {{system: {name}, node_hour: {3.0 + i * 0.5}, electricity_kwh: 0.3, pue: 1.2}}\n"
        for i, name in enumerate(names)))
    return path


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="write row.json test systems; print caraml-compare's arguments")
    parser.add_argument("root", type=Path)
    parser.add_argument("--systems", type=int, help="this many A100-shaped systems instead of the demo set")
    parser.add_argument("--committee", action="store_true", help="the twelve systems of committee()")
    parser.add_argument("--sweep", action="store_true", help="GH200 beside A100's power-limit sweep")
    parser.add_argument("--repeated", action="store_true",
                        help="repeated_committee: three runs each, a history in ROOT/history.sqlite")
    args = parser.parse_args()
    written = committee(args.root) if args.committee else sweep_demo(args.root) if args.sweep \
        else repeated_committee(args.root, args.root / "history.sqlite") if args.repeated \
        else demo(args.root) if args.systems is None else many_systems(args.root, args.systems, power=True)
    print("\n".join(written))
