#!/usr/bin/env bash
# The suite's first run on a GPU node, in one script that needs no network:
# the offline set-up on the node's own torch, the GPU tests, the three peer
# comparisons, jpwr's NVML counter against its integrated power, a short
# power-limit sweep read back by nvidia-smi (and after a rank killed with
# SIGKILL), then the README's main command on this host's GPUs (LOCAL).
# aux/gpu_plan.py splits the steps into two calls that fit the device time
# a lent node gives (its start included) and sizes each step's cap; the
# plan is printed before anything starts. A step that reaches its cap is
# stopped and the next one runs. Everything goes under one folder.
#
#   bash aux/gpu_check.sh --plan-only [LIMITS]
#   bash aux/gpu_check.sh --call 1|2 [--out DIR] [--wheelhouse DIR] [--archive FILE] [LIMITS]
#   bash aux/gpu_check.sh --steps LIST --budget-s N [--out DIR] [--wheelhouse DIR] [--archive FILE]
#
# LIMITS: --device-left-s N (default 900, a machine's start included),
#   --call-limit-s N (the device's limit on one call, default 600),
#   --start-s N (a machine's start, default 180); both calls take the same.
# --call: which call of the plan runs (default 1); the second is sent at
#   once after the first, on the machine it left (docs/gpu_readiness.md).
# --wheelhouse: a folder that `python3 aux/wheelhouse.py DIR --python-version
#   3.12 --node-packages NODE.txt` filled on a connected machine, NODE.txt
#   being the node's `python3 -m pip list --format=freeze` (only what the
#   node lacks, tens of MB); without it the set-up uses the network.
# --archive: a .tar.gz of the output folder, written anew after each step,
#   and when the script ends: a failed step, an error, or TERM.
# --steps LIST --budget-s N: one call of N s instead, with these steps
#   after the node's description and the set-up (gpu_tests and peers name
#   their parts, e.g. gpu_tests,energy).
# The summary (DIR/summary.txt, also printed) has one line per step: its
# status, seconds and log. docs/gpu_readiness.md says what to look for.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=gpu_check_out
wheelhouse=""
archive=""
call=1
plan_only=""
plan_args=()
usage="--plan-only, --call N, --out DIR, --wheelhouse DIR, --archive FILE, --device-left-s N, --call-limit-s N, --start-s N, --steps LIST, --budget-s N"
while [ $# -gt 0 ]; do
    case $1 in
        --plan-only) plan_only=1; shift; continue ;;
        --out|--wheelhouse|--archive|--call|--steps|--budget-s|--device-left-s|--call-limit-s|--start-s)
            [ $# -ge 2 ] || { echo "gpu_check: $1 needs a value ($usage)" >&2; exit 2; } ;;
        *) echo "gpu_check: unknown argument '$1' ($usage)" >&2; exit 2 ;;
    esac
    case $1 in
        --out) out=$2 ;;
        --wheelhouse) wheelhouse=$(cd "$2" && pwd) || exit 2 ;;
        --archive) archive=$2 ;;
        --steps) plan_args+=("$1" "$2") ;;
        *) [[ "$2" =~ ^[0-9]+$ ]] || { echo "gpu_check: $1 '$2' is no whole number" >&2; exit 2; }
           [ "$1" = --call ] && call=$2 || plan_args+=("$1" "$2") ;;
    esac
    shift 2
