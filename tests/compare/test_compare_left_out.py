"""The decision files name what was left out and what a vendor may
contest: a repeat whose loss went nan (which run, and why), a system the
cost could not price (absent, or misspelt in the prices file, with the
close name), and in what is ranked a single run, a timed window within 5 %
of the verdict's minimum, a row of another commit, estimated energy; the
same lists in decision.json, summary.md, the report's first screen and on
stdout. A rule of its own (an audit state, say) joins the list by a row rule."""

from __future__ import annotations

import html
import json

import pandas as pd

from caraml.compare import left_out
from tests.compare import rowfixtures as fx

RULE = ("its figures rest on 1 run: nothing shows how they vary from run to run (run each configuration "
        "three times, the repeat tag)")


def _compare(tmp_path, args: list[str], *more: str) -> tuple[dict, str, str]:
    out = tmp_path / "out"
    fx.compare([*args, "--out", str(out), "--reference-system", "A100", "--no-references", *more])
    return (json.loads((out / "decision.json").read_text()), (out / "summary.md").read_text(),
            (out / "report.html").read_text())


def test_a_repeat_whose_loss_went_nan_is_named_with_its_run_and_why(tmp_path, capsys):
    for run_id, date in enumerate(["2026-11-24", "2026-11-25", "2026-11-26"]):
        data = fx.repeated(fx.a100(), 1.0, date)
        fx.write_run(tmp_path, "a100", [fx.nan_loss(data) if run_id == 1 else data], run_id=run_id)
        fx.write_run(tmp_path, "gh200", [fx.repeated(fx.gh200(), 1.0, date)], run_id=run_id)
    args = [f"A100={tmp_path / 'a100'}", f"GH200={tmp_path / 'gh200'}"]
    record, summary, page = _compare(tmp_path, args, "--all-runs")
    [excluded] = [item for item in record["left_out"] if item["kind"] == left_out.EXCLUDED_RUN]
    assert excluded == {"kind": "excluded run", "what": "A100 800M bf16 seq 2048 batch 512",
                        "why": "not a measurement (loss nan at iteration 3)", "system": "A100",
                        "benchmark": "llm", "configuration": "800M bf16 seq 2048",
                        "run": "a100/000001 of 2026-11-25",
                        "row_file": str(tmp_path / "a100/000001/000000_execute/work/row.json")}
    line = ("llm: excluded run: A100 800M bf16 seq 2048 batch 512 (run a100/000001 of 2026-11-25): not a "
            "measurement (loss nan at iteration 3)")
    assert f"- {line}\n" in summary.split("## Left out of the decision\n")[1].split("\n## ")[0]
    # the first screen: under the summary, before the decision
    assert page.index(html.escape(line)) < page.index('id="decision-llm"')
    # the A100's figures rest on its two good runs
    head = pd.read_csv(tmp_path / "out" / "headline.csv").set_index("system")
    assert head.loc["A100", "runs"] == 2 and head.loc["GH200", "runs"] == 3
    assert record["contestable"] == []  # three runs each, one commit, measured energy, long windows
    assert "## What a vendor may contest\n\n- none\n" in summary


def test_an_unpriced_system_is_named_with_why_and_a_misspelt_entry_with_its_close_name(tmp_path, capsys):
    h100 = fx.a100(system={"name": "H100"}, per_s_per_device=30000.0)
    args = [f"A100={fx.write_run(tmp_path, 'a', [fx.a100()])}",
            f"GH200={fx.write_run(tmp_path, 'g', [fx.gh200()])}",
            f"H100={fx.write_run(tmp_path, 'h', [h100])}"]
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nprices:\n"
                      "  - {system: A100, node_hour: 3.0, electricity_kwh: 0.3, pue: 1.2}\n"
                      "  - {system: GH-200, node_hour: 4.0, electricity_kwh: 0.3, pue: 1.2}\n")
    record, summary, page = _compare(tmp_path, args, "--prices", str(prices))
    unpriced = {item["what"]: item["why"] for item in record["left_out"] if item["kind"] == left_out.UNPRICED}
    assert unpriced == {"GH200": "absent from the prices file; its entry 'GH-200', which names no system "
                                 "here, may be a misspelling of it",
                        "H100": "absent from the prices file"}
    assert "- unpriced system: GH200: absent from the prices file; its entry 'GH-200'" in summary
    assert "No cost for H100: absent from the prices file." in record["benchmarks"][0]["caveats"]
    printed = capsys.readouterr().out
    assert "left out: H100: absent from the prices file\n" in printed


