"""Where a result row came from: the suite's commit, the software stack, the
devices and the job, in one JSON file per work package (provenance.json in
the run's energy folder, inside the work package) and a short line for the
result table:

    CARAML provenance: commit=1a2b3c4 clean=yes torch=2.6.0 cuda=12.4 ...

The file names the machine too, each host as the first rank on it sees
it: its name, CPU model, machine id and every accelerator the vendor
libraries list with its UUID, serial, PCI bus id, firmware and driver
(jpwr.identity), and the hash of the lock the suite was installed from,
so that a row can be told to come from one machine and one build or
another (caraml/audit).

Every field that cannot be found here is null in the file and `-` in the
line, never guessed."""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
from pathlib import Path

from caraml import benchmarks, report, rocm_tf32
from caraml.node.dist import Dist
from caraml.report import PROVENANCE_KEYS

SUITE_ROOT = Path(__file__).resolve().parents[2]
FILE_NAME = "provenance.json"
# The fields of the table line, in order (the row model reads them by the
# same names); the rest is in the file.
LINE_FIELDS = PROVENANCE_KEYS
# What a benchmark process of this suite has in its command line: each
# driver of the benchmark table, as a module or a file
def benchmark_markers() -> tuple[str, ...]:
    """What a process of any benchmark of the table has in its command line
    (read when counted: a site's registry that fails is the driver's input
    error, said before training, caraml/node/driver.py)."""
    return tuple(marker for entry in benchmarks.all_benchmarks() for marker in entry.markers)
# The job script's identity of its job, which every process it starts
# inherits (the launcher too: torchrun hands its workers a MASTER_PORT of its
# own, so that cannot tell a job's processes from another job's).
JOB_KEY = "CARAML_JOB"