done
# the plan, said before anything starts (a budget it cannot fit: one line, exit 2)
if [ -n "$plan_only" ]; then
    exec python3 aux/gpu_plan.py ${plan_args[@]+"${plan_args[@]}"}
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
python3 aux/gpu_plan.py ${plan_args[@]+"${plan_args[@]}"} --tsv "$out/plan.tsv" >"$out/plan.txt" || exit 2
cat "$out/plan.txt"
# this call's rows: its length and kill grace, then its steps
mapfile -t rows < <(awk -F'\t' -v c="$call" '$1 == c' "$out/plan.tsv")
if [ ${#rows[@]} -eq 0 ]; then
    echo "gpu_check: the plan has no call $call (it has $(cut -f1 "$out/plan.tsv" | sort -u | paste -sd' ' -)); --plan-only prints it" >&2
    exit 2
fi
IFS=$'\t' read -r _ _ budget kill_after min_step <<<"${rows[0]}"
start=$SECONDS
summary=$out/summary.txt
: >"$summary"
[ -z "$wheelhouse" ] || export CARAML_WHEELHOUSE=$wheelhouse
# one environment for every step: the tests' layer, which holds the main
# command's; made once (the set-up's stamp skips pip after that)
export CARAML_EXTRAS=test
export PYTHONUNBUFFERED=1
# the set-up's environment (aux/setup.sh makes it there)
py=${CARAML_VENV:-$PWD/.venv}/bin/python

say() { printf '[gpu check %4ds] %s\n' $((SECONDS - start)) "$*"; }

save() {
    if [ -n "$archive" ]; then
        tar czf "$archive.tmp" -C "$out" . && mv "$archive.tmp" "$archive"
    fi
    return 0
}

record() { printf '%-16s %-28s %5d s  %s\n' "$@" >>"$summary"; }

# TERM (the device's limit on a call, a user) stops the running step, the
# rest are not run, and the summary and the archive still say it all
child=""
terminated=""
on_term() {
    terminated=1
    [ -z "$child" ] || kill -TERM "$child" 2>/dev/null
}
trap on_term TERM INT

# step NAME CAP COMMAND...: the command under its cap (TERM, then KILL
# kill_after s later, to its whole process group), its output in NAME.log;
# in the background, so that a TERM to this script reaches it at once
step() {
    local name=$1 cap=$2 rc t0=$SECONDS status
    shift 2
    # the steps before it may have used their kill grace: the call's end holds
    local left=$((budget - (SECONDS - start) - kill_after))
    [ "$cap" -le "$left" ] || cap=$left
    if [ "$cap" -lt "$min_step" ]; then
        record "$name" "not run (budget spent)" 0 "-"
        say "$name: not run, the call's $budget s are spent"
        save
        return 0
    fi
    say "$name: started (cap $cap s, log $out/$name.log)"
    # the steps are this script's functions, exported to the shell timeout starts
    step_name=$name timeout -k "$kill_after" "$cap" bash -c '"$@"' "$name" "$@" \
        >"$out/$name.log" 2>&1 </dev/null &
    child=$!
    # a trapped signal ends `wait` early: wait again until the step has ended
    while wait "$child"; rc=$?; kill -0 "$child" 2>/dev/null; do :; done
    child=""
    case $rc in
        0) status=ok ;;
        124|137) status="stopped at its cap" ;;
        *) status="failed (exit $rc)" ;;
    esac
    [ -z "$terminated" ] || status="stopped by TERM (exit $rc)"
    record "$name" "$status" $((SECONDS - t0)) "$name.log"
    say "$name: $status after $((SECONDS - t0)) s"
    tail -n 3 "$out/$name.log" | sed 's/^/    /'
    save
    return 0
}

node() {
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,power.default_limit,power.min_limit,power.max_limit --format=csv
    python3 --version
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'
    nproc
    free -g
    git log -1 --format='commit %H %cd' 2>/dev/null || true
    python3 -m pip list --format=freeze
}

setup() {
    bash aux/setup.sh
}

# ARGS: the part's selection (aux/gpu_plan.py splits them in two)
gpu_tests() {
    bash aux/run_tests.sh -m gpu "$@" -n 0 -v -rA --durations=0 -p no:cacheprovider \
        --junitxml="$out/$step_name.xml"
}

# a peer comparison (aux/perf/), its size from the plan; it prints each
# round as it goes, into its step's log
peer() {
    "$py" "$@" --out "$out/perf"
}

