"""The torch backend: gpt_torch.GPT with DistributedDataParallel (data
parallelism only), AdamW, gradient accumulation, and automatic mixed
precision (autocast, plus loss scaling for fp16). Runs on CPU and any GPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel

from caraml.node import compile_toolchain, numerics, precision
from caraml.node.dist import Dist
from llm_training.arguments import Args, Layout
from llm_training.gpt_torch import GPT
from llm_training.model_sizes import GPTConfig


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    # Like Megatron: no weight decay on biases and LayerNorm parameters.
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def adam_settings(args: Args) -> dict:
    # fused: one kernel for all tensors per step instead of several per
    # tensor, on CPUs and GPUs alike.
    return dict(lr=args.lr, betas=args.adam_betas, eps=args.adam_eps, fused=True)


def clipped_step(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer,
                 params: list[torch.nn.Parameter], clip_grad: float) -> bool:
    """The optimizer step after the micro-batches: gradients unscaled before
    they are clipped, the step skipped where fp16 overflowed (True)."""
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(params, clip_grad)
    return numerics.scaled_update(scaler, optimizer)


class TorchBackend:
    name = "torch"

    def __init__(self, cfg: GPTConfig, args: Args, layout: Layout, dist: Dist):
        self.dist = dist
        self.microbatches = layout.microbatches
        self.data_parallel_rank = dist.rank
        device = dist.device
        if args.compile:
            compile_toolchain.check_on(device.type, "--compile (the torch backend)")
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        model = GPT(cfg, args.recompute).to(device)
        self.params = list(model.parameters())
        # One rank has nothing to synchronise: no DDP, no sharded optimizer.
        self.data_parallel = dist.world_size > 1
        self.model = model if not self.data_parallel else DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
        if args.compile:
            # After DDP, so the compiler sees its gradient buckets; the loop's
            # warm-up iterations absorb the compilation.
            self.model = torch.compile(self.model)
        self.attention = "torch-sdpa"

        groups = param_groups(model, args.weight_decay)
        if args.distributed_optimizer and self.data_parallel:
            # Imported here: the import jit-compiles functional optimizers, slow and noisy.
            from torch.distributed.optim import ZeroRedundancyOptimizer

            self.optimizer = ZeroRedundancyOptimizer(
                groups[0]["params"], torch.optim.AdamW, weight_decay=args.weight_decay,
                **adam_settings(args))
            self.optimizer.add_param_group(groups[1])
        else:
            self.optimizer = torch.optim.AdamW(groups, **adam_settings(args))
        self.clip_grad = args.clip_grad
        self.autocast = precision.autocast(args.precision, device)
        self.scaler = precision.grad_scaler(args.precision, device,
                                            init_scale=args.initial_loss_scale,
                                            growth_interval=args.loss_scale_window)

    def train_step(self, batches: Iterator[dict[str, torch.Tensor]]) -> numerics.Stepped:
        """One iteration: forward and backward over this rank's micro-batches,
        then one optimizer step. Returns the mean loss of the micro-batches
        and whether the scaler skipped the update."""
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.dist.device)
        for i in range(self.microbatches):
            batch = next(batches)
            last = i == self.microbatches - 1
            # Gradients are all-reduced once, after the last micro-batch.
            sync = nullcontext() if last or not self.data_parallel else self.model.no_sync()
            with sync:
                with self.autocast:
                    loss = self.model(batch["tokens"], batch["labels"], batch["loss_mask"])
                self.scaler.scale(loss / self.microbatches).backward()
            total += loss.detach()
        skipped = clipped_step(self.scaler, self.optimizer, self.params, self.clip_grad)
        return numerics.Stepped(total.item() / self.microbatches, skipped)
