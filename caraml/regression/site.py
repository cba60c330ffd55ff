"""ReFrame's site configuration, made from platform.xml when ReFrame loads
regression/config.py: every system block becomes a ReFrame system (its
Slurm partition, access options, processor, devices, container platform
and the suite's facts as the partition's extras), plus

    local        this host with the local scheduler: partition `cpu` (the CPU
                 tag) and `host` (the LOCAL tag: its GPUs found at run time)
    slurm-cpu    this host's CPUs through a Slurm cluster (the CPU and slurm
                 tags; CARAML_REFRAME_PARTITION names the partition, else the
                 cluster's default)

ReFrame starts each check's job script (made by the suite's planner, see
caraml/regression/plan.py) with its `local` launcher: the job script itself
runs the system's launcher (srun, torchrun, torchrun-jsc, jpwr) and
container exactly as under JUBE; the partition's extras name them.
The Slurm account comes from CARAML_ACCOUNT, as for JUBE."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from caraml.login import systems

ENVIRONMENT = "caraml"
NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]*$")
DEVICE_TYPES = {"cuda": "gpu", "rocm": "gpu", "ipu": "ipu"}
# the facts a check reads from its partition
EXTRAS = ("launcher", "energy_methods", "energy_scope", "device_kind", "device_unit", "submit_mode",
          "container", "container_flags", "peak_tflops")
# tags=: every JUBE tag the check's job was planned with (the check's name
# keeps its configuration parameter, which -S extra_tags=... does not change)
PERFLOG_FORMAT = (
    "%(check_job_completion_time)s|reframe %(version)s|%(check_name)s|"
    "%(check_system)s:%(check_partition)s|%(check_environ)s|"
    "system=%(check_caraml_system)s|config=%(check_caraml_config)s|tags=%(check_caraml_tags)s|"
    "status=%(check_caraml_status)s|"
    "measurement=%(check_caraml_measurement)s|"
    "commit=%(check_caraml_commit)s|suite=%(check_caraml_suite_version)s|torch=%(check_caraml_torch)s|"
    "energy_methods=%(check_caraml_energy_methods)s|energy_scope=%(check_caraml_energy_scope)s|"
    "energy=%(check_caraml_energy_kind)s|energy_window=%(check_caraml_energy_window)s|"
    "flags=%(check_caraml_flags)s|%(check_perfvalues)s")
PERFVAR_FORMAT = ("%(check_perf_var)s=%(check_perf_value)s|%(check_perf_unit)s|"
                  "ref=%(check_perf_ref)s|lower=%(check_perf_lower_thres)s|"
                  "upper=%(check_perf_upper_thres)s|result=%(check_perf_result)s|")


class SiteError(ValueError):
    pass


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def access(params: dict[str, str], environ: Mapping[str, str]) -> list[str]:
    """sbatch options that reach the system's nodes: the partition, the
    account (CARAML_ACCOUNT) and the system's additional #SBATCH lines."""
    options = [f"--partition={params['partition']}"] if params.get("partition") else []
    if environ.get("CARAML_ACCOUNT"):
        options.append(f"--account={environ['CARAML_ACCOUNT']}")
    for line in (params.get("additional_sbatch") or "").splitlines():
        line = line.strip()
        if line.startswith("#SBATCH"):
            options.append(line.removeprefix("#SBATCH").strip())
    return options


def partition(system: systems.System, name: str, scheduler: str, tags: list[str], environ: Mapping[str, str],
              cpus: int | None = None, descr: str | None = None) -> dict:
    p = system.params
    per_node = _int(p.get("devices_per_node")) or 1
    cpus = cpus or ((_int(p.get("cpus_per_task")) or 0) * (_int(p.get("tasks_per_node")) or 1)) or None
    entry = {
        "name": name, "descr": descr or p.get("system_description") or system.tag,
        "scheduler": scheduler, "launcher": "local", "environs": [ENVIRONMENT],
        "access": access(p, environ) if scheduler != "local" else [],
        # one benchmark job at a time: two would measure each other
        "max_jobs": 1,
        "extras": {"caraml_tags": tags, **{k: p.get(k, "") for k in EXTRAS}},
    }
    if cpus:
        entry["processor"] = {"num_cpus": cpus}
    kind = DEVICE_TYPES.get(p.get("device_kind", ""))
    if kind:
        entry["devices"] = [{"type": kind, "arch": p.get("peak_tflops") or p.get("device_kind"),
                             "num_devices": per_node}]
    if p.get("container"):
        entry["container_platforms"] = [{"type": "Apptainer"}]
    return entry


