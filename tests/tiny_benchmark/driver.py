"""A tiny data-parallel benchmark (a two-layer MLP on random vectors as
wide as its data step says: tests/tiny_benchmark/data.py), the suite's
proof that a benchmark is one folder and one table entry: the driver core
and the data-parallel shell do the rest."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from caraml.node import data_parallel, driver
from caraml.node.options import PRECISIONS, DriverOptions, option
from caraml.node.options import parse as parse_options


@dataclass(frozen=True, kw_only=True)
class Options(DriverOptions):
    global_batch_size: int = option(8, doc="samples per iteration over all devices")
    precision: str = option("fp32", choices=PRECISIONS, doc="number format")
    width: int = option(64, doc="the hidden layer's width")
    features: int = option(16, doc="the width of each input vector (the data step's)")


def train(args: Options, dist, stop, energy, batch: int):
    """The DDP model lives only in this frame: gone before the process group
    is (caraml/node/driver.py)."""
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(args.features, args.width), torch.nn.ReLU(),
                              torch.nn.Linear(args.width, 1)).to(dist.device)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-2)
    x, y = torch.randn(batch, args.features, device=dist.device), torch.randn(batch, 1, device=dist.device)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return driver.train_loop(step, args, dist, stop, energy, data_parallel.progress(args, "samples", ".4g"))


def train_and_report(args: Options, dist, stop, energy) -> int:
    batch = data_parallel.batch_per_device(args, dist)
    result = train(args, dist, stop, energy, batch)
    return data_parallel.report_result(args, dist, result, batch, "samples",
                                       head={"model": "mlp", "precision": args.precision,
                                             "features": args.features})


def parse(argv):
    args = parse_options(Options, argv, prog="python -m tests.tiny_benchmark.driver",
                         description="A tiny MLP, trained data-parallel.")
    args.check_run()
    args.check_energy()
    return args


if __name__ == "__main__":
    sys.exit(driver.main(None, parse, train_and_report))
