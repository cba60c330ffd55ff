"""How fast the data side is: the time build_datasets takes (checks and
megatron-core's index build, not its import) and how many samples one
process reads per second,
for a preprocessed corpus and for synthetic data. A benchmark, not a test:
its figures go to docs/llm_data.md with the command that produced them.

    python -m llm_training.data.throughput --data-path PREFIX --vocab-file F --merge-file F
"""

from __future__ import annotations

import argparse
import tempfile
import time

from llm_training.data import Tokenizer, build_datasets


def measure(data_prefix: str | None, vocab_size: int, seq_length: int,
            samples: int) -> tuple[float, float]:
    """(seconds to build, samples read per second)."""
    with tempfile.TemporaryDirectory() as cache:  # a fresh index every time
        start = time.perf_counter()
        train, _ = build_datasets(data_prefix=data_prefix, synthetic=data_prefix is None,
                                  vocab_size=vocab_size, seq_length=seq_length,
                                  num_train_samples=samples, num_valid_samples=0, seed=1234,
                                  path_to_cache=cache)
        built = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(len(train)):
            train[i]
        return built, samples / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m llm_training.data.throughput", description=__doc__)
    p.add_argument("--data-path", required=True)
    p.add_argument("--vocab-file", required=True)
    p.add_argument("--merge-file", required=True)
    p.add_argument("--seq-length", type=int, default=2048)
    p.add_argument("--samples", type=int, default=4096)
    args = p.parse_args(argv)
    vocab_size = Tokenizer.from_files(args.vocab_file, args.merge_file).vocab_size
    import megatron.core.datasets.gpt_dataset  # noqa: F401  (its import time is not the build's)

    for label, prefix in (("indexed", args.data_path), ("synthetic", None)):
        built, rate = measure(prefix, vocab_size, args.seq_length, args.samples)
        print(f"{label}: build_datasets {built:.2f} s for {args.samples} samples of "
              f"{args.seq_length} tokens; {rate:.0f} samples/s = "
              f"{rate * args.seq_length / 1e6:.1f} M tokens/s read by one process")


if __name__ == "__main__":
    main()
