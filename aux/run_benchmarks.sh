#!/usr/bin/env bash
# The README's main command: set up this machine, run every benchmark
# through JUBE on one system (default: CPU, this host) and print the result
# tables. Usage: bash aux/run_benchmarks.sh [SYSTEM_TAG [MORE_TAGS...]]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CARAML_ROOT"
tags=("${@:-CPU}")

run_benchmark() {
    local script=$1 handle=$2
    echo "== jube run $script --tag ${tags[*]}"
    jube run "$script" --hide-animation --tag "${tags[@]}"
    # Slurm jobs end in their own time; local ones are done already.
    jube continue "$handle" -i last >/dev/null
    while [ "$(jube status "$handle" -i last)" != FINISHED ]; do
        sleep 30
        jube continue "$handle" -i last >/dev/null
    done
    jube result "$handle" -i last
}

run_benchmark image_classification/image_classification_torch_benchmark.xml image_classification/image_classification_benchmark_run
run_benchmark llm_training/llm_benchmark_nvidia_amd.yaml llm_training/llm_benchmark_nvidia_amd_run
