"""Which machine and which build a row came from, and which run it is: the
host set and the accelerators' UUIDs or serials (the CPU's machine id on a
host without accelerators), the suite's commit and the lock's hash, from
the run's provenance.json; for a row without raw evidence, what its record
says (its first host and commit). Rows of one system name pool as repeats
only where machine and build agree (`pool`); a run given twice, under two
names or one, is known by its own key (`run`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from caraml.audit.evidence import Evidence
from caraml.node.iterations import FILE_NAME as ITERATIONS
from caraml.row.record import Row


@dataclass(frozen=True)
class Identity:
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    commit: str | None
    lock: str | None
    run: str

    @property
    def machine(self) -> str:
        """The machine in words: `hosts cn1, cn2; devices GPU-0a1b..., GPU-...`."""
        devices = f"; devices {', '.join(self.devices)}" if self.devices else ""
        return f"hosts {', '.join(self.hosts) or 'unknown'}{devices}"

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


def of_record(row: Row, key: str) -> Identity:
    """What a row's record says of where it ran (its first host, its
    commit), for a row without raw evidence; key: the run's own."""
    return Identity((row.node_host,) if row.node_host else (), (), row.commit, None, key)


def of(ev: Evidence) -> Identity:
    """A row's identity: from its raw evidence where it has some, else its record."""
    row, prov = ev.row, ev.provenance
    if ev.energy is not None and (ev.energy / ITERATIONS).is_file():
        key = hashlib.sha256((ev.energy / ITERATIONS).read_bytes()).hexdigest()
    else:
        package = Path(row.work_package).parent.name or ev.row_file.parent.parent.name
        key = f"{ev.run_dir.resolve()}::{package}"
    if prov:
        return Identity(tuple(sorted(prov.get("hostnames") or [])), _devices(prov), prov.get("commit"),
                        prov.get("lock_sha256"), key)
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


def apart(named: list[tuple[str, str, str]]) -> list[str]:
    """Each system whose rows come from more than one machine, or one
    build, from (system name, Identity.machine, Identity.build), named with
    them: such rows are not pooled as repeats."""
    out = []
    for system in dict.fromkeys(name for name, _, _ in named):
        mine = [(machine, build) for name, machine, build in named if name == system]
        for what, kinds in (("machines", {m for m, _ in mine}), ("builds", {b for _, b in mine})):
            if len(kinds) > 1:
                out.append(f"{system}: its rows come from {len(kinds)} {what} ({'; '.join(sorted(kinds))}); "
                           "they are not pooled as repeats")
    return out
