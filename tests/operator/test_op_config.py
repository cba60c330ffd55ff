"""The operator driver's options: defaults and the rules that turn bad
input into one line before training."""

import pytest
import torch

from caraml.node import data_parallel
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
    (["--precision", "fp16"], "precision fp16 needs a gradient scaler and torch's cannot unscale "
                              "the FNO's complex spectral weights; use bf16"),
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
        data_parallel.check_placement(parsed(), 3, torch.device("cpu"))


def test_tf32_is_refused_on_a_cpu():
    with pytest.raises(BenchmarkInputError, match="precision tf32 needs a GPU"):
        data_parallel.check_placement(parsed("--precision", "tf32"), 1, torch.device("cpu"))


def test_the_reason_fp16_is_refused_still_holds():
    # torch's gradient scaler cannot unscale a complex gradient (the same
    # kernel family on GPUs); where a torch version can, fp16 may be offered
    weight = torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))
    optimizer = torch.optim.Adam([weight])
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((weight.abs() ** 2).sum()).backward()
    with pytest.raises(NotImplementedError, match="ComplexFloat"):
        scaler.step(optimizer)


def test_bf16_is_valid_on_a_cpu():
    data_parallel.check_placement(parsed("--precision", "bf16"), 2, torch.device("cpu"))


def test_list_problems_prints_every_problem_and_trains_nothing(capsys):
    from operator_benchmark.fno_training import main

    assert main(["--list-problems"]) == 0
    assert capsys.readouterr().out.split() == problems.names()
