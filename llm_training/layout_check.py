"""The LLM benchmark's own check before submission: the driver's layout rules
(llm_training.arguments, no torch) applied to the job's devices, so a model
size whose layout cannot fit fails on the login node, not after the queue.
A layout that fits is printed as one line:

    CARAML layout: system=A100 nodes=1 devices=4 tp=1 pp=1 dp=4 micro_batch=4 global_batch=512 microbatches=32

one that does not as one `CARAML ERROR:` line and exit status 2; so does
sequence parallelism with the megatron backend on a ROCm system, which
needs layer norms from Transformer Engine or Apex that the suite's ROCm
image does not have (megatron-core's torch LayerNorm refuses it, on the
node, after the queue wait). JUBE runs it
after the common pre-flight (platform.xml's benchmark_checks) with the login
node's python3: standard library and the suite's own modules only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from caraml import report
from caraml.login import systems
from caraml.report import BenchmarkInputError, error, line
from llm_training.arguments import parse, resolve_layout


def _driver_args(model_size: str, backend: str, global_batch: str) -> list[str]:
    argv = ["--model-size", model_size, "--backend", backend, "--train-iters", "2",
            "--synthetic", "--energy-methods", "none"]
    return argv + (["--global-batch-size", global_batch] if global_batch else [])


def asked(field: str, model_size: str, backend: str, global_batch: str,
          nodes: int, devices_per_node: int) -> str:
    """What the job asks for as the driver will resolve it (`global_batch`,
    `precision`), for the row of a job that has not run; empty where the
    layout does not fit (the check then fails the row and says why)."""
    args = parse(_driver_args(model_size, backend, global_batch))
    if field == "precision":
        return args.precision
    try:
        return str(resolve_layout(args, world_size=nodes * devices_per_node).global_batch_size)
    except BenchmarkInputError:
        return ""


def layout_line(system: str, model_size: str, backend: str, global_batch: str,
                nodes: int, devices_per_node: int) -> str:
    """The `CARAML layout:` line; a BenchmarkInputError that names the job's
    devices where the size's layout does not fit them."""
    argv = _driver_args(model_size, backend, global_batch)
    devices = nodes * devices_per_node
    try:
        layout = resolve_layout(parse(argv), world_size=devices)
    except BenchmarkInputError as exc:
        raise BenchmarkInputError(
            f"{model_size} on {system}: {nodes} node{'s' if nodes > 1 else ''} x "
            f"{devices_per_node} device{'s' if devices_per_node > 1 else ''} = {devices}: {exc}"
        ) from exc
    known = systems.load().get(system)
    if (backend == "megatron" and layout.sequence_parallel and known is not None
            and known.params.get("device_kind") == "rocm"):
        raise BenchmarkInputError(
            f"{model_size} on {system}: sequence parallelism (tp={layout.tensor_parallel}) needs "
            f"Transformer Engine or Apex layer norms and the suite's ROCm image has neither; "
            f"run the torch backend (--tag torch) or a size with tensor parallel size 1")
    return line("layout", dict(system=system, nodes=nodes, devices=layout.devices,
                               tp=layout.tensor_parallel, pp=layout.pipeline_parallel,
                               dp=layout.data_parallel, micro_batch=layout.micro_batch_size,
                               global_batch=layout.global_batch_size,
                               microbatches=layout.microbatches))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", required=True, help="system_name as JUBE resolved it")
    ap.add_argument("--model-size", required=True)
    ap.add_argument("--backend", default="megatron")
    ap.add_argument("--global-batch-size", default="", help="empty: the size's default")
    ap.add_argument("--nodes", type=int, default=1, help="nodes the job asks for")
    ap.add_argument("--devices-per-node", type=int, default=1)
    ap.add_argument("--asked", choices=["global_batch", "precision"],
                    help="print only this value of the job (a JUBE parameter), no check")
    args = ap.parse_args(argv)
    if args.asked:
        report.parameter(asked(args.asked, args.model_size, args.backend, args.global_batch_size,
                               args.nodes, args.devices_per_node))
        return 0
    try:
        print(layout_line(args.system, args.model_size, args.backend, args.global_batch_size,
                          args.nodes, args.devices_per_node))
    except BenchmarkInputError as exc:
        error(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
