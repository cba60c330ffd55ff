#!/usr/bin/env bash
# The README's main command: set up this machine, run every benchmark
# through JUBE on one system and print the result tables. Usage:
#   bash aux/run_benchmarks.sh [SYSTEM_TAG [MORE_TAGS...]]
# Default: LOCAL, this host with its own GPUs (the LLM as a smoke run there)
# or its CPUs where it has none.
# It always ends: once no job of a run is left in the Slurm queue it prints
# the table, and its exit status is 1 when a row failed or never finished.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/checkout_path.sh"
caraml_check_checkout_path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || exit 1
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CARAML_ROOT"
tags=("$@")
llm_tags=("$@")
if [ $# -eq 0 ]; then
    tags=(LOCAL)
    # On GPUs the LLM's full default is 100 iterations of 800M at batch 512
    # (tens of minutes); its smoke run checks the whole path in a few.
    llm_tags=(LOCAL)
    [ "$(python3 caraml/login/local_host.py kind)" = cpu ] || llm_tags+=(smoke)
fi

# Slurm jobs of this run still in the queue (sbatch's "Submitted batch job N")
jobs_in_queue() {
    local run_dir=$1 ids
    command -v squeue >/dev/null || return 1
    ids=$(cat "$run_dir"/*/work/stdout 2>/dev/null | sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' | paste -sd, -)
    [ -n "$ids" ] && [ -n "$(squeue -h -o %i -j "$ids" 2>/dev/null)" ]
}

failed=0
run_benchmark() {
    local script=$1 handle=$2 run_dir
    shift 2
    echo "== jube run $script --tag $*"
    jube run "$script" --hide-animation --tag "$@" || { failed=1; return; }
    run_dir=$(ls -d "$handle"/[0-9]*/ | tail -n 1)
    # Local jobs are done already; Slurm jobs end in their own time. A job
    # that left the queue without its end marker will not write one later.
    jube continue "$handle" -i last --hide-animation >/dev/null || true
    while [ "$(jube status "$handle" -i last)" = RUNNING ] && jobs_in_queue "$run_dir"; do
        sleep 30
        jube continue "$handle" -i last --hide-animation >/dev/null || true
    done
    jube result "$handle" -i last -a
    "$VENV/bin/python" -m caraml.login.rows "$run_dir/result/result_csv.dat" || failed=1
}

run_benchmark image_classification/image_classification_torch_benchmark.xml image_classification/image_classification_benchmark_run "${tags[@]}"
run_benchmark llm_training/llm_benchmark_nvidia_amd.yaml llm_training/llm_benchmark_nvidia_amd_run "${llm_tags[@]}"
exit "$failed"
