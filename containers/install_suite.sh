#!/usr/bin/env bash
# Runs inside an image while it is built (%post of the definitions here):
# installs the suite's own requirements into PYTHON without replacing
# anything the vendor image brings. The suite's code itself is not
# installed: jobs bind the checkout and point PYTHONPATH at it, so a change
# to the code needs no new image.
#
#   install_suite.sh PYTHON EXTRA...      (extras of pyproject.toml)
set -euo pipefail
python=$1
shift
here=$(dirname "$(readlink -f "$0")")

# Jobs set PYTHONPATH to the checkout alone; what the image put on it
# becomes a .pth file, so the image's own packages stay importable.
if [ -n "${PYTHONPATH:-}" ]; then
    site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    tr ':' '\n' <<<"$PYTHONPATH" | grep -v '^$' > "$site/image-pythonpath.pth"
fi

# What the image has stays as it is: every installed version is a constraint.
"$python" -m pip list --format=freeze > "$here/image-constraints.txt"
mapfile -t built_on_torch < <("$python" "$here/requirements.py" "$here/pyproject.toml" "$@" --no-deps)
mapfile -t others < <("$python" "$here/requirements.py" "$here/pyproject.toml" "$@" --with-deps)
if [ "${#others[@]}" -gt 0 ]; then
    "$python" -m pip install --no-cache-dir -c "$here/image-constraints.txt" "${others[@]}"
fi
if [ "${#built_on_torch[@]}" -gt 0 ]; then
    "$python" -m pip install --no-cache-dir --no-deps "${built_on_torch[@]}"
fi
"$python" -m pip list --format=freeze > "$here/installed.txt"
