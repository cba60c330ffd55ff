"""The plan of aux/gpu_check.sh: which call runs which steps under which
caps, from the device time a lent GPU node gives (all of it, the machine's
start included) and its limit on one call. Standard library only: it runs
on the node's own python3 before anything is set up.

    python3 aux/gpu_plan.py [--device-left-s 900] [--call-limit-s 600] [--start-s 180]
                            [--steps LIST] [--budget-s N] [--tsv FILE]

It prints the plan (each call, each step's cap beside what it needs, what
was cut to fit and what that costs) and, with --tsv, writes it for
gpu_check.sh: one row a step, `CALL NAME CAP FUNCTION ARGS...`, and one
`CALL call LENGTH KILL_AFTER MIN_STEP` a call, tab-separated. A budget that cannot
hold the steps is one line on stderr and exit status 2.

The calls follow each other on one machine: the second is sent while the
device keeps the first one's machine warm (its set-up is kept, and a fresh
machine's start would not fit the time left). --budget-s N plans one call
of N s instead (no start, no transfers), for a few --steps run by hand.

Each step's need is what it took on the H200 of 2026-11-27
(docs/results.md, "The GPU check on an H200") or, where it has not run
whole on a GPU, an estimate, and the plan says which."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

# a call's length at most (8 minutes), and the room kept under the device's
# limit on one call for what runs outside the steps (this plan, the archive)
CALL_MAX_S = 480
CALL_MARGIN_S = 60
# each call: the working tree sent, the results fetched, the next call asked for
TRANSFER_S = 15
# a step past its cap gets TERM, then KILL this much later (timeout -k)
KILL_AFTER_S = 10
# gpu_check.sh starts no step whose cap the call's end cuts below this
MIN_STEP_S = 10

DEVICE_LEFT_S = 900
CALL_LIMIT_S = 600
START_S = 180
CALLS = 2

H200 = "H200, 2026-11-27"


@dataclass(frozen=True)
class Size:
    need_s: int
    args: tuple[str, ...] = ()
    form: str = ""


@dataclass(frozen=True)
class Step:
    """A step of gpu_check.sh: the shell function that runs it, its sizes
    (largest first: a cut takes the next), `floor_s` where a cap below its
    need still keeps something (the GPU tests' log keeps each test it
    reached; 0: whole or worthless, as a peer whose record is written at its
    end), `elastic` for the main command, which takes what is left."""
    name: str
    function: str
    what: str
    basis: str
    sizes: tuple[Size, ...]
    floor_s: int = 0
    elastic: bool = False
    lost_when_cut: str = ""


def _peer(name: str, script: str, what: str, common: tuple[str, ...], needs: tuple[int, int, int],
          basis: str, as_run_iterations: tuple[int, int] = (20, 10)) -> Step:
    """A peer comparison in three sizes: 4 rounds of the step alone and 2
    as-run rounds (every round starts the driver and the plain loop
    afresh), then 2 and 1, then the step alone."""
    full, short = as_run_iterations
    forms = (
        (("--rounds", "4", "--warmup", "2", "--as-run-rounds", "2", "--as-run-iterations", str(full)),
         f"4 rounds alone, 2 as-run rounds of {full} iterations"),
        (("--rounds", "2", "--warmup", "1", "--as-run-rounds", "1", "--as-run-iterations", str(short)),
         f"2 rounds alone, 1 as-run round of {short} iterations"),
        (("--rounds", "2", "--warmup", "1", "--as-run-rounds", "0"),
         "2 rounds of the step alone, no as-run comparison"),
    )
    return Step(name, "peer", what, basis,
                tuple(Size(need, (f"aux/perf/{script}", *common, *tail), form)
                      for need, (tail, form) in zip(needs, forms)))


# the GPU tests in two parts, every test in one of them: the LLM driver's
# (800M on one GPU, the two-GPU layouts, the memory plan) and the rest
GPU_TESTS_LLM = "backend or layouts or micro_batch"

NODE = Step("node", "node", "nvidia-smi, versions, the node's package list",
            f"measured 7 s ({H200})", (Size(15),))
SETUP = Step("setup", "setup", "the offline set-up on the node's own torch",
             f"measured 51 s from a wheelhouse ({H200})", (Size(75),))
SETUP_AGAIN = Step("setup", "setup", "the set-up again: its stamp, kept on the machine the first call left",
                   "estimate (a stamp check and torch's import)", (Size(15),))

STEPS: tuple[Step, ...] = (
    Step("gpu_tests_llm", "gpu_tests", "the GPU tests of the LLM driver (-k " + repr(GPU_TESTS_LLM) + ")",
         f"measured: run within the 240 s cap, 5 passed and 4 skipped with one GPU ({H200})",
         (Size(240, ("-k", GPU_TESTS_LLM)),), floor_s=90,
         lost_when_cut="the tests it does not reach do not run (its log lists those it ran)"),
    Step("gpu_tests_other", "gpu_tests",
         "the other GPU tests: ResNet-50 in 4 precisions, out of memory, NVML, 3 LOCAL JUBE smoke runs",
         "estimate: not reached on a GPU yet (4 driver starts, 3 JUBE runs at about 40 s a job)",
         (Size(240, ("-k", f"not ({GPU_TESTS_LLM})")),), floor_s=90,
         lost_when_cut="the tests it does not reach do not run (its log lists those it ran)"),
    _peer("peers_llm", "llm_peers.py", "LLM 800M bf16: megatron and torch against compiled HF GPT-2",
          ("--model-size", "800M", "--precision", "bf16", "--models", "megatron", "torch", "hf-compiled",
           "--global-batch-size", "32", "--micro-batch-size", "8"), (320, 150, 90),
          f"estimate: the step alone of all three peers took 196 s ({H200}); as-run rounds not yet timed"),
    _peer("peers_ic", "ic_peers.py", "ResNet-50 fp16 channels_last at 256 and 1024 against torchvision",
          ("--model", "resnet50", "--precision", "fp16", "--batch-sizes", "256", "1024",
           "--iterations", "5"), (150, 80, 45),
          "estimate, as peers_llm"),
    _peer("peers_fno", "fno_peers.py", "FNO rbc3d fp32 against neuraloperator",
          ("--problems", "rbc3d", "--precision", "fp32", "--iterations", "5"), (110, 60, 35),
          "estimate, as peers_llm", as_run_iterations=(20, 20)),
    Step("energy", "energy", "jpwr's NVML counter against its integrated power, 10 s of matrix products",
         f"measured 39 s ({H200})", (Size(45),)),
    Step("power", "power",
         "power limits 0.6, 0.8, default and a rank killed with SIGKILL, read by nvidia-smi",
         f"measured 78 s ({H200})", (Size(90),)),
    Step("main", "main_command", "the README's main command (bash aux/run_benchmarks.sh, LOCAL)",
         f"estimate: stopped after 175 s in the ResNet-50 sweep, about 40 s a job ({H200})",
         (Size(900),), floor_s=60, elastic=True,
         lost_when_cut="it stops where its cap finds it: the rows it has not reached are not decided"),
)

GROUPS = {"gpu_tests": ("gpu_tests_llm", "gpu_tests_other"),
          "peers": ("peers_llm", "peers_ic", "peers_fno")}


class PlanError(ValueError):
    """A budget or a choice of steps no plan fits: one line, what to do included."""


@dataclass(frozen=True)
class Limits:
    """The device's time: all that is left (the start included), its limit
    on one call and a start's cost; or, with `budget_s`, one call of that
    many seconds by hand."""
    device_left_s: int = DEVICE_LEFT_S
    call_limit_s: int = CALL_LIMIT_S
    start_s: int = START_S
    budget_s: int | None = None

    @property
    def calls(self) -> int:
        return 1 if self.budget_s is not None else CALLS

    @property
    def call_max_s(self) -> int:
        if self.budget_s is not None:
            return self.budget_s
        return min(CALL_MAX_S, self.call_limit_s - CALL_MARGIN_S)

    @property
    def usable_s(self) -> int:
        """Seconds for the calls themselves"""
        if self.budget_s is not None:
            return self.budget_s
        return self.device_left_s - self.start_s - self.calls * TRANSFER_S


@dataclass
class Planned:
    step: Step
    cap_s: int
    size: int = 0

    @property
    def need_s(self) -> int:
        return self.step.sizes[self.size].need_s

    @property
    def args(self) -> tuple[str, ...]:
        return self.step.sizes[self.size].args


@dataclass
class Call:
    number: int
    steps: list[Planned] = field(default_factory=list)

    @property
    def length_s(self) -> int:
        return sum(p.cap_s for p in self.steps) + KILL_AFTER_S


@dataclass
class Plan:
    limits: Limits
    calls: list[Call]
    full_need_s: int


def select(names: Sequence[str] | None) -> tuple[Step, ...]:
    """The steps --steps names (groups unfolded), in the plan's order"""
    if names is None:
        return STEPS
    known = [s.name for s in STEPS]
    wanted: set[str] = set()
    for name in names:
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in known:
            wanted.add(name)
        else:
            raise PlanError(f"--steps: no step '{name}' (the steps: {', '.join([*known, *GROUPS])})")
    return tuple(s for s in STEPS if s.name in wanted)


