#!/usr/bin/env bash
# The README's main command: set up this machine, run every benchmark of
# the benchmark table (caraml/benchmarks.py) through JUBE on one system and
# print the result tables. Usage:
#   bash aux/run_benchmarks.sh [-q|-v] [SYSTEM_TAG [MORE_TAGS...]]
# -q: the tables, warnings and errors alone (a batch log); -v: each command
# it runs and what the follower asked JUBE and Slurm too (CARAML_LOG_LEVEL,
# aux/log_level.sh).
# Default: LOCAL, this host with its own GPUs (the LLM as a smoke run there)
# or its CPUs where it has none, with the measure tag: each benchmark's
# last batch or problem runs long enough to be a measurement (CARAML_MEASURE_S
# shortens it: docs/compare.md).
# It always ends: once no job of a run is left in the Slurm queue, or one
# cannot start as things stand, it prints the table, and its exit status is
# 1 when a row failed or never finished.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/log_level.sh"
while [ $# -gt 0 ]; do
    case "$1" in
        -q|--quiet) export CARAML_LOG_LEVEL=WARNING ;;
        -v|--verbose) export CARAML_LOG_LEVEL=DEBUG ;;
        *) break ;;
    esac
    shift
done
caraml_log_level >/dev/null || exit 2
source "$(dirname "${BASH_SOURCE[0]}")/checkout_path.sh"
caraml_check_checkout_path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || exit 1
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CARAML_ROOT"
tags=("$@")
smoke_tags=("$@")
if [ $# -eq 0 ]; then
    tags=(LOCAL measure)
    # On GPUs the LLM's full default is 100 iterations of 800M at batch 512
    # (tens of minutes); its smoke run checks the whole path in a few and
    # measures as long as the window asks (the benchmark table's local_smoke
    # says which benchmarks).
    smoke_tags=(LOCAL measure)
    [ "$(python3 caraml/login/local_host.py kind)" = cpu ] || smoke_tags+=(smoke)
fi

# JUBE's run, followed to its end by caraml/login/follow.py: one line per
# job as it starts and ends, the running job's progress and each Slurm
# job's state at a steady pace (CARAML_PACE_S, default 60 s), and an end
# with status 1 where Slurm says a job cannot start as things stand. Tags
# that belong to another benchmark (a model size, a problem) are left out.
# The benchmarks, their scripts and outpaths: the table (caraml/benchmarks.py)
table=$("$VENV/bin/python" -m caraml.benchmarks scripts)
scripts=()
while IFS=$'\t' read -r _ script _ _; do
    scripts+=("$script")
done <<< "$table"
failed=0
run_benchmark() {
    local script=$1 handle=$2 run_dir run_id run_file listed tag other others=() own_tags=() tag_args=()
    local status=0
    shift 2
    for other in "${scripts[@]}"; do
        [ "$other" = "$script" ] || others+=(--other "$other")
    done
    listed=$("$VENV/bin/python" -m caraml.login.benchmark_tags "$script" "${others[@]}" "$@") \
        || { failed=1; return 0; }
    while IFS= read -r tag; do
        [ -z "$tag" ] || own_tags+=("$tag")
    done <<< "$listed"
    # no tag at all: the pre-flight names the missing system tag
    [ ${#own_tags[@]} -eq 0 ] || tag_args=(--tag "${own_tags[@]}")
    caraml_info "== jube run $script ${tag_args[*]}"
    # the follower names the run its own jube run made: another main command
    # in this clone may start runs in the same folder meanwhile
    run_file=$(mktemp)
    caraml_debug "+ python -m caraml.login.follow $handle -- jube run $script --hide-animation ${tag_args[*]}"
    "$VENV/bin/python" -m caraml.login.follow --pace "${CARAML_PACE_S:-60}" --poll "${CARAML_POLL_S:-30}" \
        --run-file "$run_file" "$handle" -- jube run "$script" --hide-animation "${tag_args[@]}" \
        || status=$?
    run_id=$(cat "$run_file")
    rm -f "$run_file"
    [ "$status" -eq 0 ] || failed=1
    [ "$status" -ne 2 ] && [ -n "$run_id" ] || return 0  # no run, no table
    run_dir=$handle/$(printf %06d "$run_id")
    # every table is written; the screen shows the two that fit. A full disk
    # must not cost the other benchmarks' tables: JUBE's reason is named and
    # the run goes on
    caraml_debug "+ jube result $handle -i $run_id -a"
    if ! said=$(jube result "$handle" -i "$run_id" -a 2>&1); then
        echo "CARAML: the full tables of $handle were not written" \
            "($(printf '%s\n' "$said" | grep -v '^\s*$' | tail -n 1)); free space, then:" \
            "jube result $handle -i $run_id -a" >&2
        failed=1
    fi
    caraml_debug "+ jube result $handle -i $run_id -o result issues"
    jube result "$handle" -i "$run_id" -o result issues
    "$VENV/bin/python" -m caraml.login.rows "$run_dir" || failed=1
}

# fd 3: the jobs' commands read stdin, not the table
while IFS=$'\t' read -r -u 3 _ script outpath smoke; do
    if [ "$smoke" = yes ]; then
        run_benchmark "$script" "$outpath" "${smoke_tags[@]}"
    else
        run_benchmark "$script" "$outpath" "${tags[@]}"
    fi
done 3<<< "$table"
exit "$failed"
