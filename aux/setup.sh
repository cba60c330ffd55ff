#!/usr/bin/env bash
# Set-up shared by the README's two commands: JUBE, a virtual environment
# with the suite and its pinned torch stack, and a check that they work.
# Source it (it exports PATH and CARAML_ROOT) or run it; it is idempotent and
# fast once done (a stamp keyed on pyproject.toml skips the pip install).
set -euo pipefail

CARAML_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARAML_ROOT
VENV="${CARAML_VENV:-$CARAML_ROOT/.venv}"
STAMP="$VENV/.caraml-setup-stamp"

say() { echo "[caraml setup] $*"; }
die() { echo "[caraml setup] ERROR: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

apt_install() {
    command -v apt-get >/dev/null || return 1
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 && return 0
    as_root apt-get update -qq >/dev/null 2>&1 || return 1
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_jube() {
    # An HPC module or a user install comes first: JUBE from the distribution
    # is only the fallback.
    if command -v jube >/dev/null; then return; fi
    say "JUBE not on PATH; installing the distribution package"
    apt_install jube || die "JUBE is not installed and could not be installed with apt-get. Install it with 'module load JUBE' on an HPC system, 'apt-get install jube' on Debian/Ubuntu, or 'pip install http://apps.fz-juelich.de/jsc/jube/jube2/download.php?version=latest', then run this again."
    command -v jube >/dev/null || die "apt-get installed jube but 'jube' is still not on PATH"
}

pick_python() {
    local py
    for py in "${CARAML_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$py" ] && command -v "$py" >/dev/null || continue
        if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"; return
        fi
    done
    die "Python 3.11 or newer is needed (set CARAML_PYTHON to its path)"
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        local py; py="$(pick_python)"
        say "creating virtual environment $VENV with $("$py" --version)"
        if ! "$py" -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            apt_install python3-venv || die "'$py -m venv' failed and python3-venv could not be installed"
            "$py" -m venv "$VENV"
        fi
    fi
    local want; want="$(sha256sum "$CARAML_ROOT/pyproject.toml" | cut -d' ' -f1)"
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then return; fi
    say "installing the suite and its dependencies into $VENV (the standard torch build is several GB on first install)"
    local log="$VENV/pip-install.log"
    if ! { "$VENV/bin/python" -m pip install --upgrade pip \
           && "$VENV/bin/python" -m pip install -e "$CARAML_ROOT[host,test]" \
           && "$VENV/bin/python" -m pip check; } >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "pip could not install the suite into $VENV (full log: $log)"
    fi
    check_torch
    echo "$want" >"$STAMP"
}

check_torch() {
    # A CPU-only '+cpu' torch wheel imports, but torchvision's compiled ops
    # then fail to register; building resnet50 and running nms catches it.
    "$VENV/bin/python" - <<'PY' || die "torch/torchvision do not work together in $VENV (see the message above); delete $VENV and run again"
import torch, torchvision
from torchvision.ops import nms
torchvision.models.resnet50()
boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
assert nms(boxes, torch.tensor([1.0, 0.5]), 0.5).tolist() == [0]
print(f"[caraml setup] torch {torch.__version__} and torchvision {torchvision.__version__} work together")
PY
}

ensure_jube
ensure_venv
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