# the steps sized again, this much smaller, where they do not pack into the calls
REPACK_S = 10


def _fixed(limits: Limits) -> dict[int, list[Step]]:
    """What each call runs before its steps"""
    return {1: [NODE, SETUP]} | {n: [SETUP_AGAIN] for n in range(2, limits.calls + 1)}


def _fixed_s(limits: Limits) -> int:
    return (sum(s.sizes[0].need_s for ss in _fixed(limits).values() for s in ss)
            + limits.calls * KILL_AFTER_S)


def _size(limits: Limits, steps: Sequence[Step], room_s: int) -> list[Planned]:
    """Each step's size and cap, all of them within room_s: cut, in this
    order, until they fit: each peer to its next size, twice; then the GPU
    tests' parts alike down to their floors. The main command stands at its
    floor here and takes what is left when the calls are packed."""
    fixed_s = _fixed_s(limits)
    planned = [Planned(s, s.floor_s if s.elastic else s.sizes[0].need_s) for s in steps]

    def excess() -> int:
        return fixed_s + sum(p.cap_s for p in planned) - room_s

    for _ in range(2):
        for p in planned:
            if excess() > 0 and p.size + 1 < len(p.step.sizes):
                p.size += 1
                p.cap_s = p.need_s
    cuttable = [p for p in planned if p.step.floor_s and not p.step.elastic]
    if excess() > 0 and cuttable:
        over, room = excess(), sum(p.cap_s - p.step.floor_s for p in cuttable)
        for p in cuttable:
            p.cap_s -= min(p.cap_s - p.step.floor_s, math.ceil(over * (p.cap_s - p.step.floor_s) / room))
    if excess() > 0:
        least = fixed_s + sum(p.cap_s for p in planned)
        names = ", ".join(p.step.name for p in planned) or "nothing else"
        if limits.budget_s is not None:
            raise PlanError(f"--budget-s {limits.budget_s} cannot hold node, setup and {names} at their "
                            f"least ({least} s): give --budget-s {least} or more, or fewer --steps")
        raise PlanError(f"{limits.device_left_s} s of device time leave {room_s} s for {limits.calls} "
                        f"calls of at most {limits.call_max_s} s after a start of {limits.start_s} s "
                        f"and the transfers, but the steps ({names}) need {least} s at their least: "
                        f"ask for {least - room_s} s more device time, or fewer --steps")
    return planned


