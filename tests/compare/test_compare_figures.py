"""Derived figures against values computed by hand: per device and per
node, best configuration, ratios, time and energy to solution, scaling."""

from __future__ import annotations

import pytest

from caraml.compare import figures, runs
from caraml.compare.jobs import PARAMETERS, Jobs
from tests.compare.compare_tables import IMAGE_ROW, LLM_ROW, run_dir


def _rows(tmp_path, *specs):
    args = [f"{system}={run_dir(tmp_path, f'{system}_{i}', base, changes)}"
            for i, (system, base, changes) in enumerate(specs)]
    return figures.add_ratios(figures.mark_best(runs.load(args)), specs[0][0])


def test_per_device_and_per_node_figures_use_the_rows_nodes_and_devices(tmp_path):
    rows = _rows(tmp_path, ("X", LLM_ROW, [{"Nodes": 2, "Devices": 8, "Tokens/s": 160000.0,
                                            "Tokens/s/device": 20000.0, "Energy(Wh)": 80.0,
                                            "EnergyByScope(Wh)": "gpu:60+node:80", "EnergyScope": "node"}]))
    row = rows.iloc[0]
    assert row["energy_scope"] == "node"
    assert row["throughput_per_node"] == 80000.0
    assert row["throughput_per_device"] == 20000.0
    assert row["energy_per_node_wh"] == 40.0
    assert row["energy_per_device_wh"] == 10.0  # the table's own column
    assert (row["benchmark"], row["config"]) == ("llm", "800M fp16 megatron")


def test_absent_columns_stay_empty_and_per_device_falls_back_to_total_over_devices(tmp_path):
    path = run_dir(tmp_path, "x", IMAGE_ROW, [{}], drop=("Images/s/device", "Energy/device(Wh)", "Images/Wh"))
    row = runs.load([str(path)]).iloc[0]
    assert row["throughput_per_device"] == 1000.0 and row["energy_per_device_wh"] == 5.0
    assert row["work_per_wh"] != row["work_per_wh"]  # NaN: never invented
    assert row["energy_scope"] == "n/a" and row["system"] == "A100"


def test_best_configuration_is_the_highest_throughput_per_device_and_ratios_match_batch_and_nodes(tmp_path):
    rows = _rows(tmp_path,
                 ("A", IMAGE_ROW, [{"GlobalBatchSize": 256}, {"GlobalBatchSize": 512, "Images/s": 4400.0,
                                                               "Images/s/device": 1100.0}]),
                 ("B", IMAGE_ROW, [{"GlobalBatchSize": 256, "Images/s/device": 1500.0, "Images/Wh": 4000},
                                   {"GlobalBatchSize": 1024, "Images/s/device": 1600.0}]))
    best = rows[rows["best"]].set_index("system")["global_batch"]
    assert best.to_dict() == {"A": 512, "B": 1024}
    b256 = rows[(rows["system"] == "B") & (rows["global_batch"] == 256)].iloc[0]
    assert b256["throughput_per_device_ratio"] == pytest.approx(1.5)
    assert b256["work_per_wh_ratio"] == pytest.approx(0.8)
    # A has no batch 1024: no ratio rather than one against another batch
    b1024 = rows[(rows["system"] == "B") & (rows["global_batch"] == 1024)].iloc[0]
    assert b1024["throughput_per_device_ratio"] != b1024["throughput_per_device_ratio"]


def test_image_time_and_energy_to_solution_for_90_imagenet_epochs(tmp_path):
    rows = _rows(tmp_path, ("A", IMAGE_ROW, [{"Images/s": 4000.0, "Images/Wh": 5000,
                                              "EnergySource": "estimated(estimate)"}]))
    table = figures.time_and_energy_to_solution(rows, Jobs()).set_index("case")
    one = table.loc["one node (best configuration)"]
    images = 90 * 1_281_167
    assert one["work"] == images
    assert one["estimated_time_h"] == pytest.approx(images / 4000 / 3600)  # 8.007 h
    assert one["estimated_energy_kwh"] == pytest.approx(images / 5000 / 1000)  # 23.06 kWh
    assert one["energy_basis"] == "whole run (warm-up included)"
    assert one["estimated_action_kwh_h"] == pytest.approx(images / 5000 / 1000 * images / 4000 / 3600)
    assert "extrapolated" in one["label"] and "energy estimated" in one["label"]


def test_llm_job_is_20_tokens_per_parameter_of_the_rows_params_else_the_sizes_count(tmp_path):
    rows = _rows(tmp_path, ("A", LLM_ROW, [{"Tokens/s": 80000.0}]),
                 ("B", {**LLM_ROW, "Params": 1_000_000_000}, [{"Tokens/s": 100000.0}]))
    table = figures.time_and_energy_to_solution(rows, Jobs())
    one = table[table["case"].str.startswith("one node")].set_index("system")
    assert one.loc["A", "work"] == 20 * PARAMETERS["800M"]
    assert one.loc["A", "estimated_time_h"] == pytest.approx(20 * 908_759_040 / 80000 / 3600)
    assert one.loc["B", "estimated_time_h"] == pytest.approx(20e9 / 100000 / 3600)
    assert one.loc["B", "estimated_energy_kwh"] == pytest.approx(20e9 / 200000 / 1000)
    fixed = figures.time_and_energy_to_solution(rows, Jobs(llm_tokens=1e12))
    assert fixed["work"].unique().tolist() == [1e12]


