"""The rules of the audit, each by the name every message gives it
(docs/run_rules.md says each one's why), and a finding: one rule a row
breaks, with the evidence."""

from __future__ import annotations

from dataclasses import dataclass

# what the row claims, against what its raw evidence shows
RAW_EVIDENCE = "raw-evidence"  # a row that claims a measurement has the raw evidence to show it
RECOMPUTED = "figure-recomputed"  # a stated figure within TOLERANCE of the one made again
VERDICT = "verdict-recomputed"  # the stated verdict is today's verdict on the figures made again
EVIDENCE = "evidence-consistent"  # the raw evidence agrees with itself and with the row's configuration
# plausibility bounds
MFU_BOUND = "mfu-at-most-1"
POWER_BOUND = "power-within-limit"
WORK_PER_WH_BOUND = "work-per-wh-within-peak"
TIMES_IN_ORDER = "times-in-order"
WINDOW_INSIDE_JOB = "energy-window-inside-job"
# which rows stand for one measurement of one system
ONE_NAME_PER_RUN = "one-name-per-run"
ONE_MACHINE_PER_POOL = "one-machine-per-pool"
ONE_BUILD_PER_POOL = "one-build-per-pool"
# a bundle's files are the ones its manifest names
MANIFEST = "bundle-manifest"

RULES = (RAW_EVIDENCE, RECOMPUTED, VERDICT, EVIDENCE, MFU_BOUND, POWER_BOUND, WORK_PER_WH_BOUND,
         TIMES_IN_ORDER, WINDOW_INSIDE_JOB, ONE_NAME_PER_RUN, ONE_MACHINE_PER_POOL, ONE_BUILD_PER_POOL,
         MANIFEST)
# a stated figure may differ from its recomputation by this share: rounding, not more
TOLERANCE = 0.005


@dataclass(frozen=True)
class Finding:
    rule: str
    evidence: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.evidence}"