def _pack(limits: Limits, planned: list[Planned]) -> list[Call]:
    """The sized steps into the calls, the longest first, each into the
    fullest call that still holds it; the main command then into the call
    with the most room, up to what the device's time has left"""
    fixed = _fixed(limits)
    calls = [Call(n, [Planned(s, s.sizes[0].need_s) for s in fixed[n]]) for n in fixed]
    for p in sorted((p for p in planned if not p.step.elastic), key=lambda p: -p.cap_s):
        fits = [c for c in calls if c.length_s + p.cap_s <= limits.call_max_s]
        if not fits:
            raise PlanError(f"the step {p.step.name} ({p.cap_s} s) fits in no call of at most "
                            f"{limits.call_max_s} s beside the others: ask for longer calls, "
                            f"or fewer --steps")
        max(fits, key=lambda c: c.length_s).steps.append(p)
    for p in (p for p in planned if p.step.elastic):
        left = limits.usable_s - sum(c.length_s for c in calls)
        call = max(calls, key=lambda c: limits.call_max_s - c.length_s)
        p.cap_s = min(p.need_s, left, limits.call_max_s - call.length_s)
        if p.cap_s < p.step.floor_s:
            raise PlanError(f"the step {p.step.name} gets {p.cap_s} s, under its least of "
                            f"{p.step.floor_s} s: ask for more device time, or fewer --steps")
        call.steps.append(p)
    order = {s.name: i for i, s in enumerate(STEPS)} | {NODE.name: -2, SETUP.name: -1}
    for c in calls:
        c.steps.sort(key=lambda p: order[p.step.name])
    return [c for c in calls if len(c.steps) > len(fixed[c.number])]


