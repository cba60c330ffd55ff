"""Derived figures from row.json files against values computed by hand:
figures taken from the row, the best configuration, ratios like for like
only (refused with a reason across scopes, windows and MFU bases), time and
energy to solution only for representative configurations, scaling."""

from __future__ import annotations

import pytest

from caraml.benchmarks import LLM_PARAMETERS
from caraml.compare import figures
from caraml.compare.jobs import Jobs
from tests.compare import rowfixtures as fx


def _load(tmp_path, **systems):
    args = [f"{name}={fx.write_run(tmp_path, name, data)}" for name, data in systems.items()]
    return figures.mark_best(fx.load(args))


def test_figures_come_from_the_row_as_written(tmp_path):
    table = _load(tmp_path, MI250=[fx.mi250()])
    row = table.iloc[0]
    assert (row["benchmark"], row["like"], row["variant"]) == ("llm", "800M bf16 seq 2048", "megatron")
    assert row["per_s_per_device"] == 11077.6 and row["devices"] == 8 and row["device_unit"] == "GCD"
    assert row["per_s_per_node"] == pytest.approx(88620.8)
    assert row["energy_devices"] == 4 and row["energy_scope"] == "gpu" and row["energy_window"] == "timed"
    assert row["work_per_wh"] == pytest.approx(88620.8 * 600 / 330)
    assert (row["peak_tflops"], row["peak_basis"]) == (181.0, "datasheet")


def test_best_is_the_highest_throughput_per_device_per_like_for_like_group(tmp_path):
    table = _load(tmp_path, A=[fx.a100(global_batch=256), fx.a100(global_batch=512, per_s_per_device=21000.0),
                               fx.a100(global_batch=64, config={"sequence_length": 1024},
                                       per_s_per_device=30000.0)])
    best = table[table["best"]].set_index("size")["global_batch"].to_dict()
    # seq 1024 is its own group: faster, but not the best of the seq 2048 rows
    assert best == {2048.0: 512, 1024.0: 64}


def test_ratios_within_one_scope_and_refusals_across_scopes_bases_and_energy_devices(tmp_path):
    table = _load(tmp_path, A100=[fx.a100()], GH200=[fx.gh200()], MI250=[fx.mi250()],
                  B=[fx.a100(per_s_per_device=25000.0, timed_wh=280.0, basis="measured-matmul")])
    table = figures.add_ratios(table, "A100").set_index("system")
    # a superchip and a GPU card: the same package unit, not the same device unit
    assert table.loc["GH200", "per_s_per_package_ratio"] == pytest.approx(47505 / 19390)
    assert table.loc["GH200", "per_s_per_device_ratio"] != table.loc["GH200", "per_s_per_device_ratio"]
    # module scope against GPU scope: never divided, one line says why
    assert table.loc["GH200", "work_per_wh_ratio"] != table.loc["GH200", "work_per_wh_ratio"]
    assert "energy not divided: GH200 counts scope module, A100 scope gpu" in table.loc["GH200", "ratio_note"]
    # same scope: divided; the same MFU basis: divided
    assert table.loc["MI250", "work_per_wh_ratio"] == \
        pytest.approx((88620.8 * 600 / 330) / (77560 * 600 / 240))
    assert table.loc["MI250", "mfu_ratio"] == pytest.approx(1.0)
    # power per device: 4 cards for 8 GCDs against 4 GPUs for 4 GPUs
    assert "power per device not divided: MI250 measures 4 energy devices for 8 GCDs" \
        in table.loc["MI250", "ratio_note"]
    assert table.loc["B", "mfu_ratio"] != table.loc["B", "mfu_ratio"]
    assert "MFU not divided: B against a measured-matmul peak, A100 against a datasheet peak" \
        in table.loc["B", "ratio_note"]
    assert table.loc["B", "work_per_wh_ratio"] == pytest.approx((100000 * 600 / 280) / (77560 * 600 / 240))


def test_a_different_energy_window_is_refused(tmp_path):
    run_window = fx.a100(energy={"headline_window": "run"})
    table = figures.add_ratios(_load(tmp_path, A100=[fx.a100()], C=[run_window]), "A100").set_index("system")
    assert "C over the run window, A100 over the timed window" in table.loc["C", "ratio_note"]


def test_the_headline_has_one_line_per_system_and_group_and_keeps_a_failed_system(tmp_path):
    table = _load(tmp_path, A100=[fx.a100(global_batch=256), fx.a100()], GH200=[fx.gh200()],
                  CPU=[fx.cpu_matmul()], H100=[fx.failed(reason="CUDA out of memory")])
    head, refused = figures.headline(figures.add_ratios(table, "A100"), "A100")
    notes = [str(r) for r in refused]
    assert head[["system", "like", "state"]].values.tolist() == [
        ["A100", "800M bf16 seq 2048", "ok"], ["GH200", "800M bf16 seq 2048", "ok"],
        ["CPU", "cpu-small fp32 seq 256", "ok"], ["H100", "800M bf16 seq 2048", "failed"]]
    assert head.set_index("system").loc["H100", "reason"] == "CUDA out of memory"
    assert "llm cpu-small fp32 seq 256: no ratios: A100 has no row of this configuration" in notes
    assert any(n.startswith("llm 800M bf16 seq 2048: energy not divided: GH200") for n in notes)


