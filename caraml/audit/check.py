"""caraml-check RUN_OR_BUNDLE...: the run rules checked on every row of
run folders and bundles (docs/run_rules.md), one line per violation:

    <run>/<work package> <system> <benchmark> <configuration>: <rule>: <evidence>

then a line per system whose rows come from several machines or builds
(`note:`, not pooled by caraml-compare) and a summary. Exit status 0 when
every row is a measurement that passes every rule or claims none; 1 when a
row claims what its evidence does not show (a figure its recomputation
does not give, a verdict its figures do not earn, a measurement without
raw evidence) or breaks a bound, or a bundle's files are not its
manifest's; 2 on bad input (a path that is neither a run nor a bundle, a
file that is no bundle)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from caraml.audit import identity
from caraml.audit.bundle import BundleError, Refused
from caraml.audit.decide import AUDITED, REFUSED, UNAUDITED, Audit
from caraml.audit.findings import MANIFEST, RAW_EVIDENCE, Finding
from caraml.audit.runs import NotARun, Source, audits, sources
from caraml.row.status import RAN
from jpwr.version import VersionAction

OK, VIOLATION, BAD_INPUT = 0, 1, 2


def violations(audit: Audit) -> list[Finding]:
    """What a row breaks: its findings, and a measurement it claims without the raw evidence to show it."""
    if audit.state == UNAUDITED and audit.claims:
        return [Finding(RAW_EVIDENCE, f"it claims a measurement and has {audit.missing}")]
    return list(audit.findings)


def named(source: Source, audit: Audit) -> str:
    row = audit.row
    return (f"{source.name}/{Path(row.work_package).parent.name or audit.row_file.parent.parent.name} "
            f"{row.system_name or 'unknown-system'} {row.benchmark or 'unknown-benchmark'} {row.label}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="caraml-check", description="Check every row of JUBE runs and bundles against the run rules "
                                         "(docs/run_rules.md): one line per violation.")
    parser.add_argument("paths", nargs="+", type=Path, metavar="RUN_OR_BUNDLE",
                        help="a JUBE run folder, an outpath (its latest run), a folder of outpaths or a "
                             "bundle")
    parser.add_argument("--all-runs", action="store_true",
                        help="every run of an outpath, not only its latest")
    parser.add_argument("--version", action=VersionAction)
    args = parser.parse_args(argv)
    found: list[tuple[Source, Audit]] = []
    broken = 0
    with ExitStack() as stack:
        for path in args.paths:
            try:
                runs = stack.enter_context(sources(path, args.all_runs))
            except Refused as err:
                print(f"{path}: {MANIFEST}: {err}")
                broken += 1
                continue
            except (NotARun, BundleError) as err:
                print(f"caraml-check: error: {err}", file=sys.stderr)
                return BAD_INPUT
            found += [(source, audit) for source in runs for audit in audits(source)]
        for source, audit in found:
            for finding in violations(audit):
                print(f"{named(source, audit)}: {finding}")
                broken += 1
    ran = [(a.row.system_name or "unknown-system", a.identity) for _, a in found if a.row.state in RAN]
    for line in identity.apart([(name, ident.machine, ident.build) for name, ident in ran]) \
            + identity.host_sets([(name, ident.machine, ident.host_set) for name, ident in ran]) \
            + identity.given_twice([(a.row.system_name or "unknown-system", a.identity.run, s.name)
                                    for s, a in found]):
        print(f"note: {line}")
    states = {state: sum(a.state == state for _, a in found) for state in (AUDITED, REFUSED, UNAUDITED)}
    measurements = sum(a.row.measurement and a.state == AUDITED for _, a in found)
    print(f"checked {len(found)} rows: {states[AUDITED]} audited ({measurements} measurements), "
          f"{states[REFUSED]} refused, {states[UNAUDITED]} unaudited; {broken} violations; "
          f"exit status {VIOLATION if broken else OK}")
    return VIOLATION if broken else OK


if __name__ == "__main__":
    sys.exit(main())
