"""Checks a built image the way the jobs use it: each Python that a job
runs in the image imports what it needs (the framework, megatron-core, jpwr
and the vendor's power-reading binding), with the checkout on PYTHONPATH as
in a job. One line for a good image,

    CARAML container: python3: torch=2.8.0a0 megatron.core=0.16.1 ... cuda_devices=4

or one `CARAML ERROR:` line per Python that lacks a module, and exit status 1.
It runs inside the image (containers/build.sh):

    python check.py --kind cuda --train-python python3 --energy-python python3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

# What each kind of device needs, by the Python that needs it: the one that
# trains, and the one that runs jpwr (the same one, except on Graphcore,
# whose SDK Python is too old for jpwr).
MODULES = {
    "cuda": {"train": ["torch", "megatron.core", "torchrun_jsc", "jpwr", "pynvml"]},
    "rocm": {"train": ["torch", "megatron.core", "torchrun_jsc", "jpwr", "amdsmi"]},
    "ipu": {"train": ["torch", "poptorch"], "energy": ["jpwr", "gcipuinfo"]},
}

# Runs under each Python of the image, the Poplar SDK's 3.8 included.
PROBE = r"""
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
        found[name] = str(getattr(module, "__version__", "ok"))
    except Exception as exc:
        found[name] = "MISSING " + type(exc).__name__ + ": " + " ".join(str(exc).split())
torch = sys.modules.get("torch")
if torch is not None and getattr(torch, "cuda", None) is not None and "poptorch" not in sys.argv:
    found["cuda_devices"] = str(torch.cuda.device_count())
print(json.dumps(found))
"""


def probe(python: str, modules: list[str]) -> dict[str, str]:
    done = subprocess.run([python, "-c", PROBE, *modules], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {name: f"MISSING {python} failed: {tail}" for name in modules}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", required=True, choices=sorted(MODULES))
    ap.add_argument("--train-python", required=True)
    ap.add_argument("--energy-python", required=True)
    args = ap.parse_args(argv)
    pythons = {"train": args.train_python, "energy": args.energy_python}
    failed = False
    for role, modules in MODULES[args.kind].items():
        python = pythons[role]
        found = probe(python, modules)
        missing = {name: why for name, why in found.items() if why.startswith("MISSING")}
        for name, why in missing.items():
            print(f"CARAML ERROR: {python} in this image cannot import {name} "
                  f"({why.removeprefix('MISSING ')})", file=sys.stderr)
        failed |= bool(missing)
        print(f"CARAML container: {python}: "
              + " ".join(f"{name}={version}" for name, version in found.items()
                         if name not in missing))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
