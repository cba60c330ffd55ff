"""The megatron backend: megatron-core's GPTModel with tensor, pipeline,
sequence and data parallelism, its DistributedDataParallel and (distributed)
mixed-precision optimizer, and its pipeline schedules. Trains on CUDA (or
ROCm) only: megatron-core's RNG tracker, DDP buffers and forward call
torch.cuda. On a CPU the parallel state and the model are still built
(use_cpu_initialization), which is what the CPU tests check."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch

# Before megatron-core, which imports Transformer Engine and Apex itself.
from llm_training import optional_kernels  # noqa: F401

# isort: split
from megatron.core import parallel_state, tensor_parallel
from megatron.core.distributed import (
    DistributedDataParallel,
    DistributedDataParallelConfig,
    finalize_model_grads,
)
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.transformer.module import Float16Module

from caraml.node import compile_toolchain, numerics
from caraml.node.dist import Dist
from caraml.report import BenchmarkInputError
from llm_training import gpt_megatron
from llm_training.arguments import Args, Layout
from llm_training.model_sizes import GPTConfig

# Megatron-LM's fp16 loss-scaler settings besides the two that are flags.
LOSS_SCALE_HYSTERESIS = 2
MIN_LOSS_SCALE = 1.0


class MegatronBackend:
    name = "megatron"

    def __init__(self, cfg: GPTConfig, args: Args, layout: Layout, dist: Dist):
        on_gpu = dist.device.type == "cuda"
        if on_gpu:
            compile_toolchain.check("the megatron backend (megatron-core's fused kernels)")
        # The parallel groups are carved out of the process group dist.init
        # made, which exists for one process too.
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=layout.tensor_parallel,
            pipeline_model_parallel_size=layout.pipeline_parallel,
        )
        torch.manual_seed(args.seed)
        if on_gpu:
            # Megatron derives its own streams per tensor-parallel rank from the seed.
            tensor_parallel.model_parallel_cuda_manual_seed(args.seed)
        self.data_parallel_rank = parallel_state.get_data_parallel_rank()
        self.last_stage = parallel_state.is_pipeline_last_stage()
        self.layout = layout
        self.seq_length = cfg.seq_length
        self.attention = gpt_megatron.attention_implementation()

        self.config = gpt_megatron.transformer_config(
            cfg,
            tensor_parallel_size=layout.tensor_parallel,
            pipeline_parallel_size=layout.pipeline_parallel,
            sequence_parallel=layout.sequence_parallel,
            precision=args.precision,
            recompute=args.recompute,
            cpu_initialization=not on_gpu,
        )
        self.model = gpt_megatron.build_gpt(cfg, self.config,
                                            pre_process=parallel_state.is_pipeline_first_stage(),
                                            post_process=self.last_stage).to(dist.device)
        self.position_ids = torch.arange(cfg.seq_length, device=dist.device).unsqueeze(0)
        self.forward_backward = get_forward_backward_func()
        self.optimizer = None
        if on_gpu:
            self._wrap_for_training(args)

    def _wrap_for_training(self, args: Args) -> None:
        """Megatron-core's mixed-precision wrapper, DDP and optimizer. Its DDP
        allocates the gradient buffers on the current CUDA device, so a model
        built on a CPU can be inspected but not trained."""
        config = self.config
        model = self.model
        if args.precision != "fp32":
            model = Float16Module(config, model)
        self.model = DistributedDataParallel(
            config,
            DistributedDataParallelConfig(
                # Megatron-LM accumulates and reduces bf16 gradients in fp32.
                grad_reduce_in_fp32=args.precision == "bf16",
                use_distributed_optimizer=args.distributed_optimizer,
            ),
            model,
        )
        self.optimizer = get_megatron_optimizer(
            OptimizerConfig(
                optimizer="adam",
                lr=args.lr,
                weight_decay=args.weight_decay,
                adam_beta1=args.adam_betas[0],
                adam_beta2=args.adam_betas[1],
                adam_eps=args.adam_eps,
                clip_grad=args.clip_grad,
                fp16=args.precision == "fp16",
                bf16=args.precision == "bf16",
                params_dtype=config.params_dtype,
                use_distributed_optimizer=args.distributed_optimizer,
                initial_loss_scale=args.initial_loss_scale,
                loss_scale_window=args.loss_scale_window,
                hysteresis=LOSS_SCALE_HYSTERESIS,
                min_loss_scale=MIN_LOSS_SCALE,
            ),
            [self.model],
        )
        apply_weight_decay_multipliers(self.optimizer.param_groups, args.weight_decay)
        # The schedules call back into these for loss scaling and for the
        # data-parallel (and sequence-parallel LayerNorm) gradient reduction.
        config.grad_scale_func = self.optimizer.scale_loss
        config.finalize_model_grads_func = finalize_model_grads

    def _forward_step(self, batches: Iterator[dict[str, torch.Tensor]], model):
        batch = next(batches)  # every stage takes one, so all stay on the same sample
        tokens = batch["tokens"]
        output = model(tokens, self.position_ids.expand_as(tokens), None, labels=batch["labels"])
        return output, partial(_masked_mean, batch["loss_mask"])

    def train_step(self, batches: Iterator[dict[str, torch.Tensor]]) -> numerics.Stepped:
        """One iteration over this rank's micro-batches and one optimizer
        step. Returns the mean loss on the last pipeline stage (else None)
        and whether the optimizer skipped its update (its loss scaler found
        inf or nan gradients)."""
        if self.optimizer is None:
            raise BenchmarkInputError("the megatron backend trains on CUDA or ROCm GPUs only "
                                      "(megatron-core's DDP keeps its buffers there); use --backend torch")
        self.model.zero_grad_buffer()
        self.optimizer.zero_grad()
        loss = self.forward_backward_loss(batches)
        # megatron-core: (update_successful, grad_norm, num_zeros_in_grad)
        updated, _, _ = self.optimizer.step()
        return numerics.Stepped(loss, not updated)

    def forward_backward_loss(self, batches: Iterator[dict[str, torch.Tensor]]) -> float | None:
        """Forward and backward over this rank's micro-batches through
        megatron-core's schedule; the mean of their losses on the last
        pipeline stage, else None."""
        losses = self.forward_backward(
            forward_step_func=self._forward_step,
            data_iterator=batches,
            model=[self.model],
            num_microbatches=self.layout.microbatches,
            seq_length=self.seq_length,
            micro_batch_size=self.layout.micro_batch_size,
            forward_only=False,
        )
        if not self.last_stage:
            return None
        return torch.stack([d["lm loss"] for d in losses]).mean().item()


def apply_weight_decay_multipliers(param_groups: list[dict], weight_decay: float) -> None:
    """No weight decay on biases and norm weights, as in Megatron-LM and the
    torch backend. megatron-core puts them in groups with `wd_mult` 0 but
    leaves the multiplication to Megatron-LM's learning-rate scheduler,
    which this backend does not use, so its optimizer would decay them."""
    for group in param_groups:
        group["weight_decay"] = weight_decay * group.get("wd_mult", 1.0)


def _masked_mean(loss_mask: torch.Tensor, per_token_loss: torch.Tensor):
    mask = loss_mask.reshape(-1).float()
    loss = (per_token_loss.float().reshape(-1) * mask).sum() / mask.sum().clamp(min=1.0)
    # A copy: megatron-core's schedule divides the returned loss in place by
    # the number of micro-batches (its gradient is the mean's), and a
    # detach() shares that storage, so the reported loss would shrink too.
    return loss, {"lm loss": loss.detach().clone()}
