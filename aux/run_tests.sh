#!/usr/bin/env bash
# The README's test command: the same set-up as the main command, then the
# test suite (arguments go to pytest). The Slurm tests install slurm-wlm and
# munge themselves and start a one-node cluster on localhost.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CARAML_ROOT"
exec python -m pytest "$@"
