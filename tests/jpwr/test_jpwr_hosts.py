"""Each node's part of a job's energy (`jpwr-hosts:`), for the row's
per-node column: every node's channels counted once, whichever ranks
measured them."""

import pytest

from jpwr.aggregate import combine, host_lines, summarize
from tests.jpwr.test_jpwr_aggregate import write_rank


def test_each_node_is_its_own_counted_channels_once(tmp_path):
    n1 = [("pynvml", "gpu0", 1.0, 300.0), ("pynvml", "gpu1", 2.0, 300.0)]
    n2 = [("pynvml", "gpu0", 3.0, 300.0), ("pynvml", "gpu1", 4.0, 300.0)]
    # two ranks per node, each measuring its node's GPUs; the second rank's
    # figures differ, so counting it would show
    write_rank(tmp_path / "a", 0, "n1", n1)
    write_rank(tmp_path / "b", 1, "n1", [(m, d, wh * 10, w) for m, d, wh, w in n1])
    write_rank(tmp_path / "c", 2, "n2", n2)
    write_rank(tmp_path / "d", 3, "n2", [(m, d, wh * 10, w) for m, d, wh, w in n2])
    # RAPL beside NVML on n2 is measured but not counted into the total
    write_rank(tmp_path / "e", 4, "n2", [("rapl", "package-0", 50.0, 200.0)])
    table = combine([tmp_path])
    [line] = host_lines(table)
    assert line == "jpwr-hosts: n1=3.0 n2=7.0"
    parts = dict(kv.split("=") for kv in line.split()[1:])
    assert sum(map(float, parts.values())) == pytest.approx(summarize(table)["total_wh"])
