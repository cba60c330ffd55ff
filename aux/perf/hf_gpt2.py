"""The peer the LLM perf scripts measure the suite against: Hugging Face
transformers' GPT2LMHeadModel at the suite's shape, trained the way the
torch backend trains (AdamW with the same groups and settings, the same
autocast, loss scaling and gradient clipping), optionally under
torch.compile."""

from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from caraml.node import precision as caraml_precision
from llm_training import arguments
from llm_training.torch_backend import adam_settings, clipped_step, param_groups


class HuggingFaceGPT2:
    def __init__(self, args: arguments.Args, gpt, microbatches: int, device: torch.device,
                 compile: bool = False):
        torch.manual_seed(args.seed)
        model = GPT2LMHeadModel(GPT2Config(
            n_layer=gpt.num_layers, n_embd=gpt.hidden_size, n_head=gpt.num_attention_heads,
            n_inner=gpt.ffn_hidden_size, n_positions=gpt.seq_length, vocab_size=gpt.vocab_size,
            resid_pdrop=gpt.dropout, embd_pdrop=gpt.dropout, attn_pdrop=gpt.dropout,
            activation_function="gelu_new", tie_word_embeddings=gpt.tie_embeddings,
            bos_token_id=0, eos_token_id=0,
            # the fastest attention transformers offers on the device
            attn_implementation="sdpa")).to(device)
        model.train()
        self.params = list(model.parameters())
        self.optimizer = torch.optim.AdamW(param_groups(model, args.weight_decay),
                                           **adam_settings(args))
        self.model = torch.compile(model) if compile else model
        self.autocast = caraml_precision.autocast(args.precision, device)
        self.scaler = caraml_precision.grad_scaler(args.precision, device)
        self.clip_grad = args.clip_grad
        self.microbatches = microbatches

    def train_step(self, batches) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(self.microbatches):
            batch = next(batches)
            with self.autocast:
                loss = self.model(input_ids=batch["tokens"], labels=batch["tokens"]).loss
            self.scaler.scale(loss / self.microbatches).backward()
            total += loss.detach()
        clipped_step(self.scaler, self.optimizer, self.params, self.clip_grad)
        return float(total) / self.microbatches
