#!/usr/bin/env bash
# Builds one of the suite's images from its definition and checks it; the
# `container` tag's job runs this on a node of the target system, so the
# image matches the nodes' architecture and the check sees their devices.
#
#   build.sh DEFINITION IMAGE KIND TRAIN_PYTHON ENERGY_PYTHON [APPTAINER_EXEC_FLAGS...]
#
# An image that exists is only checked again (CARAML_REBUILD=1 builds it
# anew). APPTAINER_BUILD_FLAGS replaces the default --fakeroot where a site
# builds otherwise. The image appears under its name only once it is built.
set -euo pipefail

die() { echo "CARAML ERROR: $*" >&2; exit 1; }

[ "$#" -ge 5 ] || die "usage: build.sh DEFINITION IMAGE KIND TRAIN_PYTHON ENERGY_PYTHON [FLAGS...]"
definition=$1 image=$2 kind=$3 train_python=$4 energy_python=$5
shift 5
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[ -f "$definition" ] || die "container definition $definition not found"
grep -Eq '^From: *[^ ]+@sha256:[0-9a-f]{64} *$' "$definition" \
    || die "$definition does not pin its base image by digest (From: image@sha256:<64 hex digits>); pin one you have verified before building"
command -v apptainer >/dev/null || die "apptainer is not on PATH on $(hostname)"

if [ -f "$image" ] && [ "${CARAML_REBUILD:-0}" != 1 ]; then
    echo "CARAML container: $image exists; checking it (CARAML_REBUILD=1 builds it anew)"
else
    mkdir -p "$(dirname "$image")"
    # Apptainer's scratch space next to the image (/tmp on login and compute
    # nodes is often too small for a framework image), gone afterwards, as
    # is a half-built image.
    if [ -z "${APPTAINER_TMPDIR:-}" ]; then
        APPTAINER_TMPDIR=$(mktemp -d "$(dirname "$image")/.apptainer-tmp.XXXXXX")
        export APPTAINER_TMPDIR
        trap 'rm -rf "$APPTAINER_TMPDIR" "$image.partial"' EXIT
    else
        trap 'rm -f "$image.partial"' EXIT
    fi
    # %files paths in the definitions are relative to the checkout
    (cd "$root" && apptainer build ${APPTAINER_BUILD_FLAGS:---fakeroot} --force "$image.partial" "$definition")
    mv "$image.partial" "$image"
    echo "CARAML container: built $image from $definition"
fi

apptainer exec "$@" --bind "$root" --env "PYTHONPATH=$root" "$image" \
    "$energy_python" "$root/containers/check.py" --kind "$kind" \
    --train-python "$train_python" --energy-python "$energy_python"
