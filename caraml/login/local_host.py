"""The `LOCAL` system: this host and its own accelerators, found when the
benchmark runs. platform.xml's LOCAL block asks this module for each value
(`python3 caraml/login/local_host.py kind`), and the pre-flight asks it whether
the host can run what the job asks for.

NVIDIA GPUs are found with nvidia-smi, AMD GPUs through the kernel's KFD
topology (with rocm-smi for their names); anything else is a CPU host, on
which LOCAL behaves like the CPU system. CARAML_LOCAL_DEVICES=N uses the
first N devices only.

Standard library only: JUBE runs this with the login node's python3."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
SELECT = "CARAML_LOCAL_DEVICES"


@dataclass(frozen=True)
class Host:
    kind: str  # cuda | rocm | cpu
    names: list[str] = field(default_factory=list)  # one per device found
    power_limits_w: list[float] = field(default_factory=list)
    problem: str = ""  # a driver that is there and does not work

    @property
    def found(self) -> int:
        return len(self.names) if self.kind != "cpu" else 1

    @property
    def requested(self) -> int:
        """Devices the job uses: all found, or CARAML_LOCAL_DEVICES."""
        wanted = os.environ.get(SELECT, "").strip()
        return int(wanted) if wanted.isdigit() and int(wanted) > 0 else self.found

    @property
    def unit(self) -> str:
        return "host" if self.kind == "cpu" else "GPU"

    def description(self) -> str:
        name = socket.gethostname()
        if self.kind == "cpu":
            return f"this host ({name}) without accelerators"
        models = " and ".join(sorted(set(self.names)))
        used = f" ({self.requested} used)" if self.requested != self.found else ""
        return f"this host ({name}) with {self.found}x {models}{used}"


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _nvidia() -> Host | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        proc = _run(["nvidia-smi", "--query-gpu=name,power.limit",
                     "--format=csv,noheader,nounits"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Host("cpu", problem=f"nvidia-smi did not answer ({exc})")
    if proc.returncode != 0:
        said = " ".join((proc.stdout + proc.stderr).split())
        why = said.split(". ")[0][:160] or f"exit status {proc.returncode}"
        return Host("cpu", problem=f"nvidia-smi fails ({why}): the NVIDIA driver of this host "
                                   "does not work; repair it or run on the CPUs with --tag CPU")
    names, limits = [], []
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        name, _, limit = line.rpartition(",")
        names.append(name.strip())
        try:
            limits.append(float(limit))
        except ValueError:  # "[N/A]" on GPUs without a settable limit
            pass
    return Host("cuda", names, limits) if names else None


def _amd() -> Host | None:
    # A KFD node with SIMD units is a GPU (or one GCD of a module); CPU nodes have none.
    gpus = 0
    for props in sorted(KFD_NODES.glob("*/properties")):
        match = re.search(r"^simd_count (\d+)$", props.read_text(), re.MULTILINE)
        gpus += bool(match and int(match.group(1)) > 0)
    if not gpus:
        return None
    name = "AMD GPU"
    if shutil.which("rocm-smi"):
        try:
            out = _run(["rocm-smi", "--showproductname"]).stdout
            found = re.search(r"Card [Ss]eries:\s*(.+)", out)
            name = found.group(1).strip() if found else name
        except (OSError, subprocess.TimeoutExpired):
            pass
    return Host("rocm", [name] * gpus)


def detect() -> Host:
    return _nvidia() or _amd() or Host("cpu")


def value(what: str, host: Host) -> str:
    """One parameter of platform.xml's LOCAL block."""
    limits = host.power_limits_w
    return {
        "kind": host.kind,
        "devices": str(host.requested),
        "unit": host.unit,
        "description": host.description(),
        "power_limit": f"{limits[0]:g}" if limits else "",
    }[what]


def check(devices_per_node: int, host: Host | None = None) -> None:
    """Raises ValueError, with one line that names the problem, where this
    host cannot run a job that uses `devices_per_node` of its devices."""
    host = host or detect()
    if host.problem:
        raise ValueError(host.problem)
    if devices_per_node > host.found:
        has = (f"{host.found} GPU{'s' if host.found > 1 else ''}" if host.kind != "cpu"
               else "no accelerator (the host is its one device)")
        raise ValueError(f"LOCAL: the job asks for {devices_per_node} devices and this host has "
                         f"{has}; set {SELECT} to at most {host.found}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from caraml.report import parameter

    parameter(value(sys.argv[1], detect()))
