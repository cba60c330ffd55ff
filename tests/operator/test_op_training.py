"""The model and its step: neuraloperator's FNO with the suite's spectral
layer computing what neuraloperator's computes, the FFTs kept in fp32 under
AMP, the counted FLOPs, and the training loss falling on the generated
Navier-Stokes data."""

import statistics

import pytest
import torch
from neuralop.models import FNO

from operator_benchmark import data, flops, fno_training, model, navier_stokes, problems

CPU = torch.device("cpu")


def plain_fno(p: problems.Problem) -> torch.nn.Module:
    return FNO(n_modes=p.modes, in_channels=p.in_fields, out_channels=p.out_fields,
               hidden_channels=p.width, n_layers=p.layers)


@pytest.mark.parametrize("name", ["pic1d-small", "rbc2d-small", "rbc3d-small"])
def test_the_suites_fno_computes_what_neuraloperators_does(name):
    p = problems.get(name)
    ours, plain = model.build(p, CPU), plain_fno(p)
    ours.load_state_dict(plain.state_dict())  # the same parameters, by name
    x = torch.randn(2, p.in_fields, *p.grid)
    torch.testing.assert_close(ours(x), plain(x), rtol=1e-5, atol=1e-6)
    ours(x).square().mean().backward()
    plain(x).square().mean().backward()
    for (name_, a), b in zip(ours.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name_)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_compile_traces_the_suites_fno_whole_but_not_neuraloperators():
    # neuraloperator's contraction goes through opt_einsum, which dynamo
    # cannot trace: the whole forward would fall back to eager
    p = problems.get("rbc2d-small")
    x = torch.randn(2, p.in_fields, *p.grid)
    torch._dynamo.reset()
    assert torch._dynamo.explain(model.build(p, CPU))(x).graph_break_count == 0
    torch._dynamo.reset()
    assert torch._dynamo.explain(plain_fno(p))(x).graph_break_count > 0
    torch._dynamo.reset()


def test_under_bf16_autocast_the_spectral_convolutions_run_in_fp32():
    p = problems.get("rbc2d-small")
    net = model.build(p, CPU)
    seen = []
    for conv in net.fno_blocks.convs:
        conv.register_forward_hook(lambda mod, inputs, out: seen.append(out.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(torch.randn(2, p.in_fields, *p.grid))
    assert seen == [torch.float32] * p.layers
    assert out.dtype == torch.bfloat16  # the pointwise projection is autocast


def test_the_counted_flops_leave_out_the_ffts_and_grow_with_the_grid():
    p = problems.get("rbc2d-small")
    net = model.build(p, CPU)
    counted = flops.counted_per_sample(net, p, CPU)
    assert all(param.grad is None for param in net.parameters())
    bigger = problems.Problem("wide", "", (p.grid[0] * 2, p.grid[1]), p.in_fields,
                              p.out_fields, p.modes, p.width, p.layers)
    # the pointwise layers dominate and scale with the points
    assert 1.8 * counted < flops.counted_per_sample(model.build(bigger, CPU), bigger, CPU) \
        < 2.2 * counted
    with torch.utils.flop_counter.FlopCounterMode(display=False) as counter:
        model.loss(net(torch.zeros(1, p.in_fields, *p.grid)),
                   torch.zeros(1, p.out_fields, *p.grid)).backward()
    ops = {str(op) for op in counter.get_flop_counts()["Global"]}
    assert not any("fft" in op for op in ops)  # FlopCounterMode has no FFT formula
    assert counter.get_total_flops() == counted


# Bounded: the loss is compared after a fixed number of steps, seeded.
STEPS = 40
WINDOW = 10


@pytest.fixture(scope="module")
def navier_stokes_data(tmp_path_factory):
    setup = navier_stokes.Setup(grid=32, samples=64, seed=0)
    inputs, outputs = navier_stokes.load_or_make(setup, CPU, tmp_path_factory.mktemp("ns"))
    return inputs / setup.amplitude, outputs / setup.amplitude


def test_the_loss_falls_when_training_on_the_generated_navier_stokes_data(
        single_cpu, navier_stokes_data):
    inputs, outputs = navier_stokes_data
    torch.manual_seed(0)
    net = model.build(problems.get("navier_stokes2d-small"), CPU)
    step = fno_training.adam_step(net, fno_training.adam(net, 3e-3, 0.0), "fp32", CPU)
    source = data.shards(inputs, outputs, 8, single_cpu, seed=0)
    losses = [float(step(*next(source))) for _ in range(STEPS)]
    first, last = statistics.fmean(losses[:WINDOW]), statistics.fmean(losses[-WINDOW:])
    assert last < 0.5 * first, losses
    # and below copying the input through: the model learnt some of the dynamics
    copy_error = float((outputs - inputs).square().mean())
    assert last < 0.8 * copy_error, (last, copy_error)


def test_each_rank_takes_its_own_share_in_a_new_order_each_epoch(single_cpu):
    inputs = torch.arange(12.0).reshape(12, 1, 1, 1)
    source = data.shards(inputs, -inputs, 4, single_cpu, seed=0)
    epoch1 = torch.cat([next(source)[0] for _ in range(3)]).flatten().tolist()
    epoch2 = torch.cat([next(source)[0] for _ in range(3)]).flatten().tolist()
    assert sorted(epoch1) == sorted(epoch2) == [float(i) for i in range(12)]
    assert epoch1 != epoch2
    x, y = next(source)
    assert torch.equal(y, -x)


def test_synthetic_batches_are_made_once_and_cycled():
    p = problems.get("pic1d-small")
    source = data.synthetic(p, 3, CPU, seed=0)
    batches = [next(source) for _ in range(data.SYNTHETIC_POOL + 1)]
    assert batches[0][0].shape == (3, p.in_fields, *p.grid)
    assert batches[0][1].shape == (3, p.out_fields, *p.grid)
    assert batches[-1][0] is batches[0][0]
