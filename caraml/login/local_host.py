"""The `LOCAL` system: this host and its own accelerators, found when the
benchmark runs. platform.xml's LOCAL block asks this module for each value
(`python -m caraml.login.local_host kind`, through its expand_tool), and the
pre-flight asks it whether the host can run what the job asks for.

NVIDIA GPUs are found with nvidia-smi, AMD GPUs through the kernel's KFD
topology (with rocm-smi for their names); anything else is a CPU host, on
which LOCAL behaves like the CPU system. Only the GPUs the host grants are
counted, named and used: a scheduler or a shared workstation grants them
through CUDA_VISIBLE_DEVICES (NVIDIA), ROCR_VISIBLE_DEVICES and then
HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES (AMD), which nvidia-smi and the
KFD topology ignore. CARAML_LOCAL_DEVICES=N uses the first N granted ones.

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

from jpwr.gpu.visible import hip_variables

KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
SELECT = "CARAML_LOCAL_DEVICES"


@dataclass(frozen=True)
class Host:
    kind: str  # cuda | rocm | cpu
    names: list[str] = field(default_factory=list)  # one per device granted
    # each granted GPU's default power limit: LOCAL's TDP, whatever limit is set now
    default_limits_w: list[float] = field(default_factory=list)
    problem: str = ""  # a driver that is there and does not work, a grant that names no GPU
    # the granted devices as the variable the job exports names them (device_env)
    ids: list[str] = field(default_factory=list)
    grant: str = ""  # the variable that granted them, as set: "CUDA_VISIBLE_DEVICES=1"

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
        granted = f" granted by {self.grant}" if self.grant else ""
        return f"this host ({name}) with {self.found}x {models}{granted}{used}"

    def visible(self) -> str:
        """The comma list the job exports: the first `requested` granted ids."""
        return ",".join(self.ids[:self.requested]) if self.kind != "cpu" else ""


class Refused(Exception):
    """A visibility variable that names a device the host does not have."""


def _entries(variable: str) -> list[str] | None:
    spec = os.environ.get(variable)
    return None if spec is None else [e.strip() for e in spec.split(",") if e.strip()]


def _grant(variable: str, ids: list[str], uuids: list[str],
           mig_parents: dict[str, str] | None = None) -> list[int]:
    """Positions in `ids` (what the runtime counts, in its order) that the
    entries of `variable` grant: indices, whole or abbreviated UUIDs with
    or without GPU-, MIG-<uuid> and MIG-GPU-<uuid>/<gi>/<ci> (through
    `mig_parents`, MIG UUID to parent GPU UUID)."""
    spec = _entries(variable)
    if spec is None:
        return list(range(len(ids)))
    bare = [u.lower().removeprefix("gpu-") for u in uuids]
    picked: list[int] = []
    for entry in spec:
        key = entry.lower()
        if key.isdigit():
            matches = [int(key)] if int(key) < len(ids) else []
        elif key.startswith("mig-gpu-"):
            matches = [i for i, u in enumerate(bare) if u == key[8:].split("/")[0]]
        elif key.startswith("mig-"):
            parent = (mig_parents or {}).get(key[4:], "")
            matches = [i for i, u in enumerate(bare) if parent and u == parent]
        else:
            matches = [i for i, u in enumerate(bare) if u.startswith(key.removeprefix("gpu-"))]
        if len(matches) != 1:
            raise Refused(f"{variable}={os.environ[variable]} names {entry!r}, which is none of "
                          f"this host's {len(ids)} GPUs; unset it or name granted GPUs")
        picked.append(matches[0])  # each MIG instance is a device of its own
    return picked


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _mig_parents() -> dict[str, str]:
    """MIG instance UUID to its GPU's UUID (both lower case, no prefix),
    from nvidia-smi -L, which lists each instance under its GPU."""
    parents, gpu = {}, ""
    try:
        listing = _run(["nvidia-smi", "-L"]).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}  # the MIG entries are then refused by name
    for line in listing.splitlines():
        found = re.search(r"\(UUID: (GPU|MIG)-([^)]+)\)", line)
        if found and found.group(1) == "GPU":
            gpu = found.group(2).lower()
        elif found:
            parents[found.group(2).lower()] = gpu
    return parents


def _nvidia() -> Host | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        proc = _run(["nvidia-smi", "--query-gpu=pci.bus_id,uuid,name,power.default_limit",
                     "--format=csv,noheader,nounits"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Host("cpu", problem=f"nvidia-smi did not answer ({exc})")
    if proc.returncode != 0:
        said = " ".join((proc.stdout + proc.stderr).split())
        why = said.split(". ")[0][:160] or f"exit status {proc.returncode}"
        return Host("cpu", problem=f"nvidia-smi fails ({why}): the NVIDIA driver of this host "
                                   "does not work; repair it or run on the CPUs with --tag CPU")
    rows = []
    for line in proc.stdout.splitlines():
        if line.strip():
            bus, uuid, rest = (part.strip() for part in line.split(",", 2))
            name, _, limit = rest.rpartition(",")
            rows.append((bus.lower(), uuid, name.strip(), limit.strip()))
    if not rows:
        return None
    # CUDA counts in PCI bus order where told to, and fastest first by
    # default, which is bus order too where all GPUs are of one model
    rows.sort()
    variable = "CUDA_VISIBLE_DEVICES"
    spec = _entries(variable) or []
    if (len({r[2] for r in rows}) > 1 and any(e.isdigit() for e in spec)
            and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID"):
        return Host("cpu", problem=f"{variable}={os.environ[variable]} counts the GPUs fastest "
                                   "first and this host's differ, so which it grants is not "
                                   "known; set CUDA_DEVICE_ORDER=PCI_BUS_ID or give their UUIDs")
    uuids = [r[1] for r in rows]
    try:
        mig = _mig_parents() if any(e.lower().startswith("mig-") for e in spec) else {}
        granted = _grant(variable, [str(i) for i in range(len(rows))], uuids, mig)
    except Refused as err:
        return Host("cpu", problem=str(err))
    if not granted:
        return _none_granted(variable, len(rows))
    limits = []
    for i in granted:
        try:
            limits.append(float(rows[i][3]))
        except ValueError:  # "[N/A]" on GPUs without a settable limit
            pass
    # the job inherits the host's variable, so it exports the host's entries
    ids = spec if os.environ.get(variable) is not None else [str(i) for i in granted]
    return Host("cuda", [rows[i][2] for i in granted], limits, ids=ids,
                grant=f"{variable}={os.environ[variable]}" if variable in os.environ else "")


def _none_granted(variable: str, there: int) -> Host:
    return Host("cpu", problem=f"{variable}={os.environ.get(variable)!r} grants none of this "
                               f"host's {there} GPUs; unset it, or run on the CPUs with --tag CPU")


def _amd() -> Host | None:
    # A KFD node with SIMD units is a GPU (or one GCD of a module); CPU nodes
    # have none. Its unique_id is the UUID ROCR_VISIBLE_DEVICES accepts.
    uuids = []
    for props in sorted(KFD_NODES.glob("*/properties"), key=lambda p: int(p.parent.name)):
        text = props.read_text()
        match = re.search(r"^simd_count (\d+)$", text, re.MULTILINE)
        if match and int(match.group(1)) > 0:
            unique = re.search(r"^unique_id (\d+)$", text, re.MULTILINE)
            uuids.append(f"{int(unique.group(1)):016x}" if unique else "")
    if not uuids:
        return None
    # ROCR_VISIBLE_DEVICES applies first; HIP's variable (or CUDA's, which
    # HIP reads where its own is unset) counts within what it left, and is
    # the one the job exports (jpwr counts them the same way)
    outer, *rest = hip_variables()
    inner = rest[0] if rest else ""
    try:
        kept = _grant(outer, [str(i) for i in range(len(uuids))], uuids)
        seen = [uuids[i] for i in kept]
        granted = _grant(inner, [str(i) for i in range(len(seen))], seen) if inner else \
            list(range(len(seen)))
    except Refused as err:
        return Host("cpu", problem=str(err))
    if not granted:
        return _none_granted(inner or outer, len(uuids))
    grants = [f"{v}={os.environ[v]}" for v in (outer, inner) if v in os.environ]
    name = "AMD GPU"
    if shutil.which("rocm-smi"):
        try:
            out = _run(["rocm-smi", "--showproductname"]).stdout
            found = re.search(r"Card [Ss]eries:\s*(.+)", out)
            name = found.group(1).strip() if found else name
        except (OSError, subprocess.TimeoutExpired):
            pass
    listed = _entries(inner) if inner else None
    ids = listed if listed is not None else [str(i) for i in granted]
    return Host("rocm", [name] * len(granted), ids=ids, grant=" and ".join(grants))


def detect() -> Host:
    return _nvidia() or _amd() or Host("cpu")


def value(what: str, host: Host) -> str:
    """One parameter of platform.xml's LOCAL block."""
    limits = host.default_limits_w
    return {
        "kind": host.kind,
        "devices": str(host.requested),
        "unit": host.unit,
        "description": host.description(),
        "default_power_limit": f"{limits[0]:g}" if limits else "",
        "visible_devices": host.visible(),
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
        granted = f" granted ({host.grant})" if host.grant else ""
        raise ValueError(f"LOCAL: the job asks for {devices_per_node} devices and this host has "
                         f"{has}{granted}; set {SELECT} to at most {host.found}")


def main(argv: list[str]) -> None:
    """Writes one value for JUBE (platform.xml's LOCAL block)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from caraml.report import parameter

    parameter(value(argv[0], detect()))


if __name__ == "__main__":
    main(sys.argv[1:])
