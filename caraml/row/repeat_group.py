"""The repeats of one configuration side by side, for JUBE's own statistics
over them (the `repeat` tag, caraml/repeats.py). JUBE's typed patterns
(platform.xml, rowPatterns) add _avg, _min, _max, _std and _cnt over every
match in the files that one work package's analysis reads, and each
repeat is a work package of its own. So the combine step also writes its
row's lines into the run folder's repeats/<configuration>/, one file per
work package, and links its work folder's `repeats` to that folder: the
`repeats` table's analyser reads `repeats/*.out` of each combine work
package, which is every repeat of its configuration decided so far, read
anew at each `jube result` (docs/jube.md, "Repeats").

A configuration is JUBE's own: the values of the parameters of the
execute work package and the steps before it, less `repeat`, JUBE's own of
each work package (jube_wp_*) and the parameters made from them (the job's
name holds its work package's id). Standard library only (login node)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from caraml import jube_run

FOLDER = "repeats"  # in the run folder
LINK = "repeats"  # in each combine work folder, to its configuration's folder there
SUFFIX = ".out"
REPEAT = "repeat"
# JUBE's parameters of one work package (jube_wp_id, jube_wp_abspath, ...),
# which its record of a run need not list beside the script's
PER_PACKAGE = "jube_wp_"
# a JUBE parameter reference: ${name} or $name; $$ is a literal dollar
_REFERENCE = re.compile(r"\$(\$|\{(\w+)\}|(\w+))")


def _references(definition: str) -> set[str]:
    return {m.group(2) or m.group(3) for m in _REFERENCE.finditer(definition) if m.group(1) != "$"}


def _chain(wp: jube_run.WorkPackage, planned: dict[int, jube_run.WorkPackage]) -> list[jube_run.WorkPackage]:
    """The work package and every one before it."""
    out, todo = [], [wp]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(planned[p] for p in current.parents if p in planned)
    return out


def configuration(wp: jube_run.WorkPackage, planned: dict[int, jube_run.WorkPackage]) -> dict[str, str]:
    """The values that make the work package's configuration: its own and
    its parents' parameters, less those that differ between the repeats of
    one configuration."""
    params, definitions = {}, {}
    for each in reversed(_chain(wp, planned)):
        params.update(each.params)
        definitions.update(each.definitions)
    def varies(name: str) -> bool:  # JUBE's own of each work package (its id, folder, parents)
        return name == REPEAT or name.startswith(PER_PACKAGE)

    varying = {name for name in params if varies(name)}
    grew = True
    while grew:  # and every parameter made from one of them
        made = {name for name, definition in definitions.items() if name not in varying
                and any(varies(used) or used in varying for used in _references(definition))}
        varying |= made
        grew = bool(made)
    return {name: value for name, value in sorted(params.items()) if name not in varying}


def key(config: dict[str, str]) -> str:
    """A configuration's folder name."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def _write(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        part.write_text(text)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def keep(work: Path, execute: Path, lines: str) -> Path | None:
    """Writes the row's lines into its configuration's folder and links
    the combine work folder `work` to it; the folder, or None outside a
    JUBE run (a ReFrame check's row). OSError, ValueError or ET.ParseError
    where the run's record or folder cannot be read or written."""
    run = jube_run.run_above(work)
    if run is None:
        return None
    planned = jube_run.work_packages(run)
    wp = planned[jube_run.work_package_id(execute)]
    group = run / FOLDER / key(configuration(wp, planned))
    group.mkdir(parents=True, exist_ok=True)
    _write(group / f"{Path(work).resolve().parent.name}{SUFFIX}", lines)
    link = Path(work) / LINK
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(group, Path(work).resolve()))
    return group


def keep_or_say(work: Path, execute: Path, lines: str) -> None:
    """keep(), where a failure costs the repeats table this row, never the row."""
    try:
        keep(work, execute, lines)
    except (OSError, ValueError, KeyError, ET.ParseError) as error:
        print(f"CARAML: the row is not in the repeats table ({type(error).__name__}: {error})",
              file=sys.stderr)