def test_energy_to_solution_uses_the_timed_window_where_the_table_has_it(tmp_path):
    rows = _rows(tmp_path, ("A", {**IMAGE_ROW, "TimedImages/Wh": 6000}, [{}]))
    one = figures.time_and_energy_to_solution(rows, Jobs()).iloc[0]
    assert one["estimated_energy_kwh"] == pytest.approx(90 * 1_281_167 / 6000 / 1000)
    assert one["energy_basis"] == "timed iterations"


def test_one_node_uses_the_best_rows_rate_per_node_and_fastest_the_highest_total(tmp_path):
    rows = _rows(tmp_path, ("A", LLM_ROW, [
        {"Nodes": 1, "Devices": 4, "Tokens/s": 80000.0, "Tokens/s/device": 20000.0, "Tokens/Wh": 200000},
        {"Nodes": 4, "Devices": 16, "Tokens/s": 288000.0, "Tokens/s/device": 18000.0, "Tokens/Wh": 180000},
    ]))
    table = figures.time_and_energy_to_solution(rows, Jobs(llm_tokens=1.44e9)).set_index("case")
    one = table.loc["one node (best configuration)"]
    assert one["estimated_time_h"] == pytest.approx(1.44e9 / 80000 / 3600)
    fastest = table.loc["fastest measured (4 nodes)"]
    assert fastest["estimated_time_h"] == pytest.approx(1.44e9 / 288000 / 3600)
    assert fastest["estimated_energy_kwh"] == pytest.approx(1.44e9 / 180000 / 1000)
    assert fastest["nodes"] == 4


def test_strong_and_weak_scaling_efficiency_against_the_smallest_run(tmp_path):
    rows = _rows(tmp_path, ("A", IMAGE_ROW, [
        # strong: global batch 256 on 4, 8 and 16 devices
        {"Devices": 4, "GlobalBatchSize": 256, "Images/s": 4000.0, "Images/s/device": 1000.0},
        {"Nodes": 2, "Devices": 8, "GlobalBatchSize": 256, "Images/s": 7200.0, "Images/s/device": 900.0},
        {"Nodes": 4, "Devices": 16, "GlobalBatchSize": 256, "Images/s": 12000.0, "Images/s/device": 750.0},
        # weak: 128 per device on 4 and 8 devices
        {"Devices": 4, "GlobalBatchSize": 512, "Images/s": 4400.0, "Images/s/device": 1100.0},
        {"Nodes": 2, "Devices": 8, "GlobalBatchSize": 1024, "Images/s": 8360.0, "Images/s/device": 1045.0},
    ]))
    table = figures.scaling_efficiency(rows)
    strong = table[table["scaling"] == "strong"].set_index("devices")["efficiency"]
    assert strong.to_dict() == pytest.approx({4: 1.0, 8: 0.9, 16: 0.75})
    weak = table[(table["scaling"] == "weak") & (table["global_batch"] != 256)]
    weak = weak.set_index("devices")["efficiency"]
    assert weak.to_dict() == pytest.approx({4: 1.0, 8: 0.95})


def test_the_parameter_counts_are_those_the_llm_benchmark_computes():
    from llm_training.flops import parameter_count
    from llm_training.model_sizes import GPT2_VOCAB_SIZE, SIZES, GPTConfig, padded_vocab_size

    for name, count in PARAMETERS.items():
        size = SIZES[name]
        vocab = 8192 if name == "cpu-small" else GPT2_VOCAB_SIZE
        cfg = GPTConfig(num_layers=size.num_layers, hidden_size=size.hidden_size,
                        num_attention_heads=size.num_attention_heads,
                        ffn_hidden_size=size.ffn_hidden_size or 4 * size.hidden_size,
                        seq_length=size.seq_length, vocab_size=padded_vocab_size(vocab, size.tensor_parallel))
        assert parameter_count(cfg) == count, name


def test_scaling_runs_give_a_scaling_plot_and_a_heatmap_over_batch_and_devices(tmp_path):
    from caraml.compare import cli

    path = run_dir(tmp_path, "a", IMAGE_ROW, [
        {"Devices": 4, "GlobalBatchSize": 256, "Images/s": 4000.0, "Images/s/device": 1000.0},
        {"Nodes": 2, "Devices": 8, "GlobalBatchSize": 256, "Images/s": 7200.0, "Images/s/device": 900.0},
        {"Nodes": 2, "Devices": 8, "GlobalBatchSize": 512, "Images/s": 7600.0, "Images/s/device": 950.0},
    ])
    out = tmp_path / "out"
    assert cli.main([str(path), "--out", str(out), "--no-references"]) == 0
    assert (out / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "heatmap_A100_image_resnet50_fp16_224px.png").stat().st_size > 5000
    scaling = (out / "comparison_image.md").read_text().split("## Scaling efficiency")[1]
    assert ("| A100 | image | resnet50 fp16 224px | strong | strong at batch 256 "
            "| 256 | 2 | 8 | 4 | 7200 | 0.9 |") in scaling
