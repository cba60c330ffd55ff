"""A submission bundle: what a vendor hands in, and what a centre reads
without the vendor's run folders.

    caraml-bundle RUN... --out FILE.tar.gz [--all-runs]

packs, of each run (a JUBE run folder, the latest run of an outpath, or of
each outpath in a folder), what its rows need and nothing else: each
row.json, and for each row its job's log (job.out), the system's
platform.xml block (system.json) and the run's energy folder (jpwr's files
of every rank, provenance.json, iterations.json), each file under its
place in the run; a row the combine step has not decided (a job that
failed before it) as the row model decides it when bundled. The manifest
(manifest.json) names every file with its sha256 and size, the suite's
version and commit (jpwr/version.py) and where each run came from.

A bundle is read (`opened`) into a temporary folder: only plain files
under relative paths without `..` (no link, no device, no absolute path,
no name twice), each checked against the manifest as it is written; a
file that differs from its manifest, one it does not name or one it names
that is missing refuses the whole bundle, naming the file."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from caraml import jube_run
from caraml.audit.evidence import JOB_OUT, energy_folder, work_package
from caraml.audit.findings import MANIFEST
from caraml.job.node_energy import FILE_NAME as NODE_ENERGY
from caraml.login.systems import BLOCK_FILE
from caraml.row import row_json
from caraml.row.run import rows_of_run
from jpwr.version import VersionAction, installed

MANIFEST_FILE = "manifest.json"
FORMAT = "caraml-bundle-1"
SUFFIXES = (".tar.gz", ".tgz")
_CHUNK = 1 << 20


class BundleError(ValueError):
    """A file that is no bundle (bad input)."""


class Refused(ValueError):
    """A bundle whose files are not the ones its manifest names; the message names the file."""


@dataclass(frozen=True)
class BundledRun:
    """One run of a bundle, unpacked: its folder and its rows' files."""

    name: str
    folder: Path
    rows: tuple[Path, ...]
    source: str


def is_bundle(path: Path) -> bool:
    return path.name.endswith(SUFFIXES) and path.is_file()


def _run_files(run: Path) -> tuple[list[Path], dict[str, str]]:
    """The files of a run its rows need, and the rows decided now (no
    combine step wrote them) as row.json text by their place in the run."""
    files: list[Path] = []
    decided = set()
    for row_file in sorted(run.glob(f"*/work/{row_json.FILE_NAME}")):
        row = row_json.read(row_file)
        decided.add(Path(row.work_package).parent.name)
        files.append(row_file)
        work = work_package(row_file, row)
        if work is None:
            continue
        files += [work / name for name in (JOB_OUT, BLOCK_FILE, NODE_ENERGY) if (work / name).is_file()]
        energy = energy_folder(work)
        if energy is not None:
            files += sorted(p for p in energy.iterdir() if p.is_file() and not p.is_symlink())
    made = {}
    for row in rows_of_run(run):
        folder = Path(row.work_package).parent.name
        if row.work_package and folder not in decided:
            made[f"{folder}/work/{row_json.FILE_NAME}"] = row_json.to_json(row)
    return files, made


def _add(tar: tarfile.TarFile, name: str, source: io.BufferedIOBase) -> dict:
    """Adds one file's bytes under name (read once: what is hashed is what
    is packed); its manifest entry."""
    digest, size = hashlib.sha256(), 0
    with tempfile.SpooledTemporaryFile(max_size=64 * _CHUNK) as spool:
        for block in iter(lambda: source.read(_CHUNK), b""):
            digest.update(block)
            spool.write(block)
            size += len(block)
        spool.seek(0)
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, 0o644, int(datetime.datetime.now().timestamp())
        tar.addfile(info, spool)
    return {"path": name, "sha256": digest.hexdigest(), "size": size}


def write(runs: list[Path], out: Path) -> dict:
    """The bundle of these runs into out; its manifest."""
    manifest: dict = {"format": FORMAT, "suite": installed(),
                      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "runs": [], "files": []}
    with tarfile.open(out, "w:gz") as tar:
        for index, run in enumerate(runs, 1):
            name = f"{index:02d}_{run.parent.name}_{run.name}"
            files, made = _run_files(run)
            rows = [str(p.relative_to(run)) for p in files if p.name == row_json.FILE_NAME] + list(made)
            manifest["runs"].append({"name": name, "source": str(run.resolve()), "rows": sorted(rows)})
            for path in files:
                with open(path, "rb") as f:
                    manifest["files"].append(_add(tar, f"{name}/{path.relative_to(run)}", f))
            for place, text in made.items():
                manifest["files"].append(_add(tar, f"{name}/{place}", io.BytesIO(text.encode())))
        _add(tar, MANIFEST_FILE, io.BytesIO(json.dumps(manifest, indent=1).encode()))
    return manifest


