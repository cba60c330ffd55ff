"""The tiny benchmark's entry of the benchmark table, registered by its
path: CARAML_BENCHMARKS=tests/tiny_benchmark/entry.py (docs/adding_a_benchmark.md).
It has a data step of its own (tests/tiny_benchmark/data.py, the JUBE
script's prepare_data) and columns of its own in the full table. Standard
library only, as every entry: the login node reads it."""

from caraml.benchmark_entry import Benchmark, Column, DataStep, Figures, ReFrame, default_columns

BENCHMARK = Benchmark(
    name="tiny",
    driver="tests.tiny_benchmark.driver",
    script="tests/tiny_benchmark.xml",
    outpath="tests/tiny_benchmark_run",
    unit="samples",
    figures=Figures("samples_per_s_mean", "samples_per_s_median", "samples_per_s_per_device"),
    # the model, rate, memory and work per Wh every benchmark shows, then what its data step made
    columns=(*default_columns("samples"), Column("Data", "data", "data.name"),
             Column("Features", "features", "data.features")),
    data_step=DataStep(args="prepare_args"),
    reframe=ReFrame(configurations=("smoke",)),
)