def _command(*args: str, cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def lock_sha256(root: Path = SUITE_ROOT) -> str | None:
    """One sha256 over the lock's files (aux/lock/*.txt: the versions and
    hashes every site installs), name and content; None without a lock."""
    files = sorted((root / "aux" / "lock").glob("*.txt"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            return None
    return digest.hexdigest()


def machine_id(path: Path = Path("/etc/machine-id")) -> str | None:
    """The host's machine id (systemd's, the same for every user of it); None where there is none."""
    return _first_line(str(path)) or None


def host_identity(hostname: str) -> dict:
    """This host as the first rank on it sees it: name, CPU, machine id and
    every accelerator the vendor libraries list (jpwr.identity)."""
    from jpwr.identity import devices as accelerators

    return {"host": hostname, "cpu_model": cpu_name(), "cpus": os.cpu_count(), "machine_id": machine_id(),
            "accelerators": accelerators()}


def suite_state(root: Path = SUITE_ROOT) -> dict:
    """The commit and whether tracked files differ from it (untracked ones,
    such as run folders and data, do not count)."""
    commit = _command("git", "rev-parse", "HEAD", cwd=root)
    changes = _command("git", "status", "--porcelain", "--untracked-files=no", cwd=root)
    return {"commit": commit, "clean": None if changes is None else changes == ""}


def _package(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(path: str) -> str | None:
    try:
        return Path(path).read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return None


# The first line of the NVIDIA kernel module's version file, for the
# proprietary module ("... Kernel Module  550.54.15  Tue Mar ...") and the
# open one ("... Open Kernel Module for x86_64  580.159.04  Release Build ...")
_NVIDIA_DRIVER = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s")


def gpu_driver(nvidia_version: str = "/proc/driver/nvidia/version",
               amd_version: str = "/sys/module/amdgpu/version") -> str | None:
    nvidia = _first_line(nvidia_version)
    if nvidia:
        found = _NVIDIA_DRIVER.search(nvidia + " ")
        return f"nvidia {found.group(1) if found else nvidia}"
    amd = _first_line(amd_version)
    return f"amdgpu {amd}" if amd else None


def cpu_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def power_limits_w() -> list[float] | None:
    """The enforced power limit of each visible NVIDIA GPU, where NVML is here."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no binding, no driver: no figure
        return None
    try:
        limits = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            limits.append(pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000)
        return limits
    except Exception:  # noqa: BLE001
        return None
    finally:
        pynvml.nvmlShutdown()


def container() -> dict | None:
    """The Apptainer image this runs in, with its sha256 digest."""
    image = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    if not image:
        return None
    digest = hashlib.sha256()
    try:
        with open(image, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    except OSError:
        return {"path": image, "sha256": None}
    return {"path": image, "sha256": digest.hexdigest()}


def software(device_type: str) -> dict:
    import torch

    on_gpu = device_type == "cuda" and torch.cuda.is_available()
    nccl = None
    if on_gpu and hasattr(torch.cuda, "nccl"):
        try:
            version = torch.cuda.nccl.version()
            nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception:  # noqa: BLE001 - torch built without NCCL/RCCL
            nccl = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "rocm": getattr(torch.version, "hip", None),
        "nccl": nccl,
        "cudnn": cudnn,
        "megatron_core": _package("megatron-core"),
        "torchvision": _package("torchvision"),
        "jube": _jube_version(),
    }


def _jube_version() -> str | None:
    text = _command("jube", "--version")
    found = re.search(r"version\s+(\S+)", text or "")
    return found.group(1) if found else None


def devices(device_type: str, count: int) -> dict:
    import torch

    if device_type == "cuda" and torch.cuda.is_available():
        names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    else:
        names = [cpu_name() or "unknown CPU"]
    return {"device_type": device_type, "device_names": names, "devices": count,
            "gpu_driver": gpu_driver(), "power_limits_w": power_limits_w()}


def other_benchmarks(proc: Path = Path("/proc")) -> int | None:
    """Benchmark processes of this suite on this host that belong to another
    job (a run beside this one shares the devices and the CPUs). None where
    /proc cannot be read."""
    mine = os.environ.get(JOB_KEY)
    count = 0
    try:
        pids = [p.name for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    markers = benchmark_markers()
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        try:
            command = (proc / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if not any(marker in command for marker in markers):
            continue
        if mine and _read_environ(proc, pid).get(JOB_KEY) == mine:
            continue  # a rank or the launcher of this job
        count += 1
    return count


def _read_environ(proc: Path, pid: str) -> dict[str, str]:
    try:
        raw = (proc / pid / "environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def host_cpu_ticks(proc: Path = Path("/proc")) -> tuple[int, int] | None:
    """The host's busy and total CPU time since boot, in clock ticks, all
    CPUs together (/proc/stat's cpu line: user, nice, system, idle, iowait,
    irq, softirq, steal; guest time is already in user and nice). None where
    /proc/stat cannot be read."""
    try:
        first = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in
                                                              (first[1:9] + ["0"] * 8)[:8])
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def _job_ticks_of(proc: Path, pid: str) -> int | None:
    """A process's CPU time and that of its children it has waited for
    (utime, stime, cutime, cstime), in clock ticks; None: it is gone."""
    try:
        stat = (proc / pid / "stat").read_text()
    except OSError:
        return None
    # the command name in parentheses may hold spaces: fields follow the last ")"
    fields = stat[stat.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15])


def job_cpu_ticks(proc: Path = Path("/proc")) -> int | None:
    """The CPU time of this job's processes on this host (CARAML_JOB tells
    them, whatever started them), with the children each has waited for:
    a data loader or a compiler that began and ended inside the window is in
    its parent's cutime/cstime. None where no job identity is set or /proc
    cannot be read: then nothing can tell the run's own load from another's."""
    mine = os.environ.get(JOB_KEY)
    if not mine:
        return None
    try:
        pids = [p.name for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    return sum(t for pid in pids if _read_environ(proc, pid).get(JOB_KEY) == mine
               and (t := _job_ticks_of(proc, pid)) is not None)


class ContentionWindow:
    """The share of the host's CPU time that went outside the job between
    begin() and end(), in percent: the host's busy time (/proc/stat) less
    the job's own (its processes and the children they waited for). The
    load average cannot tell the run's own threads (and the energy sampler)
    from a competitor; a walk over the other processes misses those that
    began and ended inside the window. This misses neither: whatever ran,
    however briefly, is in the host's total, and the job's own time is
    counted from the job's side, where nothing of it is lost (the job's
    processes live through the window and wait for their children)."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._proc = proc
        self._start: tuple[int, int, int] | None = None

    def _now(self) -> tuple[int, int, int] | None:
        host, job = host_cpu_ticks(self._proc), job_cpu_ticks(self._proc)
        return None if host is None or job is None else (*host, job)

    def begin(self) -> None:
        self._start = self._now()

    def end(self) -> float | None:
        after = self._now()
        if self._start is None or after is None:
            return None
        busy, total, job = (b - a for a, b in zip(self._start, after))
        if total <= 0:
            return None
        return min(100.0, max(0.0, 100 * (busy - job) / total))


# The driver's run: record() opens it, report_load_at_end() closes it.
_RUN_WINDOW = ContentionWindow()


def host_load() -> dict:
    """How busy the host was when the run began: the 1-minute load average
    against the CPUs, and other benchmark processes."""
    return {"load_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
            "other_benchmark_processes": other_benchmarks()}


def collect(device_type: str, device_count: int, hostnames: list[str],
            machine: list[dict] | None = None) -> dict:
    return {
        "format": "caraml-provenance-1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **suite_state(),
        "lock_sha256": lock_sha256(),
        **software(device_type),
        **devices(device_type, device_count),
        "container": container(),
        **host_load(),
        "hostnames": sorted(set(hostnames)),
        # each host of the job: its CPU, machine id and accelerators (host_identity)
        "machine": machine,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        # whether ROCm's torch may use TF32 (caraml/rocm_tf32.py): the variable as the run had it
        "hipblaslt_allow_tf32": os.environ.get(rocm_tf32.ENV),
    }


def line_fields(record: dict) -> dict[str, str]:
    """The table's short set, each value one word (report.word)."""
    # CUDA and ROCm name the stack a GPU run used; a CPU run of a CUDA build
    # of torch used neither (the file keeps what torch was built with).
    on_gpu = record.get("device_type") == "cuda"
    values = {
        "commit": (record["commit"] or "")[:12] or None,
        "clean": {True: "yes", False: "no", None: None}[record["clean"]],
        "torch": record["torch"],
        "cuda": record["cuda"] if on_gpu else None,
        "rocm": record["rocm"] if on_gpu else None,
        "device_name": "+".join(record["device_names"]),
        "devices": record["devices"],
        "load": record["load_1min"],
        "cpus": record["cpus"],
        "other_benchmarks": record["other_benchmark_processes"],
        # what a system card names: the GPU driver and the image (its digest)
        "driver": record.get("gpu_driver"),
        "container": ((record.get("container") or {}).get("sha256") or "")[:12] or None,
        "hipblaslt_allow_tf32": record.get("hipblaslt_allow_tf32"),
    }
    return {k: report.word(v) for k, v in values.items()}


def _first_on_its_host(rank: int, hostnames: list[str]) -> bool:
    """The first rank on each host measures that host's contention."""
    return hostnames.index(hostnames[rank]) == rank


def report_load_at_end(dist: Dist, hostnames: list[str]) -> float | None:
    """One line for the table on how busy the hosts were while training ran:
    a benchmark that started beside this one after its start shows here, and
    the share of the host CPU time that went outside the job on the busiest
    host of the job (foreign_cpu_pct, the contention both the LLM driver's
    MFU and the row model read, report.CONTENTION_PCT), with each host's own
    (foreign_cpu_pct_by_host). Every rank calls it; it returns that busiest
    host's share on every rank (None where a host could not measure it)."""
    mine = _RUN_WINDOW.end() if _first_on_its_host(dist.rank, hostnames) else None
    shares = [r[0] for r in dist.gather_floats([math.nan if mine is None else mine])]
    by_host = {hostnames[rank]: share for rank, share in enumerate(shares)
               if _first_on_its_host(rank, hostnames) and share == share}
    foreign = max(by_host.values()) if len(by_host) == len(set(hostnames)) else None
    if dist.is_main:
        report.emit("host at end", load=round(os.getloadavg()[0], 2), cpus=os.cpu_count(),
                    other_benchmarks="-" if (n := other_benchmarks()) is None else n,
                    foreign_cpu_pct="-" if foreign is None else round(foreign, 1),
                    foreign_cpu_pct_by_host=";".join(f"{h}={v:.1f}" for h, v in by_host.items())
                    or "-")
    return foreign


def record(dist: Dist, folder: str | Path | None, hostnames: list[str]) -> None:
    """Rank 0 writes the file into folder (none without one) and prints the
    table's line; hostnames: every rank's, in rank order. The first rank on
    each host opens that host's contention window and, where there is a
    file, names its host (every rank calls this)."""
    first = _first_on_its_host(dist.rank, hostnames)
    if first:
        _RUN_WINDOW.begin()
    machine = None
    if folder is not None:
        found = dist.gather_objects(host_identity(hostnames[dist.rank]) if first else None)
        machine = [host for host in found if host is not None]
    if not dist.is_main:
        return
    facts = collect(dist.device.type, dist.world_size, hostnames, machine)
    if folder is not None:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / FILE_NAME).write_text(json.dumps(facts, indent=1) + "\n")
    report.emit("provenance", **line_fields(facts))