def _system(name: str, descr: str, hostnames: list[str], partitions: list[dict]) -> dict:
    if not NAME.match(name):
        raise SiteError(f"platform.xml's system tag {name!r} cannot name a ReFrame system "
                        "(a letter first, then letters, digits, _ or -): rename the tag")
    return {"name": name, "descr": descr, "hostnames": hostnames, "modules_system": "nomod",
            "partitions": partitions}


def reframe_log(argv: list[str], environ: Mapping[str, str]) -> Path:
    """Where ReFrame's own log goes: reframe.log under the run's prefix
    (`--prefix`, else RFM_PREFIX, else the folder ReFrame runs in, its
    default prefix). ReFrame's builtin configuration writes a new
    rfm-<random>.log into the temporary folder at every run and leaves it
    there; on a shared login node every user's runs would add more."""
    prefix = environ.get("RFM_PREFIX") or "."
    for i, word in enumerate(argv):
        if word == "--prefix" and i + 1 < len(argv):
            prefix = argv[i + 1]
        elif word.startswith("--prefix="):
            prefix = word.split("=", 1)[1]
    # left relative where it is: ReFrame reads this file from the configuration's own folder
    # (it changes into it) and opens the log back where it was started
    return Path(prefix) / "reframe.log"


def site_configuration(platform_xml: Path = systems.PLATFORM_XML, environ: Mapping[str, str] = os.environ,
                       argv: list[str] | None = None) -> dict:
    found = systems.load(platform_xml)
    cpus = os.cpu_count()
    listed = []
    for tag, system in found.items():
        if system["submit_mode"] == "local":
            continue  # this host's systems: the `local` system below
        part = system["partition"] or "default"
        if not NAME.match(part):
            raise SiteError(f"the Slurm partition {part!r} of {tag} cannot name a ReFrame partition")
        # chosen with --system=TAG: a login node's name says nothing of which system it reaches
        listed.append(_system(tag, system["system_description"], ["^$"],
                              [partition(system, part, "slurm", [tag], environ)]))
    cpu = found.get("CPU")
    local_parts = [partition(cpu, "cpu", "local", ["CPU"], environ, cpus)] if cpu else []
    if "LOCAL" in found:
        local_parts.append(partition(found["LOCAL"], "host", "local", ["LOCAL"], environ, cpus,
                                     "this host and the accelerators found when the job runs"))
    if cpu:
        slurm_part = environ.get("CARAML_REFRAME_PARTITION") or "default"
        listed.append(_system("slurm-cpu", "this host's CPUs through a Slurm cluster", ["^$"], [
            {**partition(cpu, slurm_part, "squeue", ["CPU", "slurm"], environ, cpus,
                         "CPU nodes of a Slurm cluster (CARAML_REFRAME_PARTITION)"),
             "access": [f"--partition={slurm_part}"] if environ.get("CARAML_REFRAME_PARTITION") else []}]))
    # last: ReFrame takes the first system whose host names match
    listed.append(_system("local", "this host", [".*"], local_parts))
    log = reframe_log(sys.argv if argv is None else argv, environ)
    if log.is_absolute():  # ReFrame opens it before it makes the prefix
        log.parent.mkdir(parents=True, exist_ok=True)
    return {
        "systems": listed,
        "environments": [{"name": ENVIRONMENT, "target_systems": ["*"]}],
        "logging": [{
            # ReFrame's own debug log, as its builtin configuration has it, in one place
            "handlers": [{"type": "file", "name": str(log), "level": "debug2", "append": False,
                          "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s"}],
            "handlers_perflog": [{
                "type": "filelog", "prefix": "%(check_system)s/%(check_partition)s",
                "level": "info", "append": True,
                "format": PERFLOG_FORMAT, "format_perfvars": PERFVAR_FORMAT,
            }],
        }],
    }