def test_a_vendor_may_contest_a_single_run_a_short_window_another_commit_and_estimated_energy(tmp_path,
                                                                                              capsys):
    # 20 iterations in 60 s, its energy as much less as its time (the same power)
    near = {"seconds": 60.0, "timed_wh": 45.0, "throughput": {"iterations": 20, "time_per_iteration_s": 3.0}}
    h100 = fx.a100(system={"name": "H100"}, per_s_per_device=30000.0, estimated=True,
                   provenance={"commit": "def5678"})
    args = [f"A100={fx.write_run(tmp_path, 'a', [fx.a100()])}",
            f"GH200={fx.write_run(tmp_path, 'g', [fx.gh200(**near)])}",
            f"H100={fx.write_run(tmp_path, 'h', [h100])}"]
    record, summary, page = _compare(tmp_path, args)
    found = {(item["kind"], item["what"]): item["why"] for item in record["contestable"]}
    assert {what for kind, what in found if kind == left_out.SINGLE_RUN} == \
        {"A100 batch 512", "GH200 batch 512", "H100 batch 512"}
    assert found[(left_out.SHORT_WINDOW, "GH200 800M bf16 seq 2048 batch 512")] == (
        "timed 20 iterations in 60.0 s, within 5 % of the verdict's minimum (20 iterations and 60 s)")
    assert found[(left_out.OTHER_COMMIT, "H100 800M bf16 seq 2048 batch 512")] == \
        "commit def5678, where 2 of the 3 rows ranked are of abc1234"
    assert found[(left_out.ESTIMATED, "H100 batch 512")].startswith("its energy is jpwr's estimate")
    # fastest first, as ranked per node
    assert ("- llm: single run: GH200 batch 512 (run g/000000 of 2026-11-24); H100 batch 512 (run h/000000 "
            f"of 2026-11-24); A100 batch 512 (run a/000000 of 2026-11-24): {RULE}\n") in summary
    first = page.split('id="left-out"')[1].split("</div>")[0]
    assert "What a vendor may contest" in first and html.escape("commit def5678") in first
    assert "may contest: llm: another commit: H100 800M bf16 seq 2048 batch 512 (run h/000000 of " \
        "2026-11-24): commit def5678" in capsys.readouterr().out


def test_the_audits_refused_and_unaudited_rows_are_named_with_their_rule_and_a_rule_of_its_own_joins(
        tmp_path):
    run = fx.write_run(tmp_path, "a", [fx.a100(mfu=2.0), fx.a100(global_batch=256)])
    found = left_out.left_out_rows(fx.load([f"A100={run}"]))
    # the refused row is named once, as refused (not again as no measurement)
    assert [(item.kind, item.what) for item in found] == [
        ("refused row", "A100 800M bf16 seq 2048 batch 512"),
        ("unaudited row", "A100 800M bf16 seq 2048 batch 256")]
    assert found[0].why.startswith("mfu-at-most-1: MFU 2 stated, above 1")
    # a row written by hand has no raw evidence: ranked here (accepted), its own folder named so
    assert found[1].why == (
        "no raw evidence: its work folder holds no iterations.json (a run made before the suite kept its "
        "iterations, one without energy, or a row written by hand); ranked, each sentence naming it "
        "unaudited (--accept-unaudited)")
    assert left_out.grouped(found[1:]) == [
        f"llm: unaudited row: A100 800M bf16 seq 2048 batch 256 (run a/000000 of 2026-11-24): {found[1].why}"]
    # a rule of its own: its kind, which rows, why each
    rule = left_out.RowRule("slow row", lambda t: t["per_s_per_device"] < 20000,
                            lambda line: "below 20,000 tokens/s per device")
    [item] = left_out.left_out_rows(fx.load([f"A100={run}"]).iloc[1:], [rule])
    assert (item.kind, item.what, item.why, item.run) == (
        "slow row", "A100 800M bf16 seq 2048 batch 256", "below 20,000 tokens/s per device",
        "a/000000 of 2026-11-24")


def test_a_refused_row_is_an_alert_a_quiet_log_keeps(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CARAML_LOG_LEVEL", raising=False)
    args = [f"A100={fx.write_run(tmp_path, 'a', [fx.a100(), fx.a100(global_batch=256, mfu=2.0)])}",
            "--out", str(tmp_path / "out"), "--no-references", "-q"]
    fx.compare(args)
    [refused] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("REFUSED:")]
    assert refused.startswith("REFUSED: A100 llm 800M bf16 seq 2048 (a/000000 of 2026-11-24): mfu-at-most-1")
    record = json.loads((tmp_path / "out" / "decision.json").read_text())
    assert [item["what"] for item in record["left_out"] if item["kind"] == left_out.REFUSED_ROW] == \
        ["A100 800M bf16 seq 2048 batch 256"]
