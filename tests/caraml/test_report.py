import pytest

from caraml import report


def test_line_format_that_jube_patterns_read():
    assert report.line("global", {"tokens_per_s": 1234.56789, "tp": 2, "backend": "torch"}) == \
        "CARAML global: tokens_per_s=1234.57 tp=2 backend=torch"


def test_values_with_spaces_would_break_the_patterns():
    with pytest.raises(ValueError):
        report.line("global", {"model": "res net"})


def test_error_is_one_line_on_stderr_without_commas(capsys):
    report.error("global batch size 10\n does not divide by 4 devices, pick 8, 12 or 16")
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "CARAML ERROR: global batch size 10 does not divide by 4 devices; pick 8; 12 or 16\n"


class WriteRecorder:
    """A stream that keeps each write() apart, as an unbuffered stdout does."""

    def __init__(self):
        self.writes = []

    def write(self, text):
        self.writes.append(text)

    def flush(self):
        pass


def test_each_line_is_one_write_so_ranks_cannot_split_it(monkeypatch):
    out, err = WriteRecorder(), WriteRecorder()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    report.emit("rank 1", tokens_per_s=1.5)
    report.stop("signal SIGTERM")
    report.error("no corpus")
    assert out.writes == ["CARAML rank 1: tokens_per_s=1.5\n", "CARAML stop: signal SIGTERM\n"]
    assert err.writes == ["CARAML ERROR: no corpus\n"]
