#!/usr/bin/env bash
# The suite's first run on a GPU node, in one script that needs no network:
# the offline set-up on the node's own torch, the GPU tests, the three peer
# comparisons, jpwr's NVML counter against its integrated power, a short
# power-limit sweep read back by nvidia-smi (and after a rank killed with
# SIGKILL), then the README's main command on this host's GPUs (LOCAL) with
# the time that is left. Each step has a time cap; a step that reaches it
# is stopped and the next one runs. Everything goes under one folder.
#
#   bash aux/gpu_check.sh [--out DIR] [--wheelhouse DIR] [--archive FILE] [--budget-s N]
#                         [--steps gpu_tests,peers,energy,power,main]
#
# --wheelhouse: a folder that `python3 aux/wheelhouse.py DIR --python-version
#   3.12 --node-packages NODE.txt` filled on a connected machine, NODE.txt
#   being the node's `python3 -m pip list --format=freeze` (only what the
#   node lacks, tens of MB); without it the set-up uses the network.
# --archive: a .tar.gz of the output folder, written anew after each step.
# --budget-s: the whole script's seconds (default 900); the main command gets
#   what the steps before it left.
# --steps: which steps run after the node's description and the set-up
#   (default all, in this order), e.g. the GPU tests in one call and the
#   rest in a second on the same node where one call is limited to 10
#   minutes (docs/gpu_readiness.md has each step's time on an H200).
# The summary (DIR/summary.txt, also printed) has one line per step: its
# status, seconds and log. docs/gpu_readiness.md says what to look for.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=gpu_check_out
wheelhouse=""
archive=""
budget=900
steps=gpu_tests,peers,energy,power,main
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --wheelhouse) wheelhouse=$(cd "$2" && pwd) || exit 2; shift 2 ;;
        --archive) archive=$2; shift 2 ;;
        --budget-s) budget=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        *) echo "gpu_check: unknown argument '$1' (--out DIR, --wheelhouse DIR, --archive FILE, --budget-s N, --steps LIST)" >&2
           exit 2 ;;
    esac
done
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget-s '$budget' is no number of seconds" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
start=$SECONDS
summary=$out/summary.txt
: >"$summary"
[ -z "$wheelhouse" ] || export CARAML_WHEELHOUSE=$wheelhouse
# one environment for every step: the tests' layer, which holds the main
# command's; made once (the set-up's stamp skips pip after that)
export CARAML_EXTRAS=test
export PYTHONUNBUFFERED=1

say() { printf '[gpu check %4ds] %s\n' $((SECONDS - start)) "$*"; }

save() {
    if [ -n "$archive" ]; then
        tar czf "$archive.tmp" -C "$out" . && mv "$archive.tmp" "$archive"
    fi
    return 0
}

# step NAME CAP_S COMMAND...: the command under its cap (TERM, then KILL
# 15 s later, to its whole process group), its output in NAME.log
step() {
    local name=$1 cap=$2 rc t0=$SECONDS status
    shift 2
    local left=$((budget - (SECONDS - start)))
    [ "$cap" -le "$left" ] || cap=$left
    if [ "$cap" -lt 20 ]; then
        printf '%-12s %-28s %5s s  %s\n' "$name" "not run (budget spent)" 0 "-" >>"$summary"
        say "$name: not run, the budget of $budget s is spent"
        save
        return 0
    fi
    say "$name: started (cap $cap s, log $out/$name.log)"
    # the steps are this script's functions, exported to the shell timeout starts
    timeout -k 15 "$cap" bash -c '"$@"' "$name" "$@" >"$out/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=ok ;;
        124|137) status="stopped at its cap" ;;
        *) status="failed (exit $rc)" ;;
    esac
    printf '%-12s %-28s %5d s  %s\n' "$name" "$status" $((SECONDS - t0)) "$name.log" >>"$summary"
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

gpu_tests() {
    bash aux/run_tests.sh -m gpu -n 0 -v -rA --durations=0 -p no:cacheprovider \
        --junitxml="$out/gpu_tests.xml"
}

# each comparison under a cap of its own; its end status said in the log
peer() {
    local cap=$1 status
    shift
    timeout --foreground -k 10 "$cap" .venv/bin/python "$@" --out "$out/perf"
    status=$?
    [ "$status" -eq 0 ] || echo "== $1 ended with status $status$([ "$status" = 124 ] && echo " (its cap of $cap s)")"
    return "$status"
}

# each script's as-run comparison first (2 rounds: every round starts the
# driver and the plain loop afresh, tens of seconds each on a GPU), then
# its step alone
peers() {
    local rc=0
    echo "== LLM 800M bf16: the driver as run against a plain loop; megatron and torch backends against Hugging Face GPT-2, compiled"
    peer 320 aux/perf/llm_peers.py --model-size 800M --precision bf16 \
        --models megatron torch hf-compiled --global-batch-size 32 --micro-batch-size 8 \
        --rounds 4 --warmup 2 --as-run-rounds 2 --as-run-iterations 20 || rc=1
    echo "== ResNet-50 fp16 channels_last: the driver as run and the step against a plain torchvision loop"
    peer 150 aux/perf/ic_peers.py --model resnet50 --precision fp16 \
        --batch-sizes 256 1024 --rounds 4 --iterations 5 --warmup 2 --as-run-rounds 2 \
        --as-run-iterations 20 || rc=1
    echo "== FNO rbc3d: the driver as run against a plain loop; the step against a plain neuraloperator loop"
    peer 110 aux/perf/fno_peers.py --problems rbc3d --precision fp32 \
        --rounds 4 --iterations 5 --warmup 2 --as-run-rounds 2 --as-run-iterations 20 || rc=1
    return $rc
}

# NVML's energy counter against the integral of its sampled power, over
# 10 s of matrix products
energy() {
    local py=.venv/bin/python
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
    local py=.venv/bin/python before default point pid deadline
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

# whatever ends the script, the GPU keeps the limit it came with
limit_at_start=$(limit_w 2>/dev/null)
restore_limit() {
    [ -n "$limit_at_start" ] && [ "$(limit_w 2>/dev/null)" != "$limit_at_start" ] \
        && nvidia-smi -i 0 -pl "$limit_at_start" >/dev/null 2>&1
    return 0
}
trap restore_limit EXIT

export out
export -f node gpu_tests peer peers energy limit_w power main_command
wanted() { [[ ",$steps," == *",$1,"* ]]; }
step node 30 node
step setup 150 bash aux/setup.sh
if grep -q '^setup  *ok' "$summary"; then
    ! wanted gpu_tests || step gpu_tests 560 gpu_tests
    ! wanted peers || step peers 590 peers
    ! wanted energy || step energy 40 energy
    ! wanted power || step power 100 power
    ! wanted main || step main 600 main_command
fi
say "done in $((SECONDS - start)) s"
cat "$summary"
save
