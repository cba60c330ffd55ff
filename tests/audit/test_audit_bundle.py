"""caraml-bundle and the reading of a bundle: what the rows need and
nothing else, a manifest of every file's sha256 and size, and a bundle
whose files are not its manifest's refused, naming the file; no path out
of the folder it is read into, no link."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from caraml.audit import bundle, check
from tests.compare import rowfixtures as fx


@pytest.fixture
def run(tmp_path) -> Path:
    """A run of two rows written by hand, the first with an energy folder
    and iterations.json, and a file no row needs beside them."""
    outpath = fx.write_run(tmp_path, "a100", [fx.a100(), fx.a100(global_batch=256)], power={0: fx.samples()})
    work = outpath / "000000" / "000000_execute" / "work"
    (work / "energy" / "iterations.json").write_text(json.dumps({"format": "caraml-iterations-1"}))
    (work / "job.out").write_text("CARAML job: start=2026-11-24T05:00:00+00:00 host=node1\n")
    (work / "job.sh").write_text("#!/bin/bash\n")
    return outpath


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _rewrite(source: Path, target: Path, members: dict[str, bytes],
             extra: list[tarfile.TarInfo] = ()) -> Path:
    with tarfile.open(target, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return target


def test_the_bundle_holds_what_the_rows_need_with_a_manifest_of_each_file(run, tmp_path):
    out = tmp_path / "a100.tar.gz"
    assert bundle.main([str(run), "--out", str(out)]) == 0
    members = _members(out)
    manifest = json.loads(members.pop("manifest.json"))
    assert manifest["format"] == "caraml-bundle-1" and manifest["suite"]["commit"]
    names = sorted(members)
    assert names == sorted([
        "01_a100_000000/000000_execute/work/row.json", "01_a100_000000/000001_execute/work/row.json",
        "01_a100_000000/000000_execute/work/job.out",
        *(f"01_a100_000000/000000_execute/work/energy/{name}" for name in
          ("iterations.json", "meta_rank0.json", "power_rank0.csv", "windows_rank0.csv"))])
    # job.sh, the JUBE record and the second row's missing evidence: nothing a row needs
    assert {e["path"]: (e["sha256"], e["size"]) for e in manifest["files"]} == \
        {name: (hashlib.sha256(data).hexdigest(), len(data)) for name, data in members.items()}
    with bundle.opened(out) as runs:
        [read] = runs
        assert read.source == str((run / "000000").resolve())
        assert [p.relative_to(read.folder).as_posix() for p in read.rows] == [
            "000000_execute/work/row.json", "000001_execute/work/row.json"]
        assert (read.folder / "000000_execute/work/energy/power_rank0.csv").read_bytes() == \
            (run / "000000/000000_execute/work/energy/power_rank0.csv").read_bytes()
        folder = read.folder
    assert not folder.exists()  # read into a temporary folder, gone after


@pytest.fixture
def made(run, tmp_path) -> Path:
    out = tmp_path / "made.tar.gz"
    bundle.write([run / "000000"], out)
    return out


def test_a_bundle_with_one_changed_file_is_refused_naming_it(made, tmp_path, capsys):
    members = _members(made)
    name = "01_a100_000000/000000_execute/work/energy/power_rank0.csv"
    members[name] = members[name].replace(b",300.", b",390.")
    changed = _rewrite(made, tmp_path / "changed.tar.gz", members)
    with pytest.raises(bundle.Refused, match=f"^{name}: its sha256 or size"):
        with bundle.opened(changed):
            pass
    assert check.main([str(changed)]) == check.VIOLATION
    assert f"changed.tar.gz: bundle-manifest: {name}: its sha256 or size" in capsys.readouterr().out


@pytest.mark.parametrize("name, why", [
    ("../outside.txt", "not a plain relative path"),
    ("/etc/passwd", "not a plain relative path"),
    ("01_a100_000000/extra.txt", "a file the manifest does not name"),
])
def test_a_file_out_of_its_place_or_the_manifest_is_refused(made, tmp_path, name, why):
    members = {**_members(made), name: b"x"}
    with pytest.raises(bundle.Refused, match=why):
        with bundle.opened(_rewrite(made, tmp_path / "bad.tar.gz", members)):
            pass
    assert not Path("/outside.txt").exists() and not (tmp_path.parent / "outside.txt").exists()


def test_a_link_is_refused_and_a_missing_file_named(made, tmp_path):
    link = tarfile.TarInfo("01_a100_000000/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    with pytest.raises(bundle.Refused, match="a link or device"):
        with bundle.opened(_rewrite(made, tmp_path / "link.tar.gz", _members(made), [link])):
            pass
    members = _members(made)
    del members["01_a100_000000/000000_execute/work/job.out"]
    with pytest.raises(bundle.Refused, match="job.out: named by the manifest, missing from the bundle"):
        with bundle.opened(_rewrite(made, tmp_path / "lost.tar.gz", members)):
            pass


def test_a_file_that_is_no_bundle_is_bad_input(tmp_path, capsys):
    path = tmp_path / "notes.tar.gz"
    path.write_text("not a tar file")
    assert check.main([str(path)]) == check.BAD_INPUT
    assert "notes.tar.gz: not a bundle" in capsys.readouterr().err
    assert check.main([str(tmp_path / "missing")]) == check.BAD_INPUT
