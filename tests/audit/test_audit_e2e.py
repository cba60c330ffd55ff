"""The audit of a real run: the LLM benchmark's CPU smoke run through the
real JUBE (the session's), copied, then left as it is, bundled, tampered
(a figure raised by 30 %), forged (its verdict set to a measurement),
made implausible (MFU above 1), its energy file raised, and given as a
second machine: caraml-check and caraml-compare refuse each changed row
naming its rule, and check the untouched run and its bundle clean."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from caraml.audit import bundle, check
from caraml.compare import cli, comparison
from tests.compare import rowfixtures as fx

pytestmark = pytest.mark.jube


@pytest.fixture
def run(llm_cpu_smoke, tmp_path) -> Path:
    """A copy of the session's run (its outpath), which the test may change."""
    llm_cpu_smoke.table()
    copy = tmp_path / "llm"
    shutil.copytree(llm_cpu_smoke.outpath, copy, symlinks=True)
    return copy


def _row_file(run: Path) -> Path:
    [path] = run.glob("*/*_combine_energy/work/row.json")
    return path


def _edit(path: Path, **changes) -> dict:
    data = json.loads(path.read_text())
    before = {name: data[name] for name in changes}
    data.update(changes)
    path.write_text(json.dumps(data))
    return before


def _checked(capsys, *paths: Path) -> tuple[int, str]:
    status = check.main([str(p) for p in paths])
    return status, capsys.readouterr().out


def test_the_untouched_run_and_a_bundle_of_it_check_clean(run, tmp_path, capsys):
    status, printed = _checked(capsys, run)
    assert status == check.OK, printed
    assert "checked 1 rows: 1 audited (0 measurements), 0 refused, 0 unaudited; 0 violations" in printed
    out = tmp_path / "cpu.tar.gz"
    assert bundle.main([str(run), "--out", str(out)]) == 0
    status, printed = _checked(capsys, out)
    assert status == check.OK and "1 audited" in printed, printed
    # the bundle holds the raw evidence, and nothing of the run that no row needs
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any(n.endswith("/energy/iterations.json") for n in names)
    assert any(n.endswith("/energy/provenance.json") for n in names)
    assert any(n.endswith("/work/system.json") for n in names)
    assert not any(n.endswith(("job.sh", "workpackages.xml", "job.facts")) or "prepare_data" in n
                   for n in names)