def test_time_and_energy_to_solution_for_the_papers_model_only(tmp_path):
    table = _load(tmp_path, A100=[fx.a100()], CPU=[fx.cpu_matmul(), fx.cpu_image()])
    sol = figures.time_and_energy_to_solution(table, Jobs())
    one = sol[sol["case"].str.startswith("one node")].set_index(["system", "benchmark"])
    tokens = 20 * 908_759_040
    assert one.loc[("A100", "llm"), "time_h"] == pytest.approx(tokens / 77560 / 3600)
    assert one.loc[("A100", "llm"), "energy_kwh"] == pytest.approx(tokens / (77560 * 600 / 240) / 1000)
    assert one.loc[("A100", "llm"), "energy_basis"] == "timed iterations"
    assert "energy measured, scope gpu" in one.loc[("A100", "llm"), "label"]
    # cpu-small and resnet18 at 64 px stand for no real training
    for key in (("CPU", "llm"), ("CPU", "image")):
        assert one.loc[key, "time_h"] == "not representative" == one.loc[key, "energy_kwh"]
    # a fixed token count takes any LLM model
    fixed = figures.time_and_energy_to_solution(table, Jobs(llm_tokens=1e9))
    cpu = fixed[(fixed["system"] == "CPU") & (fixed["benchmark"] == "llm")].iloc[0]
    assert cpu["time_h"] == pytest.approx(1e9 / 1842.1 / 3600)


def test_image_job_is_90_imagenet_epochs_for_resnet50_at_224(tmp_path):
    table = _load(tmp_path, A=[fx.row("A100", "image", per_s_per_device=1000.0, timed_wh=20.0)])
    one = figures.time_and_energy_to_solution(table, Jobs()).iloc[0]
    assert one["time_h"] == pytest.approx(90 * 1_281_167 / 4000 / 3600)


def test_the_fastest_node_count_uses_the_highest_total(tmp_path):
    table = _load(tmp_path, A=[fx.a100(), fx.a100(nodes=4, devices=16, per_s_per_device=18000.0)])
    sol = figures.time_and_energy_to_solution(table, Jobs(llm_tokens=1.44e9)).set_index("case")
    assert sol.loc["one node (best configuration)", "time_h"] == pytest.approx(1.44e9 / 77560 / 3600)
    assert sol.loc["fastest measured (4 nodes)", "time_h"] == pytest.approx(1.44e9 / 288000 / 3600)


def test_strong_and_weak_scaling_efficiency_against_the_smallest_run(tmp_path):
    table = _load(tmp_path, A=[
        fx.a100(devices=4, global_batch=256, per_s_per_device=1000.0),
        fx.a100(nodes=2, devices=8, global_batch=256, per_s_per_device=900.0),
        fx.a100(nodes=4, devices=16, global_batch=256, per_s_per_device=750.0),
        fx.a100(devices=4, global_batch=512, per_s_per_device=1100.0),
        fx.a100(nodes=2, devices=8, global_batch=1024, per_s_per_device=1045.0)])
    scaling = figures.scaling_efficiency(table)
    strong = scaling[scaling["scaling"] == "strong"].set_index("devices")["efficiency"]
    assert strong.to_dict() == pytest.approx({4: 1.0, 8: 0.9, 16: 0.75})
    weak = scaling[(scaling["scaling"] == "weak") & (scaling["global_batch"] != 256)]
    assert weak.set_index("devices")["efficiency"].to_dict() == pytest.approx({4: 1.0, 8: 0.95})


def test_the_parameter_counts_are_those_the_llm_benchmark_computes():
    from llm_training.flops import parameter_count
    from llm_training.model_sizes import GPT2_VOCAB_SIZE, SIZES, GPTConfig, padded_vocab_size

    for name, count in LLM_PARAMETERS.items():
        size = SIZES[name]
        vocab = 8192 if name == "cpu-small" else GPT2_VOCAB_SIZE
        cfg = GPTConfig(num_layers=size.num_layers, hidden_size=size.hidden_size,
                        num_attention_heads=size.num_attention_heads,
                        ffn_hidden_size=size.ffn_hidden_size or 4 * size.hidden_size,
                        seq_length=size.seq_length, vocab_size=padded_vocab_size(vocab, size.tensor_parallel))
        assert parameter_count(cfg) == count, name


def test_a_row_without_energy_gets_no_energy_ratio_and_says_so(tmp_path):
    table = figures.add_ratios(_load(tmp_path, A100=[fx.a100()], N=[fx.a100(energy=None)]), "A100")
    row = table.set_index("system").loc["N"]
    assert row["per_s_per_device_ratio"] == pytest.approx(1.0)
    assert row["work_per_wh_ratio"] != row["work_per_wh_ratio"]
    assert row["ratio_note"] == "energy not divided: N has no energy figure"