def _safe(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(p in ("..", "") for p in path.parts) or "\\" in name:
        raise Refused(f"{name}: not a plain relative path; a bundle holds none such ({MANIFEST})")
    return path


def _manifest(tar: tarfile.TarFile, source: Path) -> dict:
    try:
        member = tar.getmember(MANIFEST_FILE)
        data = json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]
    except (KeyError, AttributeError, ValueError, UnicodeDecodeError):
        raise BundleError(f"{source}: holds no readable {MANIFEST_FILE}; make a bundle with "
                          "caraml-bundle") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), list):
        raise BundleError(f"{source}: its {MANIFEST_FILE} is not a {FORMAT} manifest")
    return data


def _unpacked(tar: tarfile.TarFile, manifest: dict, into: Path) -> None:
    """Every file the manifest names, written under into and checked on
    the way; Refused naming the first file that is not what it says."""
    expected = {entry["path"]: entry for entry in manifest["files"]}
    seen = set()
    for member in tar.getmembers():
        if member.name == MANIFEST_FILE:
            continue
        path = _safe(member.name)
        if member.isdir():
            continue
        if not member.isfile():
            raise Refused(f"{member.name}: a link or device, not a file; a bundle holds files only")
        if member.name in seen:
            raise Refused(f"{member.name}: in the bundle twice")
        seen.add(member.name)
        entry = expected.get(member.name)
        if entry is None:
            raise Refused(f"{member.name}: a file the manifest does not name")
        target = into.joinpath(*path.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        with tar.extractfile(member) as source, open(target, "wb") as sink:  # type: ignore[union-attr]
            for block in iter(lambda: source.read(_CHUNK), b""):
                digest.update(block)
                sink.write(block)
                size += len(block)
        if size != entry.get("size") or digest.hexdigest() != entry.get("sha256"):
            raise Refused(f"{member.name}: its sha256 or size ({size} bytes) is not its manifest's "
                          f"({entry.get('size')} bytes): the file was changed after it was bundled")
    lost = sorted(set(expected) - seen)
    if lost:
        raise Refused(f"{lost[0]}: named by the manifest, missing from the bundle")


@contextmanager
def opened(path: Path) -> Iterator[list[BundledRun]]:
    """The runs of a bundle, unpacked into a temporary folder for as long
    as the block runs; BundleError for a file that is no bundle, Refused
    (naming the file) for one whose files are not its manifest's."""
    try:
        tar = tarfile.open(path, "r:gz")  # noqa: SIM115 - closed by the with below, once it opened
    except (OSError, tarfile.TarError) as err:
        raise BundleError(f"{path}: not a bundle ({err}); give a FILE.tar.gz made by caraml-bundle") from None
    with tar, tempfile.TemporaryDirectory(prefix="caraml-bundle-") as folder:
        manifest = _manifest(tar, path)
        _unpacked(tar, manifest, Path(folder))
        runs = []
        for run in manifest.get("runs") or []:
            name = str(_safe(run["name"]))
            rows = tuple(Path(folder, name, *_safe(row).parts) for row in run.get("rows") or [])
            runs.append(BundledRun(name, Path(folder, name), rows, str(run.get("source") or "")))
        yield runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="caraml-bundle", description="Pack what the rows of JUBE runs need, with a manifest of every "
                                          "file's sha256 and size, into one file to hand in.")
    parser.add_argument("runs", nargs="+", metavar="RUN", type=Path,
                        help="a JUBE run folder, an outpath (its latest run) or a folder of outpaths")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE.tar.gz", help="the bundle to write")
    parser.add_argument("--all-runs", action="store_true",
                        help="every run of an outpath, not only its latest")
    parser.add_argument("--version", action=VersionAction)
    args = parser.parse_args(argv)
    if not args.out.name.endswith(SUFFIXES):
        print(f"caraml-bundle: error: --out {args.out}: name the bundle FILE.tar.gz", file=sys.stderr)
        return 2
    runs = []
    for given in args.runs:
        found = jube_run.runs_under(given, args.all_runs) if given.is_dir() else []
        if not found:
            print(f"caraml-bundle: error: {given}: no JUBE run in it; give a run folder or an outpath",
                  file=sys.stderr)
            return 2
        runs += found
    try:
        manifest = write(runs, args.out)
    except (OSError, ValueError) as err:
        args.out.unlink(missing_ok=True)
        print(f"caraml-bundle: error: {err}", file=sys.stderr)
        return 2
    rows = sum(len(run["rows"]) for run in manifest["runs"])
    print(f"wrote {args.out}: {len(runs)} runs, {rows} rows, {len(manifest['files'])} files "
          f"(suite {manifest['suite']['version']}, commit {manifest['suite']['commit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