def test_a_figure_raised_by_30_percent_is_refused_naming_field_and_both_values(run, tmp_path, capsys):
    path = _row_file(run)
    before = _edit(path, per_s=json.loads(path.read_text())["per_s"] * 1.3)
    status, printed = _checked(capsys, run)
    assert status == check.VIOLATION
    assert f"figure-recomputed: per_s: stated {before['per_s'] * 1.3:.6g}, recomputed " in printed
    assert "(+30.0 %)" in printed
    # caraml-compare refuses it too, beside systems it may rank
    args = [f"CPU={run}", f"A100={fx.write_run(tmp_path, 'a100', [fx.a100()])}",
            f"GH200={fx.write_run(tmp_path, 'gh200', [fx.gh200()])}", "--accept-unaudited"]
    assert cli.main([*args, "--out", str(tmp_path / "out"), "--no-references"]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert "REFUSED: CPU llm cpu-small fp32 seq 256 (" in printed
    assert "figure-recomputed: per_s: stated" in printed
    table = pd.read_csv(tmp_path / "out" / "comparison.csv", keep_default_na=False, na_values=[""])
    cpu = table[table["system"] == "CPU"].iloc[0]
    assert cpu["audit"] == "refused" and not cpu["measurement"] and not cpu["best"]
    assert cpu["not_a_measurement"].startswith("refused by the audit: figure-recomputed: per_s")


def test_a_short_row_forged_into_a_measurement_is_refused_and_never_ranked(run, tmp_path, capsys):
    _edit(_row_file(run), measurement=True, not_a_measurement="")
    status, printed = _checked(capsys, run)
    assert status == check.VIOLATION
    assert "verdict-recomputed: stated a measurement; its figures are none (" in printed
    assert "a measurement needs 20 and 60 s)" in printed
    status = cli.main([f"CPU={run}", "--out", str(tmp_path / "out"), "--no-references"])
    printed = capsys.readouterr().out
    assert status == comparison.SYSTEM_FAILED
    assert "REFUSED: CPU llm" in printed and "verdict-recomputed" in printed
    assert "decision llm:" not in printed


def test_an_mfu_above_one_is_refused_by_its_bound(run, capsys):
    _edit(_row_file(run), mfu=1.5)
    status, printed = _checked(capsys, run)
    assert status == check.VIOLATION
    assert ": mfu-at-most-1: MFU 1.5 stated, above 1" in printed
    assert ": figure-recomputed: mfu: stated 1.5, recomputed " in printed


def test_an_energy_file_raised_with_its_row_is_refused_by_the_samples(run, capsys):
    [energy] = run.glob("*/*_execute/work/energy/energy_rank0.csv")
    table = pd.read_csv(energy, dtype={"device": str})
    table["energy_wh"] *= 0.7
    table.to_csv(energy, index=False)
    status, printed = _checked(capsys, run)
    assert status == check.VIOLATION
    assert ": evidence-consistent: jpwr's files: energy_rank0.csv estimate " in printed
    assert "its samples and counter give" in printed


def test_a_bundle_with_one_changed_file_is_refused_naming_it(run, tmp_path, capsys):
    out = tmp_path / "cpu.tar.gz"
    bundle.write(sorted(run.glob("0*")), out)
    with tarfile.open(out) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    [name] = [n for n in members if n.endswith("/energy/iterations.json")]
    members[name] = members[name].replace(b'"timed_s": [', b'"timed_s": [0.001, ', 1)
    changed = tmp_path / "changed.tar.gz"
    with tarfile.open(changed, "w:gz") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    status, printed = _checked(capsys, changed)
    assert status == check.VIOLATION and f"bundle-manifest: {name}: its sha256 or size" in printed
    assert cli.main([f"CPU={changed}", "--out", str(tmp_path / "out")]) == comparison.BAD_INPUT
    assert f"changed.tar.gz: refused: {name}: its sha256 or size" in capsys.readouterr().err


def _elsewhere(run: Path, tmp_path: Path, cpu_model: str | None) -> Path:
    """The same run as if another host had made it (another host name and machine id; another CPU
    model where one is given), with its own iterations (a nanosecond apart on one, within the
    rounding of every figure)."""
    other = tmp_path / "other"
    shutil.copytree(run, other, symlinks=True)
    [energy] = other.glob("*/*_execute/work/energy")
    provenance = json.loads((energy / "provenance.json").read_text())
    provenance["hostnames"] = ["cn7"]
    host = {**provenance["machine"][0], "host": "cn7", "machine_id": "0f" * 16}
    provenance["machine"] = [{**host, "cpu_model": cpu_model} if cpu_model else host]
    (energy / "provenance.json").write_text(json.dumps(provenance))
    iterations = json.loads((energy / "iterations.json").read_text())
    iterations["timed_s"][0] += 1e-9
    iterations["timed_s_by_rank"][0][0] += 1e-9
    (energy / "iterations.json").write_text(json.dumps(iterations))
    return other


def test_two_machines_under_one_name_are_named_and_not_pooled(run, tmp_path, capsys):
    other = _elsewhere(run, tmp_path, cpu_model="Another CPU 9000")
    status, printed = _checked(capsys, run, other)
    assert status == check.OK, printed
    # the machines are listed in order of their names, and this host's CPU may sort before or after
    named = r"note: CPU: its rows come from 2 machines \([^)]*\b1 x Another CPU 9000 x"
    assert re.search(named, printed), printed
    assert cli.main([f"CPU={run}", f"CPU={other}", "--out", str(tmp_path / "out"), "--no-references"]) \
        == comparison.SYSTEM_FAILED  # smoke rows: no measurement either way
    assert "not pooled: CPU: its rows come from 2 machines" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "out" / "comparison.csv", keep_default_na=False, na_values=[""])
    assert table["machine"].nunique() == 2 and (table["audit"] == "audited").all()
    digests = {hashlib.sha256((p / "iterations.json").read_bytes()).hexdigest()
               for p in (*run.glob("*/*_execute/work/energy"), *other.glob("*/*_execute/work/energy"))}
    assert len(digests) == 2


def test_another_node_of_the_same_hardware_pools_and_is_named(run, tmp_path, capsys):
    # Slurm put the repeat on another node of the partition: one machine, two host sets
    other = _elsewhere(run, tmp_path, cpu_model=None)
    status, printed = _checked(capsys, run, other)
    assert status == check.OK, printed
    assert "machines" not in printed
    assert "note: CPU: its rows ran on 2 host sets of one machine (1 x " in printed
    assert "hosts cn7; devices cn7:machine-id:0f0f0f0f0f0f" in printed
    assert cli.main([f"CPU={run}", f"CPU={other}", "--out", str(tmp_path / "out"), "--no-references"]) \
        == comparison.SYSTEM_FAILED
    assert "not pooled" not in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "out" / "comparison.csv", keep_default_na=False, na_values=[""])
    assert table["machine"].nunique() == 1 and table["hosts"].nunique() == 2
