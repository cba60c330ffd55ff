"""Argument handling: defaults, and bad input stopping the run with one
CARAML ERROR line before any training."""

import sys

import pytest
import torch

from caraml.node import data_parallel
from caraml.report import BenchmarkInputError
from image_classification import config
from image_classification import image_classification_torch as driver

CPU = torch.device("cpu")


def test_defaults_match_the_documented_cli():
    args = config.parse([])
    assert (args.model, args.data, args.precision, args.device) == (
        "resnet50", "synthetic", "fp32", "auto")
    assert (args.train_iters, args.warmup_iters, args.global_batch_size) == (100, 10, 256)
    assert args.energy_methods == ("auto",)
    assert args.measures_energy
    assert not (args.channels_last or args.compile)


def test_list_models_prints_classification_models_only(capsys):
    assert driver.main(["--list-models"]) == 0
    names = capsys.readouterr().out.split()
    assert {"resnet50", "resnet18", "vit_b_16"} <= set(names)
    assert "fasterrcnn_resnet50_fpn" not in names  # a detection model


def test_unknown_model_names_itself_and_how_to_list_the_valid_ones():
    with pytest.raises(BenchmarkInputError, match=r"'resnet51'.*--list-models"):
        config.check_input(config.parse(["--model", "resnet51"]))


def test_missing_data_path_is_named(tmp_path):
    missing = tmp_path / "imagenet" / "train"
    with pytest.raises(BenchmarkInputError, match=f"data path {missing} does not exist"):
        config.check_input(config.parse(["--data", str(missing)]))


def test_data_path_must_be_a_directory(tmp_path):
    archive = tmp_path / "train.tar"
    archive.write_bytes(b"")
    with pytest.raises(BenchmarkInputError, match="is not a directory"):
        config.check_input(config.parse(["--data", str(archive)]))


@pytest.mark.parametrize("warmup", ["5", "6"])
def test_warmup_must_leave_a_timed_iteration(warmup):
    args = config.parse(["--train-iters", "5", "--warmup-iters", warmup])
    with pytest.raises(BenchmarkInputError, match="leaves no timed iteration"):
        config.check_input(args)


def test_compiling_needs_a_warmup_iteration():
    with pytest.raises(BenchmarkInputError, match="--compile needs --warmup-iters 1"):
        config.check_input(config.parse(["--compile", "--warmup-iters", "0"]))
    config.check_input(config.parse(["--compile", "--warmup-iters", "1"]))


def test_energy_none_stands_alone():
    with pytest.raises(BenchmarkInputError, match="cannot be combined"):
        config.check_input(config.parse(["--energy-methods", "none", "pynvml"]))
    assert not config.parse(["--energy-methods", "none"]).measures_energy


def test_global_batch_must_divide_by_the_device_count():
    args = config.parse(["--global-batch-size", "100", "--precision", "fp32"])
    with pytest.raises(BenchmarkInputError,
                       match="^global batch size 100 does not divide by 3 devices$"):
        data_parallel.check_placement(args, world_size=3, device=CPU)
    data_parallel.check_placement(args, world_size=4, device=CPU)


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_gpu_only_precisions_are_refused_on_cpu(precision):
    args = config.parse(["--precision", precision])
    with pytest.raises(BenchmarkInputError, match=f"precision {precision} needs a GPU"):
        data_parallel.check_placement(args, world_size=1, device=CPU)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cpu_precisions_pass(precision):
    data_parallel.check_placement(config.parse(["--precision", precision]), world_size=1, device=CPU)


@pytest.mark.parametrize("argv, named", [
    (["--train-iters", "0"], "--train-iters"),
    (["--warmup-iters", "-1"], "--warmup-iters"),
    (["--global-batch-size", "many"], "--global-batch-size"),
    (["--exit-duration-in-mins", "0"], "--exit-duration-in-mins"),
    (["--precision", "fp8"], "--precision"),
    (["--device", "tpu"], "--device"),
])
def test_malformed_arguments_give_one_error_line(capsys, argv, named):
    assert driver.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("CARAML ERROR: ") and named in err[0]


@pytest.mark.parametrize("argv, message", [
    (["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
    (["--data", "/nonexistent/imagenet"], "data path /nonexistent/imagenet does not exist"),
])
def test_bad_input_stops_main_before_training(capsys, argv, message):
    assert driver.main(argv + ["--energy-methods", "none"]) != 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith("CARAML ERROR: ") and message in err[0]
    assert "CARAML global" not in captured.out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_asking_for_a_gpu_without_one_is_an_input_error(capsys, tiny_run):
    argv = tiny_run + ["--device", "cuda", "--energy-methods", "none"]  # the last wins
    assert driver.main(argv) != 0
    assert capsys.readouterr().err == (
        "CARAML ERROR: --device cuda: device 'cuda' requested but torch sees no GPU\n")


def test_missing_jpwr_is_an_input_error_that_names_the_way_out(capsys, monkeypatch, tiny_run):
    monkeypatch.setitem(sys.modules, "jpwr.methods", None)  # as if jpwr were not installed
    assert driver.main(tiny_run + ["--energy-methods", "auto"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("CARAML ERROR: --energy-methods auto needs jpwr")
    assert "--energy-methods none" in err

