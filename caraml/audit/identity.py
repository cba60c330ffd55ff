"""Which machine and which build a row came from, and which run it is: the
machine's hardware (each host's CPU model and count, its accelerators by
name, firmware and driver), the host set and the accelerators' UUIDs or
serials (the CPU's machine id on a host without accelerators), the suite's
commit and the lock's hash, from the run's provenance.json; for a row
without raw evidence, what its record says (its first host and commit).

Rows of one system name pool as repeats only where their hardware and
build agree (`pool`): the nodes of one partition are the system a centre
buys, and a repeat that Slurm put on another node of the same hardware is
a repeat of it (its host set is named, `host_sets`), while runs from other
hardware under one name are two machines, never pooled (`apart`). A run
given twice, under two names or one, is known by its own key (`run`)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from caraml.audit.evidence import Evidence
from caraml.node.iterations import FILE_NAME as ITERATIONS
from caraml.row.record import Row


@dataclass(frozen=True)
class Identity:
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    # each kind of host in the job with how many of it (`2 x AMD EPYC 7742 x256 with 4 x NVIDIA
    # A100-SXM4-40GB (firmware ..., driver ...)`); empty where no raw evidence names the hardware
    hardware: tuple[str, ...]
    commit: str | None
    lock: str | None
    run: str

    @property
    def host_set(self) -> str:
        """Where it ran in words: `hosts cn1, cn2; devices GPU-0a1b..., GPU-...`."""
        devices = f"; devices {', '.join(self.devices)}" if self.devices else ""
        return f"hosts {', '.join(self.hosts) or 'unknown'}{devices}"

    @property
    def machine(self) -> str:
        """The machine repeats must share: its hardware in words; its host set
        where no raw evidence names the hardware (a row's record alone)."""
        return "; ".join(self.hardware) if self.hardware else self.host_set

    @property
    def build(self) -> str:
        lock = f", lock {self.lock[:12]}" if self.lock else ""
        return f"commit {(self.commit or 'unknown')[:12]}{lock}"

    @property
    def pool(self) -> str:
        """What repeats of one configuration must share: the machine and the build."""
        return f"{self.machine} | {self.build}"


def _devices(provenance: dict) -> tuple[str, ...]:
    """Each accelerator by its UUID, else its serial, else its PCI bus id on
    its host; a host without one by its machine id."""
    out = []
    for host in provenance.get("machine") or []:
        accelerators = host.get("accelerators") or []
        for device in accelerators:
            found = device.get("uuid") or device.get("serial") or \
                (device.get("pci_bus_id") and f"{host.get('host')}:{device['pci_bus_id']}")
            if found:
                out.append(str(found))
        if not accelerators and host.get("machine_id"):
            out.append(f"{host.get('host')}:machine-id:{host['machine_id'][:12]}")
    return tuple(sorted(out))


def _host_kind(host: dict) -> str:
    """One host's hardware in words: its CPU and its accelerators by name, firmware and driver."""
    kinds = Counter(f"{device.get('name') or 'unnamed accelerator'} "
                    f"(firmware {device.get('firmware') or '?'}, driver {device.get('driver') or '?'})"
                    for device in host.get("accelerators") or [])
    accelerators = " with " + ", ".join(f"{n} x {kind}" for kind, n in sorted(kinds.items())) if kinds else ""
    return f"{host.get('cpu_model') or 'unknown CPU'} x{host.get('cpus') or '?'}{accelerators}"


def _hardware(provenance: dict) -> tuple[str, ...]:
    """Each kind of host of the job with how many of it, in one order."""
    kinds = Counter(_host_kind(host) for host in provenance.get("machine") or [])
    return tuple(f"{n} x {kind}" for kind, n in sorted(kinds.items()))


def of_record(row: Row, key: str) -> Identity:
    """What a row's record says of where it ran (its first host, its
    commit), for a row without raw evidence; key: the run's own."""
    return Identity((row.node_host,) if row.node_host else (), (), (), row.commit, None, key)


def of(ev: Evidence) -> Identity:
    """A row's identity: from its raw evidence where it has some, else its record."""
    row, prov = ev.row, ev.provenance
    if ev.energy is not None and (ev.energy / ITERATIONS).is_file():
        key = hashlib.sha256((ev.energy / ITERATIONS).read_bytes()).hexdigest()
    else:
        package = Path(row.work_package).parent.name or ev.row_file.parent.parent.name
        key = f"{ev.run_dir.resolve()}::{package}"
    if prov:
        return Identity(tuple(sorted(prov.get("hostnames") or [])), _devices(prov), _hardware(prov),
                        prov.get("commit"), prov.get("lock_sha256"), key)
    return of_record(row, key)


def given_twice(named: list[tuple[str, str, str]]) -> list[str]:
    """Each run given more than once, under two names or one, from
    (system name, the run's key: Identity.run, where it was read): one line
    each, naming every time it was given."""
    where: dict[str, list[str]] = {}
    for system, key, place in named:
        where.setdefault(key, []).append(f"as {system} ({place})")
    return [f"one run given {len(found)} times: {'; '.join(found)}" for found in where.values()
            if len(found) > 1]


def host_sets(named: list[tuple[str, str, str]]) -> list[str]:
    """Each system whose rows of one machine (Identity.machine) ran on more
    than one host set, from (system name, Identity.machine,
    Identity.host_set): pooled as repeats, and named, so that a reader sees
    the nodes a median spans."""
    out = []
    for system, machine in dict.fromkeys((name, machine) for name, machine, _ in named):
        sets = sorted({where for name, kind, where in named if (name, kind) == (system, machine)})
        if len(sets) > 1:
            out.append(f"{system}: its rows ran on {len(sets)} host sets of one machine ({machine}): "
                       f"{'; '.join(sets)}; pooled as repeats")
    return out


def apart(named: list[tuple[str, str, str]]) -> list[str]:
    """Each system whose rows come from more than one machine (hardware),
    or one build, from (system name, Identity.machine, Identity.build),
    named with them: such rows are not pooled as repeats."""
    out = []
    for system in dict.fromkeys(name for name, _, _ in named):
        mine = [(machine, build) for name, machine, build in named if name == system]
        for what, kinds in (("machines", {m for m, _ in mine}), ("builds", {b for _, b in mine})):
            if len(kinds) > 1:
                out.append(f"{system}: its rows come from {len(kinds)} {what} ({'; '.join(sorted(kinds))}); "
                           "they are not pooled as repeats")
    return out