# NVML's energy counter against the integral of its sampled power, over
# 10 s of matrix products
energy() {
    "$py" -m jpwr --methods pynvml --df-out "$out/jpwr" -- "$py" -c \
        'import time, torch; a = torch.randn(8192, 8192, device="cuda"); t = time.time()
while time.time() - t < 10: a @ a
torch.cuda.synchronize()' && "$py" -m jpwr combine "$out/jpwr"
}

limit_w() { nvidia-smi --query-gpu=power.limit --format=csv,noheader,nounits -i 0 | tr -d ' '; }

# Two points and `default` through the image driver, the limit read back by
# nvidia-smi after each; then a rank killed with SIGKILL while capped, the
# limit read back, and the starting limit put back by nvidia-smi.
power() {
    local before default point pid="" deadline
    # the rank started in a session of its own does not end with the step's
    # process group: ended here when the step is stopped at its cap
    trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null' EXIT
    trap 'exit 143' TERM
    before=$(limit_w)
    default=$(nvidia-smi --query-gpu=power.default_limit --format=csv,noheader,nounits -i 0 | tr -d ' ')
    echo "limit before: $before W, default: $default W"
    local run=(-m image_classification.image_classification_torch --device cuda --model resnet50
               --image-size 224 --global-batch-size 128 --precision bf16 --channels-last
               --warmup-iters 3 --energy-methods pynvml --tdp-w "$default")
    for point in 0.6 0.8 default; do
        "$py" "${run[@]}" --train-iters 30 --energy-dir "$out/power_$point" --power-limit "$point" \
            | grep -E '^CARAML (power limit|global)' || echo "point $point: the driver failed"
        echo "point $point: nvidia-smi reads $(limit_w) W after the run"
    done
    setsid "$py" "${run[@]}" --train-iters 100000 --exit-duration-in-mins 2 \
        --energy-dir "$out/power_kill" --power-limit 0.6 >"$out/power_kill.out" 2>&1 &
    pid=$!
    deadline=$((SECONDS + 90))
    until grep -q '^CARAML power limit:' "$out/power_kill.out" || [ $SECONDS -ge $deadline ] \
        || ! kill -0 "$pid" 2>/dev/null; do sleep 1; done
    sleep 3
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    grep '^CARAML power limit' "$out/power_kill.out"
    echo "after kill -9 of the rank: nvidia-smi reads $(limit_w) W (started at $before W)"
    if [ "$(limit_w)" != "$before" ]; then
        nvidia-smi -i 0 -pl "$before" >/dev/null && echo "put back by nvidia-smi: $(limit_w) W"
    fi
}

main_command() {
    bash aux/run_benchmarks.sh
}

# whatever ends the script, the GPU keeps the limit it came with, and the
# archive holds what was measured
limit_at_start=$(limit_w 2>/dev/null)
restore_limit() {
    [ -n "$limit_at_start" ] && [ "$(limit_w 2>/dev/null)" != "$limit_at_start" ] \
        && nvidia-smi -i 0 -pl "$limit_at_start" >/dev/null 2>&1
    return 0
}
trap 'restore_limit; save' EXIT

export out py
export -f node setup gpu_tests peer energy limit_w power main_command
calls=$(cut -f1 "$out/plan.tsv" | sort -u | wc -l)
say "call $call of $calls: $((${#rows[@]} - 1)) steps, at most $budget s"
for row in "${rows[@]:1}"; do
    IFS=$'\t' read -r -a f <<<"$row"
    name=${f[1]}
    if [ -n "$terminated" ]; then
        record "$name" "not run (TERM)" 0 "-"
    elif [ "$name" = node ] || [ "$name" = setup ] || grep -q '^setup  *ok' "$summary"; then
        step "$name" "${f[2]}" "${f[@]:3}"
    else
        record "$name" "not run (no set-up)" 0 "-"
    fi
done
say "done in $((SECONDS - start)) s"
cat "$summary"
if [ "$call" -lt "$calls" ]; then
    say "next, at once on this machine: the same command with --call $((call + 1))"
fi
[ -z "$terminated" ] || exit 143
