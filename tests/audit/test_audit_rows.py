"""The audit of rows without raw evidence (older runs, rows written by
hand): read as unaudited, ranked only where accepted, refused where their
own record breaks a rule; and which rows pool as repeats: one machine and
one build, one run under one name."""

from __future__ import annotations

import json

import pytest

from caraml.audit import check
from caraml.audit.decide import REFUSED, UNAUDITED
from caraml.audit.runs import Source, audits
from caraml.compare import cli, comparison, repeats, rows
from tests.caraml.recorded_rows import RECORD
from tests.compare import rowfixtures as fx


def test_rows_of_older_schemas_still_read_as_unaudited(tmp_path, capsys):
    recorded = json.loads(RECORD.read_text())
    outpath = fx.write_run(tmp_path, "old", [case["row"] for case in recorded.values()])
    found = audits(Source(outpath / "000000", None, "old"))
    assert [a.state for a in found] == [UNAUDITED] * len(recorded)
    assert {a.row.benchmark for a in found} == {"image", "llm", "operator"}
    assert all(a.missing.startswith("no raw evidence: ") for a in found)
    # a row of them claims a measurement it has no raw evidence for: caraml-check says so
    assert check.main([str(outpath)]) == check.VIOLATION
    printed = capsys.readouterr().out
    assert ": raw-evidence: it claims a measurement and has no raw evidence: " in printed
    assert f"unaudited; {sum(a.claims for a in found)} violations" in printed


def _systems(tmp_path, **rows: dict) -> list[str]:
    """SYSTEM=PATH arguments, one run of one row written by hand each."""
    return [f"{name}={fx.write_run(tmp_path, name.lower(), [row])}" for name, row in rows.items()]


def test_an_unaudited_row_ranks_only_where_accepted_and_each_sentence_says_so(tmp_path, capsys):
    args = _systems(tmp_path, A100=fx.a100(), GH200=fx.gh200())
    assert cli.main([*args, "--out", str(tmp_path / "strict"), "--no-references"]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert "unaudited: GH200 llm 800M bf16 seq 2048: no raw evidence: " in printed
    assert ("failed benchmark: GH200 llm: no measured row (1 rows: not a measurement (no raw evidence: "
            in printed)
    assert "caraml-compare --accept-unaudited ranks it unaudited" in printed
    assert "Fastest per node" not in printed
    assert fx.compare([*args, "--out", str(tmp_path / "accepted"), "--no-references"]) == 0
    decided = [line for line in capsys.readouterr().out.splitlines() if line.startswith("decision llm: ")]
    assert decided[0].startswith("decision llm: Fastest per node: GH200 (unaudited), ")
    assert "over A100 (unaudited) " in decided[0] and all(" (unaudited)" in line for line in decided)


def test_a_hand_edited_short_row_that_claims_a_measurement_is_refused(tmp_path, capsys):
    # 4 timed iterations, a nan loss, and "measurement": true written by hand
    short = fx.nan_loss(fx.smoke("H100", per_s_per_device=99000.0))
    path = fx.write_run(tmp_path, "h100", [short])
    row_file = path / "000000" / "000000_execute" / "work" / "row.json"
    data = json.loads(row_file.read_text())
    data.update(measurement=True, not_a_measurement="")
    row_file.write_text(json.dumps(data))
    table = fx.load([f"H100={path}", f"A100={fx.write_run(tmp_path, 'a', [fx.a100()])}"]).set_index("system")
    assert table.loc["H100", "audit"] == REFUSED and not table.loc["H100", "measurement"]
    # the numerics rule comes before the length rule: the loss names it
    assert table.loc["H100", "not_a_measurement"] == (
        "refused by the audit: verdict-recomputed: stated a measurement; its figures are none (loss nan at "
        "iteration 3)")
    assert check.main([str(path)]) == check.VIOLATION
    assert ": verdict-recomputed: stated a measurement; its figures are none (" in capsys.readouterr().out


def test_an_implausible_row_is_refused_even_where_unaudited_rows_are_accepted(tmp_path, capsys):
    args = _systems(tmp_path, A100=fx.a100(), X=fx.a100(system={"name": "X"}, mfu=2.0, peak=312.0))
    assert fx.compare([*args, "--out", str(tmp_path / "out"), "--no-references"]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert "REFUSED: X llm 800M bf16 seq 2048 " in printed
    assert "mfu-at-most-1: MFU 2 (stated: 624 TFLOP/s per device) exceeds 1 against its datasheet peak " \
           "312 TFLOP/s (bf16)" in printed
    assert "Fastest per node: A100 (unaudited)" in printed and "over X" not in printed


def test_runs_of_one_system_from_two_machines_are_named_and_not_pooled(tmp_path, capsys):
    here = [fx.write_run(tmp_path, f"a{i}", [fx.a100(per_s_per_device=19000.0 + i)]) for i in range(2)]
    there = fx.write_run(tmp_path, "b", [fx.a100(per_s_per_device=25000.0,
                                                 provenance={"host": "other-node7"})])
    table = fx.load([f"A100={p}" for p in (*here, there)])
    configs = repeats.collapse(rows.measured(table))
    # the two runs of one machine pool; the third machine's run stands apart
    assert sorted(configs["runs"]) == [1, 2]
    assert rows.apart(table) == ["A100: its rows come from 2 machines (hosts a100-node1; hosts other-node7); "
                                 "they are not pooled as repeats"]
    assert fx.compare([*(f"A100={p}" for p in (*here, there)), "--out", str(tmp_path / "out"),
                       "--no-references"]) == 0
    assert "not pooled: A100: its rows come from 2 machines" in capsys.readouterr().out


def test_repeats_of_two_commits_are_not_pooled(tmp_path):
    runs = [fx.write_run(tmp_path, name, [fx.a100(provenance={"commit": commit})])
            for name, commit in (("a", "abc1234"), ("b", "abc1234"), ("c", "def5678"))]
    table = fx.load([f"A100={p}" for p in runs])
    assert sorted(repeats.collapse(rows.measured(table))["runs"]) == [1, 2]
    assert rows.apart(table) == ["A100: its rows come from 2 builds (commit abc1234; commit def5678); "
                                 "they are not pooled as repeats"]


@pytest.mark.parametrize("names", [("A", "B"), ("A", "A")])
def test_one_run_given_twice_is_refused(tmp_path, capsys, names):
    path = fx.write_run(tmp_path, "a", [fx.a100()])
    argv = [f"{name}={path}" for name in names]
    assert fx.compare([*argv, "--out", str(tmp_path / "out")]) == comparison.BAD_INPUT
    err = capsys.readouterr().err
    assert f"one run given 2 times: as {names[0]} ({path / '000000'}/000000_execute); as {names[1]}" in err
    assert "(one-name-per-run)" in err