def plan(limits: Limits, steps: Sequence[Step] = STEPS) -> Plan:
    """Every step in a call, each call within its limit, all calls within
    the device's time, the steps cut to fit (_size); where they do not pack
    into the calls, sized again a little smaller"""
    if limits.usable_s <= 0 or limits.call_max_s <= 0:
        raise PlanError(f"{limits.device_left_s} s of device time leave nothing for a call after a "
                        f"start of {limits.start_s} s and {limits.calls} x {TRANSFER_S} s of transfers "
                        f"(calls of at most {limits.call_max_s} s): ask for more device time")
    full_need = _fixed_s(limits) + sum(s.sizes[0].need_s for s in steps)
    room_s = min(limits.usable_s, limits.calls * limits.call_max_s)
    planned = _size(limits, steps, room_s)
    while True:
        try:
            return Plan(limits, _pack(limits, planned), full_need)
        except PlanError:
            room_s -= REPACK_S
            try:
                planned = _size(limits, steps, room_s)
            except PlanError:
                break
    return Plan(limits, _pack(limits, _size(limits, steps, room_s + REPACK_S)), full_need)


def describe(p: Plan) -> str:
    """The plan as gpu_check.sh prints it before it starts"""
    lim = p.limits
    lines = []
    if lim.budget_s is None:
        lines.append(f"GPU check plan: {lim.device_left_s} s of device time, a start of {lim.start_s} s, "
                     f"{TRANSFER_S} s of transfers a call, calls of at most {lim.call_max_s} s "
                     f"(the device's limit {lim.call_limit_s} s): {lim.usable_s} s for the calls")
    else:
        lines.append(f"GPU check plan: one call of {lim.budget_s} s (--budget-s)")
    for call in p.calls:
        after = " (on the machine the first call left, sent at once)" if call.number > 1 else ""
        lines.append(f"call {call.number}: {call.length_s} s at most{after}")
        for s in call.steps:
            size = s.step.sizes[s.size]
            form = f"; {size.form}" if size.form else ""
            need = f" of about {s.need_s} s" if s.cap_s < s.need_s else ""
            lines.append(f"  {s.step.name:<16} cap {s.cap_s:>3} s{need}  {s.step.what}{form} "
                         f"[{s.step.basis}]")
    cuts = [s for c in p.calls for s in c.steps if s.size or s.cap_s < s.need_s]
    used = sum(c.length_s for c in p.calls)
    if cuts:
        lines.append(f"cut to fit: the steps at their full size need about {p.full_need_s} s, "
                     f"{lim.usable_s} s are there")
        for s in cuts:
            if s.size:
                lines.append(f"  {s.step.name}: {s.step.sizes[s.size].form} (the full size, "
                             f"{s.step.sizes[0].form}, needs about {s.step.sizes[0].need_s} s)")
            if s.cap_s < s.need_s:
                lines.append(f"  {s.step.name}: {s.cap_s} s of about {s.need_s} s: {s.step.lost_when_cut}")
    if lim.budget_s is None:
        lines.append(f"device time: a start of {lim.start_s} s + calls of {used} s + transfers of "
                     f"{len(p.calls) * TRANSFER_S} s = {lim.start_s + used + len(p.calls) * TRANSFER_S} s "
                     f"of {lim.device_left_s} s")
    return "\n".join(lines)


def rows(p: Plan) -> list[list[str]]:
    """The plan for gpu_check.sh: a call's length and its kill grace, then its steps"""
    out = []
    for call in p.calls:
        out.append([str(call.number), "call", str(call.length_s), str(KILL_AFTER_S), str(MIN_STEP_S)])
        out.extend([str(call.number), s.step.name, str(s.cap_s), s.step.function, *s.args]
                   for s in call.steps)
    return out


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device-left-s", type=int, default=DEVICE_LEFT_S,
                   help="device time left, a machine's start included (default %(default)s)")
    p.add_argument("--call-limit-s", type=int, default=CALL_LIMIT_S,
                   help="the device's limit on one call (default %(default)s)")
    p.add_argument("--start-s", type=int, default=START_S,
                   help="a machine's start (default %(default)s)")
    p.add_argument("--budget-s", type=int, default=None,
                   help="one call of this many seconds instead, no start or transfers counted")
    p.add_argument("--steps", default=None, help="comma-separated steps or groups (default: all)")
    p.add_argument("--tsv", type=Path, default=None, help="write the plan for gpu_check.sh here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse(argv)
    limits = Limits(a.device_left_s, a.call_limit_s, a.start_s, a.budget_s)
    try:
        if min(a.device_left_s, a.call_limit_s) <= 0 or a.start_s < 0 or (a.budget_s or 1) <= 0:
            raise PlanError("the device's seconds must be positive numbers")
        done = plan(limits, select(a.steps.split(",") if a.steps else None))
    except PlanError as e:
        print(f"gpu_check: {e}", file=sys.stderr)
        return 2
    print(describe(done))
    if a.tsv is not None:
        a.tsv.write_text("".join("\t".join(row) + "\n" for row in rows(done)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
