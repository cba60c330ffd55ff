"""The contention figure of a CPU LLM smoke run beside a competing load made
of short-lived processes, against a measurement from the other side. Run
from the repository root:

    .venv/bin/python aux/perf/contention_check.py [--competitors 1] [--train-iters 12]

It starts the LLM driver (cpu-small, synthetic data, no energy) as a job of
its own (CARAML_JOB) and, beside it, competitors that each keep starting
shell loops of about 20 ms until the driver ends. It prints the driver's
own figure (`foreign_cpu_pct` of its `CARAML host at end` line) and the
independent one: the host's busy CPU time (/proc/stat) over the driver's
whole life less the driver's CPU time as the kernel accounts it to this
process (resource usage of its reaped child), over the host's total; and
the competitors' share alone, from their own resource usage. The driver's
window is its training loop, a little shorter than its life, so the two
figures differ by what start-up and the rest of the host did outside the
window. On a shared host the figures include everyone else's work: that is
what the flag is for. This is a measurement, not a test: it prints numbers
and judges nothing; the figures and the command are recorded in
docs/results.md."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from caraml.node.provenance import JOB_KEY, host_cpu_ticks
from caraml.report import last_kv

TICK = os.sysconf("SC_CLK_TCK")
# keeps starting short-lived shell loops until its stdin closes
LOOPS = ("while :; do sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done'; "
         "read -t 0 _ <&0 && exit 0; done")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--competitors", type=int, default=1)
    ap.add_argument("--train-iters", type=int, default=12)
    a = ap.parse_args()
    driver = [sys.executable, "-m", "llm_training.pretrain_gpt", "--model-size", "cpu-small",
              "--synthetic", "--train-iters", str(a.train_iters), "--warmup-iters", "2",
              "--energy-methods", "none", "--device", "cpu", "--num-workers", "0"]
    env = {**os.environ, JOB_KEY: f"contention-check-{os.getpid()}"}
    before = host_cpu_ticks()
    job = subprocess.Popen(driver, env=env, stdout=subprocess.PIPE, text=True)
    competitors = [subprocess.Popen(["bash", "-c", LOOPS], stdin=subprocess.PIPE, text=True,
                                    env={**os.environ, JOB_KEY: "someone-else"})
                   for _ in range(a.competitors)]
    out, _ = job.communicate()
    after = host_cpu_ticks()
    job_rusage = resource.getrusage(resource.RUSAGE_CHILDREN)
    for c in competitors:
        c.stdin.write("stop\n")
        c.stdin.close()
        c.wait(timeout=60)
    everyone = resource.getrusage(resource.RUSAGE_CHILDREN)
    job_s = job_rusage.ru_utime + job_rusage.ru_stime
    competitor_s = everyone.ru_utime + everyone.ru_stime - job_s
    busy, total = ((b - s) / TICK for s, b in zip(before, after))
    flag = last_kv(out, "host at end").get("foreign_cpu_pct")
    print(f"driver exit status {job.returncode}; host CPU time over its life {total:.1f} s, "
          f"busy {busy:.1f} s; the driver's CPU time {job_s:.1f} s")
    print(f"foreign_cpu_pct (the driver's flag): {flag}")
    print(f"independent (host busy less the driver's rusage): {100 * (busy - job_s) / total:.1f}")
    print(f"the competitors alone (their rusage, a little past the driver's end): "
          f"{100 * competitor_s / total:.1f}")
    return job.returncode


if __name__ == "__main__":
    sys.exit(main())
