"""Checks that run before a job is submitted, where JUBE itself is silent:
JUBE ignores a tag it does not know and runs on without a system tag, and
Slurm would only find out on the nodes that a job asks for more nodes than
the partition has or an image that is not there. Each problem is one `CARAML ERROR:` line and a non-zero exit,
so the work package fails and the result table shows a failed row that says
why. A benchmark's own checks (the LLM's layout check, in its own folder)
run after these, from the benchmark_checks parameter of platform.xml.

Standard library only: it runs where the suite's environment may be missing
(caraml/login/jobplan.py, run)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml import jube_run, report
from caraml.login import jobplan, local_host, systems

# the names in a tag expression: "A100|H100", "!container+800M"
TAG_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


class PreflightError(Exception):
    pass


def load_yaml_script(path: Path) -> object:
    """A JUBE YAML script as JUBE reads it: `!include FILE:["key"]` replaced
    by that part of FILE, found beside the script."""
    import yaml  # JUBE itself needs PyYAML to read a YAML script

    class Loader(yaml.SafeLoader):
        pass

    def include(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
        name, _, keys = loader.construct_scalar(node).partition(":")
        part: Any = load_yaml_script(path.parent / name)
        for key in re.findall(r"\[\s*[\"']([^\"']*)[\"']\s*\]", keys):
            part = part[key]
        return part

    Loader.add_constructor("!include", include)
    return yaml.load(path.read_text(), Loader=Loader)


def _tag_expressions(path: Path) -> list[str]:
    """The values of the tag attributes (XML) or tag keys (YAML) of a JUBE
    script, where JUBE reads them: never words of a comment."""
    if path.suffix in (".yaml", ".yml"):
        found: list[str] = []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    if key == "tag" and isinstance(value, (str, int, float)):
                        found.append(str(value))
                    else:
                        walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(load_yaml_script(path))
        return found
    return [e.attrib["tag"] for e in ET.parse(path).getroot().iter() if "tag" in e.attrib]


def declared_tags(*files: Path) -> set[str]:
    """Every tag name any tag expression in these files mentions."""
    return {word for path in files for expression in _tag_expressions(path)
            for word in TAG_WORD.findall(expression)}


def check_one_of(selected: list[str], groups: list[str]) -> None:
    """Tags of one group (model sizes, backends) exclude each other: JUBE
    would keep the last one without a word."""
    for group in groups:
        chosen = [t for t in group.split() if t in selected]
        if len(chosen) > 1:
            raise PreflightError(f"tags {' and '.join(chosen)} exclude each other; give one of: {group}")


def check_python(python: str | Path) -> None:
    if not Path(python).exists():
        raise PreflightError(f"the suite's environment is missing ({python} not found): "
                             "run bash aux/setup.sh or set CARAML_VENV to the environment it made")


def check_tags(selected: list[str], known: set[str], system_tags: list[str]) -> None:
    unknown = [t for t in selected if t not in known]
    if unknown:
        raise PreflightError(
            f"unknown tag{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"systems: {', '.join(system_tags)}; other tags: "
            f"{', '.join(sorted(known - set(system_tags)))}")
    chosen = [t for t in selected if t in system_tags]
    if not chosen:
        raise PreflightError(f"no system tag given; add one of: {', '.join(system_tags)}")
    if len(chosen) > 1:
        raise PreflightError(f"several system tags given ({', '.join(chosen)}); give exactly one")


def check_container(container: str, script: Path, system: str) -> None:
    image = jobplan.container_image(jobplan.ROOT, container)
    if not image.is_file():
        definition = jobplan.container_definition(jobplan.ROOT, container)
        raise PreflightError(
            f"container image {image} not found; build it with: "
            f"jube run {script.parent.name}/{script.name} --tag container {system}"
            f" (definition {definition.relative_to(jobplan.ROOT)})")


def check_kind(kind: str, system: str, kinds: list[str], other_script: str,
               script: Path) -> None:
    if kinds and kind not in kinds:
        raise PreflightError(
            f"{system} ({kind} devices) is not run by {script.name}"
            + (f"; use {other_script}" if other_script else ""))


def check_buildable(system: systems.System) -> None:
    if not system.container:
        raise PreflightError(
            f"{system.tag} has no container: it runs in the suite's virtual environment "
            "(.venv); leave out the container tag")


def check_nodes(system: systems.System, nodes: int, set_by: str) -> None:
    available = system.nodes_available
    if available is not None and nodes > available:
        raise PreflightError(
            f"{system.tag} has {available} node{'s' if available > 1 else ''} "
            f"(nodes_available in platform.xml) and the job asks for {nodes}"
            + (f" ({set_by})" if set_by else ""))


def check_batch_split(global_batch: str, devices: int) -> None:
    """Data parallelism gives every device the same share of the batch."""
    if global_batch and int(global_batch) < 1:
        raise PreflightError(f"global batch size {global_batch} is no number of samples: give a "
                             f"positive multiple of the {devices} device{'s' if devices > 1 else ''}")
    if global_batch and (int(global_batch) % devices or int(global_batch) < devices):
        raise PreflightError(f"global batch size {global_batch} does not divide evenly over "
                             f"{devices} device{'s' if devices > 1 else ''}; use a multiple of {devices}")


def check_devices(system: systems.System, needed: int, nodes: int, devices_per_node: int) -> None:
    if needed > nodes * devices_per_node:
        raise PreflightError(
            f"the model needs {needed} devices, but {system.tag} with {nodes} "
            f"node{'s' if nodes > 1 else ''} has {nodes * devices_per_node}")


# what platform.xml exports to every step (jobParameter, export="true")
EXPORTED = ("CARAML_ROOT", "CARAML_RUNDIR", "CARAML_BENCHMARK_HOME")


def check_exported(environ: Mapping[str, str] = os.environ) -> None:
    """JUBE 2.5.1 gives a work package its exported variables only when it
    first starts: `jube continue` after an interrupted `jube run` reruns the
    package without them, and every path the step names would be wrong."""
    missing = [name for name in EXPORTED if not environ.get(name)]
    if missing:
        raise PreflightError(
            f"this step runs without {', '.join(missing)}: JUBE continued a work package that an "
            "interrupted `jube run` had started, and JUBE 2.5.1 gives such a package none of "
            "platform.xml's exported variables; start the benchmark again with `jube run`")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-config", type=Path, required=True,
                    help="configuration.xml that JUBE wrote for this run")
    ap.add_argument("--script", type=Path, required=True, help="the benchmark's JUBE script")
    ap.add_argument("--platform", type=Path, default=systems.PLATFORM_XML)
    ap.add_argument("--system", required=True, help="system_name as JUBE resolved it")
    ap.add_argument("--nodes", type=int, default=1, help="nodes the job asks for")
    ap.add_argument("--devices-per-node", type=int, default=1)
    ap.add_argument("--container-name", default="",
                    help="the system's container (containers/<name>.def); empty: the job "
                         "runs in the suite's environment (CARAML_VENV, else .venv)")
    ap.add_argument("--dry-run", action="store_true",
                    help="the job script is only written: the image need not exist")
    ap.add_argument("--build-container", action="store_true",
                    help="the job builds the system's image")
    ap.add_argument("--kinds", nargs="*", default=[],
                    help="device kinds the benchmark runs on (default: all)")
    ap.add_argument("--other-script", default="", help="the benchmark for the other kinds")
    ap.add_argument("--nodes-set-by", default="",
                    help="what chose the node count, for the message (e.g. 'the 13B layout')")
    ap.add_argument("--one-of", action="append", default=[], metavar="TAGS",
                    help="space-separated tags of which at most one may be given")
    ap.add_argument("--device-kind", default="",
                    help="the device kind as JUBE resolved it (LOCAL finds it at run time)")
    ap.add_argument("--check-local-host", action="store_true",
                    help="LOCAL: this host must have a working driver and the devices asked for")
    ap.add_argument("--split-batch", default="", metavar="GLOBAL_BATCH",
                    help="data-parallel only: this global batch must divide over the devices")
    ap.add_argument("--devices-needed", type=int, default=0,
                    help="devices one model instance needs (pipelined models)")
    args = ap.parse_args(argv)
    try:
        check_exported()
        system_tags = systems.names(args.platform)
        selected = jube_run.tags(args.run_config)
        check_tags(selected, declared_tags(args.script, args.platform), system_tags)
        check_one_of(selected, args.one_of)
        system = systems.load(args.platform)[args.system]
        check_kind(args.device_kind or system.device_kind, system.tag, args.kinds,
                   args.other_script, args.script)
        if args.check_local_host:
            local_host.check(args.devices_per_node)
        if args.build_container:
            check_buildable(system)
            return 0
        if not args.container_name:
            check_python(jobplan.suite_python())
        check_devices(system, args.devices_needed, args.nodes, args.devices_per_node)
        check_batch_split(args.split_batch, args.nodes * args.devices_per_node)
        check_nodes(system, args.nodes, args.nodes_set_by)
        if args.container_name and not args.dry_run:
            check_container(args.container_name, args.script, args.system)
    except (PreflightError, OSError, ET.ParseError, ValueError) as exc:
        report.error(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
