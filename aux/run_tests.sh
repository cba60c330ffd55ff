#!/usr/bin/env bash
# The README's test command: the same set-up as the main command, then the
# test suite (arguments go to pytest). The Slurm tests install slurm-wlm and
# munge themselves and start a one-node cluster on localhost.
set -euo pipefail
# the lock's test layer (pytest, transformers, ReFrame) on top of the main
# command's environment; the set-up keeps it there
export CARAML_EXTRAS="test${CARAML_EXTRAS:+,$CARAML_EXTRAS}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CARAML_ROOT"
exec python -m pytest "$@"
