"""caraml-compare on the rows a shared machine's runs leave: a row.json
whose figures are no finite numbers (a damaged file, a line that said
`inf`), a finished job whose energy record is gone (its combine step's row
never written, or deleted), a run still going. Each is one line that names
it, never a traceback, and none is ranked."""

from __future__ import annotations

import json
import math

from tests.caraml.row_packages import PROVENANCE, START, execute, finished_job, run_dir, write
from tests.compare import rowfixtures as fx


def _compare(tmp_path, *systems: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    # rows written by hand have no raw evidence to audit: accepted unaudited, as the comparison's tests do
    status = fx.compare([f"A100={fx.write_run(tmp_path, 'a100', [fx.a100()])}", *systems,
                         "--out", str(tmp_path / "out"), "--no-references"])
    return status, capsys.readouterr().out


def test_figures_that_are_no_finite_numbers_are_named_not_a_traceback(tmp_path, capsys):
    old = fx.row("H100", "llm", per_s_per_device=math.nan)  # the schema before, NaN in its JSON
    new = run_dir(tmp_path / "h200")
    (new / "configuration.xml").write_text("<jube/>\n")
    decided = json.loads(json.dumps(fx.a100()))  # a row of today's schema, from the same figures
    from caraml.row import row_json
    row = row_json.from_dict(decided)
    data = row_json.to_dict(row) | {"wh": math.inf, "wh_run": math.inf, "work_package": str(execute(new))}
    (execute(new) / "row.json").write_text(json.dumps(data))  # Infinity in its JSON
    status, out = _compare(tmp_path, f"H100={fx.write_run(tmp_path, 'h100', [old])}",
                           f"H200={tmp_path / 'h200'}", capsys=capsys)
    assert status == 1, out
    said = [line for line in out.splitlines() if line.startswith("not a measurement: ")]
    assert any(line.startswith("not a measurement: H100 ") and "its per_s, " in line
               and "are not finite numbers" in line for line in said), out
    assert any(line.startswith("not a measurement: H200 ") and "wh, wh_run are not finite numbers" in line
               for line in said), out
    assert "decision llm: Fastest per node: A100" in out


def test_a_finished_job_whose_energy_record_is_gone_says_so(tmp_path, capsys):
    run = run_dir(tmp_path / "h100", {"energy_methods": "pynvml"})
    (run / "configuration.xml").write_text("<jube/>\n")
    write(execute(run), job_out=finished_job())  # ran; its combine step's row.json is not there
    status, out = _compare(tmp_path, f"H100={tmp_path / 'h100'}", capsys=capsys)
    assert status == 1, out
    assert ("not a measurement: H100 llm 800M bf16 seq 2048: its energy is not combined: the combine step "
            "has not run (jube continue) or its record of the row (row.json) is gone") in out, out


def test_a_run_still_going_names_its_state_in_every_table(tmp_path, capsys):
    run = run_dir(tmp_path / "h100")
    (run / "configuration.xml").write_text("<jube/>\n")
    write(execute(run), job_out=f"{START}\n{PROVENANCE}\niteration 3/100: loss 7\n")
    status, out = _compare(tmp_path, f"H100={tmp_path / 'h100'}", capsys=capsys)
    assert status == 1, out
    why = "running: the job has not ended yet: its row is decided once `jube continue` has seen it end"
    rows = [line for line in (tmp_path / "out" / "comparison_llm.md").read_text().splitlines()
            if line.startswith("| H100 |")]
    assert rows and all(f"| {why} |" in line for line in rows), rows
