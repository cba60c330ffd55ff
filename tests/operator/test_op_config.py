"""The operator driver's options: defaults and the rules that turn bad
input into one line before training."""

import pytest
import torch

from caraml.report import BenchmarkInputError
from operator_benchmark import config, problems


def parsed(*flags):
    return config.parse(["--train-iters", "6", "--warmup-iters", "2", *flags])


def test_defaults_are_upstreams_batch_fp32_eager_and_the_problems_own_data():
    args = parsed()
    assert (args.global_batch_size, args.precision, args.compile) == (4, "fp32", "none")
    assert args.data_kind == problems.SYNTHETIC
    assert parsed("--problem", "navier_stokes2d").data_kind == problems.GENERATED


def test_an_epoch_is_the_generated_data_or_the_stated_size():
    assert parsed().epoch_samples == config.SYNTHETIC_EPOCH
    assert parsed("--problem", "navier_stokes2d-small",
                  "--generated-samples", "96").epoch_samples == 96
    assert parsed("--samples-per-epoch", "500").epoch_samples == 500


@pytest.mark.parametrize("flags, message", [
    (["--problem", "rbc4d"], "unknown problem 'rbc4d'; the problems are pic1d pic2d"),
    (["--problem", "rbc2d", "--data", "generated"],
     "--data generated: the suite generates data only for navier_stokes2d"),
    (["--compile", "default", "--warmup-iters", "0"], "--compile default needs --warmup-iters 1"),
])
def test_bad_input_is_named(flags, message):
    with pytest.raises(BenchmarkInputError, match="^" + message.replace("(", r"\(")):
        config.check_input(config.parse(["--train-iters", "6", "--warmup-iters", "2", *flags]))


@pytest.mark.parametrize("flags", [["--compile", "reduce-overhead"], ["--precision", "fp8"],
                                   ["--data", "netcdf"], ["--global-batch-size", "0"]])
def test_values_outside_the_choices_are_refused_by_the_parser(flags):
    with pytest.raises(BenchmarkInputError):
        parsed(*flags)


def test_a_batch_the_devices_cannot_split_is_refused():
    with pytest.raises(BenchmarkInputError, match="global batch size 4 does not divide by 3"):
        config.check_placement(parsed(), 3, torch.device("cpu"))


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_gpu_only_precisions_are_refused_on_a_cpu(precision):
    with pytest.raises(BenchmarkInputError, match=f"precision {precision} needs a GPU"):
        config.check_placement(parsed("--precision", precision), 1, torch.device("cpu"))


def test_bf16_is_valid_on_a_cpu():
    config.check_placement(parsed("--precision", "bf16"), 2, torch.device("cpu"))
