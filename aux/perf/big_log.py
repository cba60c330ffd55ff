"""What a huge job log costs the suite's readers: a job.out of GB of
progress lines (a driver at a chatty log level, a run of days), with the
job script's start line, the driver's summary and the end line, written
into a temporary folder, then read as the row step reads it
(caraml/job/log.py read_log: the last attempt, whole up to its limit, else
its edges and the lines the readers look for) and as the job script's exit
handler names its cause (caraml/job/failure.py). Prints the file's size, each
reader's wall and CPU seconds, and the process's peak resident memory.

    python aux/perf/big_log.py [--gb 1.5] [--dir DIR]"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml.job import failure
from caraml.job.log import read_log

PROGRESS = b"iteration 41/100: loss 7.0312 time 10.02 s tokens/s 104857.6 memory 61.2 GiB\n"
START = b"CARAML job: start=2026-11-24T05:00:00+00:00 host=cn1 job_id=7 requeued=0\n"
END = (b"CARAML stop: iteration count 100 reached\n"
       b"CARAML global: tokens_per_s=104857.6 iterations=90 iterations_total=100\n"
       b"CARAML job: end=2026-11-24T05:10:00+00:00 status=0\n")


def write(path: Path, gb: float) -> int:
    chunk = PROGRESS * (2**20 // len(PROGRESS))
    with open(path, "wb") as log:
        log.write(START)
        for _ in range(int(gb * 2**30 / len(chunk))):
            log.write(chunk)
        log.write(END)
    return path.stat().st_size


def timed(what: str, call) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    print(f"{what}: {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.5, help="the log's size in GiB (default 1.5)")
    parser.add_argument("--dir", type=Path, help="where to write it (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        log = Path(folder) / "job.out"
        size = write(log, args.gb)
        print(f"job.out: {size / 2**30:.2f} GiB")
        timed("the row step's read (read_log)", lambda: read_log(log))
        timed("the exit handler's cause (failure.summary)", lambda: failure.summary(0, [log]))
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
