"""The checks before any data step (tags read where JUBE reads them, one
model size, a batch that splits over the devices, the suite's environment)
and a data step that is safe when two runs prepare the same data at once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.login import preflight
from tests.jube_runs import ROOT, JubeRun

LLM = "llm_training/llm_benchmark_nvidia_amd.yaml"


def test_tags_are_read_from_tag_declarations_not_from_comments():
    tags = preflight.declared_tags(ROOT / LLM, ROOT / "platform.xml")
    assert {"117M", "800M", "smoke", "synthetic", "dryrun", "slurm", "CPU", "container"} <= tags
    # words of the scripts' comments are no tags
    assert not {"the", "a", "and", "16", "_", "Tags"} & tags


def test_a_batch_that_does_not_split_over_the_devices_is_refused():
    with pytest.raises(preflight.PreflightError,
                       match="global batch size 7 does not divide evenly over 2 devices"):
        preflight.check_batch_split("7", 2)
    with pytest.raises(preflight.PreflightError, match="use a multiple of 4"):
        preflight.check_batch_split("2", 4)
    preflight.check_batch_split("8", 4)


@pytest.mark.parametrize("batch", ["0", "-4"])
def test_a_batch_of_no_samples_is_named_as_such(batch):
    # it once read "does not divide evenly over 1 device; use a multiple of 1"
    with pytest.raises(preflight.PreflightError,
                       match=f"global batch size {batch} is no number of samples: give a positive "
                             "multiple of the 1 device$"):
        preflight.check_batch_split(batch, 1)


def test_a_missing_environment_says_to_run_setup(tmp_path):
    with pytest.raises(preflight.PreflightError, match="run bash aux/setup.sh"):
        preflight.check_python(str(tmp_path / ".venv" / "bin" / "python"))


@pytest.mark.jube
@pytest.mark.parametrize("tags, message", [
    (("CPU", "smoke", "the"), "unknown tag the"),
    (("CPU", "smoke", "117M", "800M"), "tags 117M and 800M exclude each other"),
])
def test_a_refused_llm_run_fails_before_its_data_step(tmp_path, tags, message):
    # a corpus that is not there: a data step that ran would fail on it instead
    run = JubeRun(LLM, tmp_path / "run",
                  env={**os.environ, "CARAML_LLM_CORPUS": str(tmp_path / "never_read.txt")})
    run.run(*tags)
    table = run.table()
    assert set(table["Status"]) == {"failed"}
    assert all(message in error for error in table["Error"]), table["Error"].tolist()
    assert not any("never_read" in error for error in table["Error"])


def _prepare(corpus: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llm_training.data.prepare", "--corpus", str(corpus),
                             "--out-dir", str(out), "--vocab-size", "300"],
                            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_runs_preparing_the_same_data_at_once_both_succeed(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of a small corpus for two preparations at once\n"
                              for i in range(3000)))
    out = tmp_path / "data"
    procs = [_prepare(corpus, out) for _ in range(3)]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [r[1] for r in results]
    lines = {r[0].strip().splitlines()[-1] for r in results}
    assert len(lines) == 1 and next(iter(lines)).startswith("CARAML data: ")
    # nothing half-written is left behind
    assert not [p.name for p in out.iterdir() if "tmp" in p.name]


def test_a_data_folder_that_cannot_be_made_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = subprocess.run([sys.executable, "-m", "llm_training.data.prepare", "--corpus", "local",
                           "--out-dir", str(blocker / "data")], cwd=ROOT, text=True, capture_output=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"CARAML ERROR: cannot make the data folder {blocker / 'data'}")


@pytest.mark.jube
def test_a_tiny_corpus_says_so_in_its_row(tmp_path):
    corpus = tmp_path / "three_words.txt"
    corpus.write_text("one two three\n")
    run = JubeRun(LLM, tmp_path / "run", env={**os.environ, "CARAML_LLM_CORPUS": str(corpus)})
    run.run("CPU", "smoke")
    row = run.table().iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Data"].startswith("three_words") and "tokens: repeated)" in row["Data"]
    # the data step's warning names the sequence of the run's model size (cpu-small: 256)
    [data] = run.work_dirs("prepare_data")
    warning = next(ln for ln in (data / "stdout").read_text().splitlines()
                   if "tokens: fewer than one" in ln)
    assert "fewer than one 256-token sequence" in warning, warning


def _tiny_corpus_warnings(tmp_path, capsys, *args: str) -> list[str]:
    """The warnings of a data preparation of a two-paragraph corpus."""
    from llm_training.data.prepare import main

    corpus = tmp_path / "tiny.txt"
    corpus.write_text("a few words\n\nand a few more\n")
    code = main(["--corpus", str(corpus), "--out-dir", str(tmp_path / "data"), "--vocab-size", "300",
                 *args])
    assert code == 0
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("CARAML warning:")]


def test_the_tiny_corpus_warning_names_the_runs_sequence_length(tmp_path, capsys):
    warning = next(ln for ln in _tiny_corpus_warnings(tmp_path, capsys, "--seq-length", "256")
                   if "-token sequence" in ln)
    assert "fewer than one 256-token sequence" in warning and "2048" not in warning


def test_the_tiny_corpus_warning_takes_the_model_sizes_sequence_length(tmp_path, capsys):
    warnings = _tiny_corpus_warnings(tmp_path, capsys, "--model-size", "cpu-small")
    assert any("fewer than one 256-token sequence" in w for w in warnings), warnings


def test_a_bpe_vocabulary_smaller_than_asked_says_its_real_size(tmp_path, capsys):
    from llm_training.data.prepare import main

    corpus = tmp_path / "tiny.txt"
    corpus.write_text("a few words\n\nand a few more\n")
    code = main(["--corpus", str(corpus), "--out-dir", str(tmp_path / "data"), "--vocab-size", "8192",
                 "--seq-length", "8"])
    assert code == 0
    out = capsys.readouterr().out
    [warning] = [ln for ln in out.splitlines() if "BPE vocabulary" in ln]
    made = int(re.search(r"has (\d+) tokens \(fewer than the 8192 asked", warning).group(1))
    assert made < 8192
    # the data's name carries the size it came out at
    assert f"_local-bpe{made}" in next(ln for ln in out.splitlines() if ln.startswith("CARAML data:"))
