"""What a centre's own ReFrame configuration may name differently from the
suite's (regression/config.py), read the way the checks need it:

- a partition named after its system in another case (`cpu` for the `CPU`
  tag): platform.xml's tag of that name, whatever its case; a name that is
  no tag is refused with the check variable that gives one;
- the environments the checks run in: a configuration whose partitions
  offer none of them lists no check, and ReFrame does not say why, so the
  checks say which names they look for and how to give the centre's own.

Standard library only; ReFrame's own objects stay in regression/checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from caraml.login import systems
from caraml.regression.plan import PlanError


def system_tags(given: Iterable[str], where: str, known: Iterable[str] | None = None) -> list[str]:
    """The JUBE tags of a check's system: each that names a platform.xml
    system in any case becomes that system's tag; the others (slurm, ...)
    stay. PlanError, one line, where none names a system."""
    known = list(systems.load()) if known is None else list(known)
    by_case = {tag.lower(): tag for tag in known}
    tags = [by_case.get(tag.lower(), tag) for tag in given]
    if not any(tag in known for tag in tags):
        raise PlanError(f"{where}: {' '.join(given) or 'no tag'} names no system of platform.xml "
                        f"({', '.join(known)}); give the system's tag with -S system_tag=TAG")
    return tags


def environment_note(looked_for: Iterable[str], offered: Mapping[str, Iterable[str]],
                     system: str) -> str | None:
    """Why ReFrame lists no check on this system, or None where a partition
    offers an environment the checks run in (patterns other than plain
    names, `*` or `+feature`, are ReFrame's to match)."""
    looked_for = list(looked_for)
    if any(not name.replace("-", "").replace("_", "").isalnum() for name in looked_for):
        return None
    names = sorted({env for envs in offered.values() for env in envs})
    if set(looked_for) & set(names):
        return None
    return (f"the CARAML checks run in a programming environment named {' or '.join(looked_for)}, "
            f"and no partition of system {system} offers one ({', '.join(names) or 'none'}): "
            f"name the centre's with -S valid_prog_environs={names[0] if names else 'NAME'}")
