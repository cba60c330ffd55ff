"""The LLM benchmark's data: Megatron indexed datasets (.bin/.idx) read
through megatron-core, their preprocessing with a GPT-2 byte-level BPE, the
corpora that feed it (OSCAR for HPC systems, a local corpus for hosts without
network) and synthetic token ids.

    from llm_training.data import build_datasets, Tokenizer

`python -m llm_training.data.prepare` makes a dataset for JUBE's data step;
docs/llm_data.md describes both.
"""

import importlib

__all__ = ["Tokenizer", "build_datasets"]

_HOMES = {"build_datasets": "llm_training.data.datasets",
          "Tokenizer": "llm_training.data.tokenizer"}


def __getattr__(name: str):
    # Imported on first use, so that the preprocessing commands, which import
    # this package too, do not pay for importing torch when they have nothing to do.
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
