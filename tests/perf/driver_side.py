"""A driver in small for tests/perf/test_as_run.py: ITERATIONS iterations
(the first a warm-up) of a step that burns STEP_S seconds of CPU time,
timed by the driver core's IterationTimer, and the summary line the
comparison reads. Started as `python -m tests.perf.driver_side ITERATIONS
STEP_S`, alone or through aux/perf/turns.py."""

from __future__ import annotations

import statistics
import sys
import time

from caraml.node.timing import IterationTimer


def burn(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def main(argv: list[str]) -> int:
    iterations, step_s = int(argv[0]), float(argv[1])
    timer = IterationTimer(warmup=1)
    cpu = 0.0
    for i in range(iterations):
        timer.start()
        before = time.process_time()
        burn(step_s)
        cpu += (time.process_time() - before) if i else 0.0
        timer.stop()
    d = timer.durations
    print(f"CARAML global: time_per_iteration_s={statistics.fmean(d)} "
          f"time_per_iteration_median_s={statistics.median(d)} cpu_s_per_iteration={cpu / len(d)}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
