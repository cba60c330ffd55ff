"""The tiny benchmark's entry of the benchmark table, registered by its
path: CARAML_BENCHMARKS=tests/tiny_benchmark/entry.py (docs/adding_a_benchmark.md).
Standard library only, as every entry: the login node reads it."""

from caraml.benchmarks import Benchmark, Figures, ReFrame

BENCHMARK = Benchmark(
    name="tiny",
    driver="tests.tiny_benchmark.driver",
    script="tests/tiny_benchmark.xml",
    outpath="tests/tiny_benchmark_run",
    unit="samples",
    figures=Figures("samples_per_s_mean", "samples_per_s_median", "samples_per_s_per_device"),
    reframe=ReFrame(configurations=("smoke",)),
)