def test_scaling_runs_give_a_scaling_plot_and_a_heatmap_over_batch_and_devices(tmp_path):

    path = fx.write_run(tmp_path, "a", [
        fx.a100(devices=4, global_batch=256, per_s_per_device=1000.0),
        fx.a100(nodes=2, devices=8, global_batch=256, per_s_per_device=900.0),
        fx.a100(nodes=2, devices=8, global_batch=512, per_s_per_device=950.0)])
    out = tmp_path / "out"
    assert fx.compare([str(path), "--out", str(out), "--no-references"]) == 0
    assert (out / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "heatmap_A100_800M_bf16_seq_2048.png").stat().st_size > 5000
    scaling = (out / "scaling.csv").read_text().splitlines()
    assert "A100,llm,800M bf16 seq 2048,strong,strong at batch 256,256.0,2.0,8.0,4.0,7200.0,0.9" in scaling


def test_power_per_device_is_not_divided_where_a_row_does_not_say_its_energy_devices(tmp_path):
    table = figures.add_ratios(_load(tmp_path, A100=[fx.a100()], N=[fx.a100(energy={"devices": None})]),
                               "A100").set_index("system")
    assert table.loc["N", "work_per_wh_ratio"] == pytest.approx(1.0)
    assert table.loc["N", "power_w_per_device_ratio"] != table.loc["N", "power_w_per_device_ratio"]
    assert table.loc["N", "ratio_note"] == \
        "power per device not divided: N does not say how many energy devices it measured"


def test_a_system_whose_jobs_are_still_queued_says_so_in_the_headline(tmp_path):
    table = _load(tmp_path, A100=[fx.a100()], Q=[fx.row("Q", state="queued", reason="Slurm job 12 pending")])
    head, _ = figures.headline(figures.add_ratios(table, "A100"), "A100")
    line = head.set_index("system").loc["Q"]
    assert (line["state"], line["reason"]) == ("queued", "Slurm job 12 pending")


def test_operator_rows_compare_one_problem_and_one_compile_mode_at_a_time(tmp_path):
    table = _load(tmp_path, A100=[fx.operator(), fx.operator(compile_mode="max-autotune",
                                                             per_s_per_device=120.0)],
                  GH200=[fx.operator("GH200", problem="rbc2d", per_s_per_device=300.0),
                         fx.operator("GH200", per_s_per_device=150.0)])
    head, refused = figures.headline(figures.add_ratios(table, "A100"), "A100")
    notes = [str(r) for r in refused]
    lines = head.set_index(["system", "like"])
    assert sorted(lines.index) == [("A100", "FNO rbc3d fp32 compile max-autotune"),
                                   ("A100", "FNO rbc3d fp32 eager"), ("GH200", "FNO rbc2d fp32 eager"),
                                   ("GH200", "FNO rbc3d fp32 eager")]
    assert lines.loc[("GH200", "FNO rbc3d fp32 eager"), "per_s_per_device_ratio"] == \
        pytest.approx(150.0 / 80.0)
    assert lines.loc[("GH200", "FNO rbc3d fp32 eager"), "unit"] == "samples"
    # another problem, or the compiled model, is never divided by the eager rbc3d row
    assert lines.loc[("GH200", "FNO rbc2d fp32 eager"), "per_s_per_device_ratio"] != \
        lines.loc[("GH200", "FNO rbc2d fp32 eager"), "per_s_per_device_ratio"]
    assert "operator FNO rbc2d fp32 eager: no ratios: A100 has no row of this configuration" in notes


def test_the_operator_job_is_500_epochs_of_the_drivers_epoch_on_rbc3d_only(tmp_path):
    table = _load(tmp_path, A=[fx.operator(), fx.operator(problem="rbc2d"),
                               fx.operator(problem="rbc3d-small", global_batch=4)])
    sol = figures.time_and_energy_to_solution(table, Jobs())
    one = sol[sol["case"].str.startswith("one node")].set_index("like")
    # 4 devices at 80 samples/s each; the timed window: 320 samples/s for 600 s over 60 Wh
    assert one.loc["FNO rbc3d fp32 eager", "time_h"] == pytest.approx(500 * 1024 / 320 / 3600)
    assert one.loc["FNO rbc3d fp32 eager", "energy_kwh"] == \
        pytest.approx(500 * 1024 / (320 * 600 / 60) / 1000)
    assert one.loc["FNO rbc3d fp32 eager", "job"] == "500 epochs of 1 024 samples"
    for like in ("FNO rbc2d fp32 eager", "FNO rbc3d-small fp32 eager"):
        assert one.loc[like, "time_h"] == "not representative"


def test_the_operator_epoch_is_the_drivers():
    from caraml.benchmarks import OPERATOR_SAMPLES_PER_EPOCH
    from operator_benchmark.config import SYNTHETIC_EPOCH

    assert OPERATOR_SAMPLES_PER_EPOCH == SYNTHETIC_EPOCH
