"""The README's main command's runs (its CPU smoke runs through the
session's Slurm cluster) bundle and check clean: every row audited, its
figures made again from its raw evidence."""

from __future__ import annotations

import pytest

from caraml import benchmarks
from caraml.audit import bundle, check
from caraml.audit.decide import AUDITED
from caraml.audit.runs import audits, sources

pytestmark = [pytest.mark.jube, pytest.mark.slurm]


def test_the_main_commands_runs_bundle_and_check_clean(main_command_through_slurm, slurm, tmp_path, capsys):
    outpaths = []
    for entry in benchmarks.BUILT_IN:
        run = main_command_through_slurm.run_of(entry.name)
        run.after_slurm(slurm)
        outpaths.append(run.outpath)
    out = tmp_path / "cpu.tar.gz"
    assert bundle.main([*map(str, outpaths), "--out", str(out)]) == 0
    assert check.main([str(out)]) == check.OK, capsys.readouterr().out
    printed = capsys.readouterr().out
    with sources(out) as runs:
        found = [a for source in runs for a in audits(source)]
    assert len(runs) == 3 and {a.row.benchmark for a in found} == {"image", "llm", "operator"}
    assert [a.state for a in found] == [AUDITED] * len(found), printed
