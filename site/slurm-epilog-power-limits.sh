#!/bin/sh
# Slurm epilog: every GPU of the node back at its default power limit, at
# every scope it reports (the GPU's own; a GH200 superchip's module; an AMD
# GPU's cap), read again (caraml/job/power_guard.py, `reset`). slurmd runs it as
# root after each job on each of the job's nodes; where a limit does not go
# back it exits 1, and Slurm drains the node rather than hand a capped GPU
# to the next job. How a centre installs it: docs/power_limits.md.
#
# It runs the checkout it lies in, with CARAML_EPILOG_PYTHON where that is
# set, else python3 on slurmd's PATH: a Python that has nvidia-ml-py (or
# amdsmi, which ROCm installs for its own python3).
checkout=$(dirname "$(dirname "$(readlink -f "$0")")")
PYTHONPATH="$checkout${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
exec "${CARAML_EPILOG_PYTHON:-python3}" -m caraml.job.power_guard reset
