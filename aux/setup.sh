#!/usr/bin/env bash
# Set-up shared by the README's two commands: JUBE, a virtual environment
# with the suite and a torch stack (the node's own where it works with the
# node's GPUs, else the locked standard build), and a check that they work.
# Every package comes from the hashed lock aux/lock/ (pip --require-hashes);
# CARAML_EXTRAS=reframe, h5 or test adds that layer of it (the README's
# test command asks for test).
# Offline (HPC compute nodes): CARAML_WHEELHOUSE=DIR installs from a folder
# that `python3 aux/wheelhouse.py DIR` filled on a connected machine.
# Source it (it exports PATH, VIRTUAL_ENV and CARAML_ROOT and sets VENV) or
# run it; it is idempotent and fast once done (a stamp keyed on
# pyproject.toml and the lock's files skips the pip install).

# The work runs in a function whose body is a subshell: its `set -e`, its
# `exit` on an error, its functions and variables end with it, so a shell
# that sources this file keeps its own options and survives a failure.
_caraml_setup() (
    set -euo pipefail

    VENV="${CARAML_VENV:-$CARAML_ROOT/.venv}"
    STAMP="$VENV/.caraml-setup-stamp"
    # the hashed versions of the whole stack (docs/setup.md says how to refresh it)
    LOCK_DIR="$CARAML_ROOT/aux/lock"

    # what it does, where the level shows it (aux/log_level.sh); its errors always
    say() { caraml_info "[caraml setup] $*"; }
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
        # aux/wheelhouse.py unpacks Debian's pure-Python package into the wheelhouse
        local unpacked="${CARAML_WHEELHOUSE:-/nonexistent}/jube"
        if [ -f "$unpacked/usr/bin/jube" ]; then
            say "JUBE from $unpacked"
            printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "%s" "$@"\n' \
                "$unpacked/usr/lib/python3/dist-packages" "$VENV/bin/python" "$unpacked/usr/bin/jube" \
                >"$VENV/bin/jube"
            chmod +x "$VENV/bin/jube"
            return
        fi
        say "JUBE not on PATH; installing the distribution package"
        apt_install jube || die "JUBE is not installed and could not be installed with apt-get. Install it with 'module load JUBE' on an HPC system, 'apt-get install jube' on Debian/Ubuntu, or 'pip install http://apps.fz-juelich.de/jsc/jube/jube2/download.php?version=latest', then run this again."
        command -v jube >/dev/null || die "apt-get installed jube but 'jube' is still not on PATH"
    }

    # The Python to build on: CARAML_PYTHON, else the newest 3.11+ on PATH,
    # except that one whose torch works with the host's GPUs comes first (a
    # container's or a module's python3 beside a newer bare python3.13)
    pick_python() {
        local py first=""
        for py in "${CARAML_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
            [ -n "$py" ] && command -v "$py" >/dev/null || continue
            "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || continue
            if [ -n "${CARAML_PYTHON:-}" ] || torch_here "$py"; then echo "$py"; return; fi
            [ -n "$first" ] || first=$py
        done
        [ -z "$first" ] || { echo "$first"; return; }
        die "Python 3.11 or newer is needed (set CARAML_PYTHON to its path)"
    }

    # A GPU node's own torch (a module, a container, a preinstalled wheel) is
    # built for its driver and network: the venv is made on top of it and keeps
    # it. Elsewhere the venv gets the pinned standard build. CARAML_SYSTEM_TORCH=1
    # or 0 decides instead of the check.
    torch_here() {
        case "${CARAML_SYSTEM_TORCH:-auto}" in
            1) "$1" -c 'import torch' 2>/dev/null ;;
            0) return 1 ;;
            *) "$1" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null ;;
        esac
    }
    system_torch_works() {
        local py=$1
        torch_here "$py" && return 0
        [ "${CARAML_SYSTEM_TORCH:-auto}" != 1 ] || die "CARAML_SYSTEM_TORCH=1 but '$py' cannot import torch"
        return 1
    }

    # A venv on top of a Python that is itself a venv (a container's
    # /opt/.../.venv holding its torch): venv's --system-site-packages
    # reaches the base interpreter's packages only, not that venv's, so
    # they are added by a .pth file, with their own .pth files processed
    see_the_parent_venv() {
        local py=$1 sites
        sites="$("$py" -c 'import site, sys; print("\n".join(site.getsitepackages()) if sys.prefix != sys.base_prefix else "")')"
        [ -n "$sites" ] || return 0
        "$VENV/bin/python" - "$sites" <<'PY'
import sys
import sysconfig
from pathlib import Path

sites = [p for p in sys.argv[1].splitlines() if p]
pth = Path(sysconfig.get_path("purelib")) / "caraml-node-site.pth"
pth.write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in sites) + "\n")
PY
    }

    # python -m venv, where the Python may lack ensurepip (Debian's without
    # python3-venv, a container's venv made by uv): on top of a Python
    # whose own pip runs, a venv without pip uses that one
    make_venv() {
        local py=$1; shift
        "$py" -m venv "$@" "$VENV" 2>/dev/null && return 0
        rm -rf "$VENV"
        if [[ " $* " == *" --system-site-packages "* ]] && "$py" -m pip --version >/dev/null 2>&1 \
            && "$py" -m venv --without-pip "$@" "$VENV" 2>/dev/null; then
            see_the_parent_venv "$py"
            "$VENV/bin/python" -m pip --version >/dev/null 2>&1 && return 0
            rm -rf "$VENV"
        fi
        apt_install python3-venv || die "'$py -m venv' failed and python3-venv could not be installed"
        "$py" -m venv "$@" "$VENV"
    }

    # The lock's layer of this node's vendor's sensor bindings
    vendor_layer() {
        if command -v nvidia-smi >/dev/null; then echo ",nvidia"
        elif [ -d /sys/class/kfd ]; then echo ",rocm"; fi
    }

    # pip from the index, or (CARAML_WHEELHOUSE) from a folder that
    # aux/wheelhouse.py filled on a connected machine: no network needed
    PIP_SOURCE=()
    [ -z "${CARAML_WHEELHOUSE:-}" ] || PIP_SOURCE=(--no-index "--find-links=$CARAML_WHEELHOUSE")
    pip_install() {
        "$VENV/bin/python" -m pip install ${PIP_SOURCE[@]+"${PIP_SOURCE[@]}"} "$@"
    }

    # The lock's layers, then the suite itself. With the locked torch build
    # every line of the layers (the lock is complete: --no-deps); on the
    # node's own torch, aux/node_torch.py, which leaves out the framework
    # and what only it needs, and the node's own packages. The suite's own
    # build backend (setuptools) is one of the locked packages: no build
    # isolation, which would fetch it unchecked.
    install_suite() {
        local mode=$1 layers=$2 lock_args=() layer asked=()
        IFS=, read -ra asked <<<"$layers"
        for layer in "${asked[@]}"; do
            lock_args+=(-r "$LOCK_DIR/$layer.txt")
        done
        # (called in an && list, where set -e does not act: each step says its failure)
        if [ "$mode" = pinned ]; then
            pip_install --require-hashes --no-deps "${lock_args[@]}" || return 1
        else
            "$VENV/bin/python" "$CARAML_ROOT/aux/node_torch.py" "${lock_args[@]}" \
                -- ${PIP_SOURCE[@]+"${PIP_SOURCE[@]}"} || return 1
        fi
        pip_install --no-deps --no-build-isolation -e "$CARAML_ROOT"
    }

    # Offline, without a torch of the node's and without one in the
    # wheelhouse, pip could only fail on a resolution conflict: say what
    # fixes it before pip starts.
    check_wheelhouse_torch() {
        [ -n "${CARAML_WHEELHOUSE:-}" ] || return 0
        compgen -G "$CARAML_WHEELHOUSE/torch-*.whl" >/dev/null && return 0
        die "the wheelhouse $CARAML_WHEELHOUSE holds no torch and this node has no working one: refill it on a connected machine with 'python3 aux/wheelhouse.py DIR --with-torch', or load the node's torch (module, container) and run again with CARAML_SYSTEM_TORCH=1 after deleting $VENV"
    }

    # What the venv is made of (its torch, the lock's layers) is decided
    # once, where it is created, and kept in it: the login node that
    # prepares data and combines energy files shares it with GPU nodes whose
    # view (a GPU) it lacks. Delete the venv to decide again.
    ensure_venv() {
        local extras_file="$VENV/.caraml-extras"
        [ -n "${CARAML_WHEELHOUSE:-}" ] && [ ! -d "$CARAML_WHEELHOUSE" ] \
            && die "CARAML_WHEELHOUSE=$CARAML_WHEELHOUSE is not a folder; fill one with: python3 aux/wheelhouse.py DIR"
        if [ ! -x "$VENV/bin/python" ]; then
            local py; py="$(pick_python)"
            local flags=() extras="torch,main$(vendor_layer)"
            if system_torch_works "$py"; then
                flags=(--system-site-packages)
                extras="main$(vendor_layer)"
            fi
            say "creating virtual environment $VENV with $("$py" --version)${flags:+ on top of its own torch}"
            make_venv "$py" ${flags[@]+"${flags[@]}"}
            [ ${#flags[@]} -eq 0 ] || see_the_parent_venv "$py"
            echo "$extras" >"$extras_file"
        fi
        # a venv made before the lock had layers: its torch as it was, the main layer
        if [ ! -f "$extras_file" ] || ! grep -qE '(^|,)main(,|$)' "$extras_file"; then
            if grep -q '^include-system-site-packages = true' "$VENV/pyvenv.cfg"; then
                echo "main$(vendor_layer)" >"$extras_file"
            else
                echo "torch,main$(vendor_layer)" >"$extras_file"
            fi
        fi
        # layers asked for on top (CARAML_EXTRAS=reframe: the ReFrame checks;
        # h5: jpwr's HDF5 files; test: the tests), kept like the rest (the
        # venv's order; aux/lock.py puts them in the lock's)
        local asked=() extra
        IFS=, read -ra asked <<<"${CARAML_EXTRAS:-}"
        for extra in ${asked[@]+"${asked[@]}"}; do
            [[ "$extra" =~ ^[a-z0-9_-]+$ && -f "$LOCK_DIR/$extra.txt" ]] \
                || die "CARAML_EXTRAS=$CARAML_EXTRAS: '$extra' is no layer of the lock aux/lock/ ($(cd "$LOCK_DIR" && ls -- *.txt | sed 's/\.txt$//' | paste -sd, -))"
            [[ ",$(cat "$extras_file")," == *",$extra,"* ]] || echo "$(cat "$extras_file"),$extra" >"$extras_file"
        done
        local extras layers mode=system
        extras="$(cat "$extras_file")"
        [[ "$extras" == torch,* ]] && mode=pinned
        # the layers in the lock's order, each with its bases (aux/lock.py)
        layers="$(python_of_lock layers "${extras#torch,}")" || die "the lock's layers could not be read: $layers"
        local want lock_files=()
        IFS=, read -ra asked <<<"$layers"
        for extra in "${asked[@]}"; do lock_files+=("$LOCK_DIR/$extra.txt"); done
        want="$( (sha256sum "$CARAML_ROOT/pyproject.toml" "${lock_files[@]}" | cut -d' ' -f1; echo "$extras") | sha256sum | cut -d' ' -f1)"
        if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then return; fi
        say "installing the suite [$extras] into $VENV from the lock's layers $layers${CARAML_WHEELHOUSE:+ (files from $CARAML_WHEELHOUSE)}$([ "$mode" = pinned ] && echo " (the standard torch build is several GB on first install)")"
        [ "$mode" = system ] || check_wheelhouse_torch
        local log="$VENV/pip-install.log"
        if ! { install_suite "$mode" "$layers" \
               && { [ "$mode" = pinned ] || matching_torchvision; } \
               && pip_check "$mode" "$layers"; } >"$log" 2>&1; then
            tail -n 30 "$log" >&2
            die "pip could not install the suite into $VENV (full log: $log)"
        fi
        check_torch
        echo "$want" >"$STAMP"
    }

    # On top of a system's packages pip check also judges the host's own, which
    # are none of the suite's business; the torch check below still runs.
    # The lock drops a few requirements on purpose (aux/lock.py): those are
    # no error.
    pip_check() {
        [ "$1" = system ] || "$VENV/bin/python" "$CARAML_ROOT/aux/lock.py" check "$2"
    }

    # aux/lock.py, with the Python that made the venv (packaging or pip's copy of it)
    python_of_lock() {
        "$VENV/bin/python" "$CARAML_ROOT/aux/lock.py" "$@" 2>&1
    }

    # torchvision is built against one torch minor version: 0.(N+15) for 2.N
    matching_torchvision() {
        local want
        want="$("$VENV/bin/python" -c 'import torch; m = int(torch.__version__.split(".")[1]); print(f"0.{m + 15}")')"
        if "$VENV/bin/python" -c "import sys, torchvision; sys.exit(not torchvision.__version__.startswith('$want.'))" 2>/dev/null; then
            return 0
        fi
        echo "torchvision $want.* to match this torch"
        pip_install --no-deps "torchvision==$want.*"
    }

    check_torch() {
        # A CPU-only '+cpu' torch wheel imports, but torchvision's compiled ops
        # then fail to register; building resnet50 and running nms catches it.
        local pair
        pair=$("$VENV/bin/python" - <<'PY'
import torch, torchvision
from torchvision.ops import nms
torchvision.models.resnet50()
boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
assert nms(boxes, torch.tensor([1.0, 0.5]), 0.5).tolist() == [0]
print(f"torch {torch.__version__} and torchvision {torchvision.__version__}")
PY
        ) || die "torch/torchvision do not work together in $VENV (see the message above); delete $VENV and run again"
        say "$pair work together"
    }

    ensure_venv
    export PATH="$VENV/bin:$PATH"
    ensure_jube
)

CARAML_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARAML_ROOT
# errexit only works inside the subshell when the call is a plain command
# (not an `if` or `||` test), so the caller's errexit is switched off around
# the call and switched back on after it; the other options are only ever
# set inside the subshell.
case $- in *e*) _caraml_setup_errexit=1 ;; *) _caraml_setup_errexit= ;; esac
set +e
# a checkout JUBE cannot run safely is refused before anything is installed
source "$CARAML_ROOT/aux/checkout_path.sh"
source "$CARAML_ROOT/aux/log_level.sh"
caraml_check_checkout_path "$CARAML_ROOT" && _caraml_setup
_caraml_setup_status=$?
unset -f caraml_check_checkout_path
[ -n "$_caraml_setup_errexit" ] && set -e
if [ "$_caraml_setup_status" = 0 ]; then
    # VENV for the scripts that source this file, VIRTUAL_ENV for tools
    VENV="${CARAML_VENV:-$CARAML_ROOT/.venv}"
    export VIRTUAL_ENV="$VENV"
    case ":$PATH:" in *":$VENV/bin:"*) ;; *) export PATH="$VENV/bin:$PATH" ;; esac
fi
unset -f _caraml_setup
unset _caraml_setup_errexit
# `return` ends a sourcing with the status; a shell that runs this file as a
# script cannot return and exits with it instead.
eval "unset _caraml_setup_status; return $_caraml_setup_status 2>/dev/null || exit $_caraml_setup_status"
