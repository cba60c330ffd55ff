"""platform.xml as Python sees it (caraml/login/systems.py) and the checks
before submission (caraml/login/preflight.py, llm_training/layout_check.py),
without JUBE."""

from __future__ import annotations

import textwrap

import pytest

from caraml import device_peaks
from caraml.job import node_energy
from caraml.login import jobplan, preflight, systems
from llm_training import layout_check
from tests.systems.conftest import MULTINODE_TEST_SYSTEMS, SYSTEMS


def test_every_paper_system_is_a_tag_with_the_papers_figures():
    loaded = systems.load()
    assert list(loaded) == ["CPU", "LOCAL", *SYSTEMS, *MULTINODE_TEST_SYSTEMS]
    for tag, e in SYSTEMS.items():
        s = loaded[tag]
        assert s["system_description"] and s["partition"] == (e.partition or "")
        assert (s.device_kind, int(s["devices_per_node"]), s.nodes_available) == \
            (e.kind, e.devices, e.nodes_available)
        assert s["peak_tflops"] == e.peak_tflops
        assert float(s["tdp_w"]) == pytest.approx(e.tdp_w)
        assert s["energy_methods"].split() == e.energy.split()
        assert f"caraml_{s.container}.sif" == e.image
        assert s["device_unit"]


def test_mi250_counts_gcds_and_keeps_mfu_honest():
    """The node shows 8 GCDs; per GCD the peak and TDP are half a module's."""
    mi250 = systems.load()["MI250"]
    assert mi250["devices_per_node"] == "8" and mi250["device_unit"].startswith("GCD")
    assert device_peaks.PEAKS[mi250["peak_tflops"]].tflops * 2 == pytest.approx(362.1)
    assert float(mi250["tdp_w"]) * 2 == pytest.approx(560)


def _platform(tmp_path, blocks: str):
    path = tmp_path / "platform.xml"
    path.write_text('<jube><parameterset name="systemParameter">'
                    '<parameter name="system_name">NONE</parameter>'
                    '<parameter name="gres"></parameter>' + blocks + "</parameterset></jube>")
    return path


def test_a_shared_block_reaches_each_of_its_systems(tmp_path):
    """A parameter tagged A|B, as JUBE reads it, belongs to both systems."""
    loaded = systems.load(_platform(tmp_path, """
        <parameter tag="A|B|C" name="gres">gpu:4</parameter>
        <parameter tag="A" name="system_name">A</parameter>
        <parameter tag="B" name="system_name">B</parameter>
        <parameter tag="C" name="system_name">C</parameter>
        <parameter tag="D" name="system_name">D</parameter>"""))
    assert list(loaded) == ["A", "B", "C", "D"]
    assert [loaded[t]["gres"] for t in "ABCD"] == ["gpu:4", "gpu:4", "gpu:4", ""]


def test_a_systems_own_value_overrides_the_shared_one(tmp_path):
    loaded = systems.load(_platform(tmp_path, """
        <parameter tag="A|B" name="gres">gpu:4</parameter>
        <parameter tag="A" name="system_name">A</parameter>
        <parameter tag="A" name="gres">gpu:8</parameter>
        <parameter tag="B" name="system_name">B</parameter>"""))
    assert (loaded["A"]["gres"], loaded["B"]["gres"]) == ("gpu:8", "gpu:4")


def test_the_jsc_nvidia_systems_share_their_block():
    """The shared block of platform.xml holds what A100, H100 and WAIH100
    have in common; what differs stays in each system's own block."""
    loaded = systems.load()
    for tag in ("A100", "H100", "WAIH100"):
        s = loaded[tag]
        assert (s["gres"], s["launcher"], s["master_addr_suffix"], s["env_setup"]) == \
            ("gpu:4", "torchrun-jsc", "i", "${jsc_ib_env}")
    assert [loaded[t]["cpus_per_task"] for t in ("A100", "H100", "WAIH100")] == ["128", "72", "64"]


def test_jedi_and_jupiter_share_the_booster_node_design():
    """JUPITER's nodes are JEDI's design: everything but the name, the
    partition and the node count is written once, in the JEDI|JUPITER block."""
    loaded = systems.load()
    jedi, jupiter = loaded["JEDI"].params, loaded["JUPITER"].params
    own = {"system_name", "system_description", "partition", "nodes_available"}
    assert {name for name in jedi if jedi[name] != jupiter[name]} == own
    assert (jupiter["energy_scope"], jupiter["device_unit"]) == \
        ("module", "GH200 superchip (Grace CPU and H100 GPU)")


def test_gb200_measures_and_names_the_gpus_only():
    """NVML's power on Blackwell is the GPU board's; the Grace CPUs are in no
    figure, and the headline's scope and the device unit say so."""
    gb200 = systems.load()["GB200"]
    assert gb200["energy_methods"].split() == ["pynvml"] and gb200["energy_scope"] == "gpu"
    assert "Grace CPUs are outside" in gb200["device_unit"]
    assert device_peaks.PEAKS[gb200["peak_tflops"]].tflops == pytest.approx(5000 / 2)


def test_every_system_declares_its_node_meter_as_slurm_names_it():
    meters = {tag: s["node_meter"] for tag, s in systems.load().items()}
    assert all(meter == "none" or meter in node_energy.PLUGIN_SCOPES for meter in meters.values()), meters
    # none is known to meter its nodes, as docs/systems.md says
    assert set(meters.values()) == {"none"}


def test_hosts_measure_or_look_up_their_peak():
    loaded = systems.load()
    assert (loaded["MI300X"]["peak_tflops"], loaded["MI300A"]["peak_tflops"]) == ("MI300X", "MI300A")
    assert loaded["CPU"]["peak_tflops"] == "measure"
    assert loaded["LOCAL"]["peak_tflops"] == "auto"


def test_every_container_has_its_definition(root):
    for tag, s in systems.load().items():
        if s.container:
            assert (root / "containers" / f"{s.container}.def").is_file(), tag


@pytest.fixture
def run_config(tmp_path):
    def write(*tags: str):
        path = tmp_path / "configuration.xml"
        path.write_text("<jube><selection>" + "".join(f"<tag>{t}</tag>" for t in tags)
                        + "</selection></jube>")
        return path
    return write


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "llm_training" / "bench.yaml"
    path.parent.mkdir()
    path.write_text(textwrap.dedent("""\
        - {name: model_size, tag: 13B, _: 13B}
        - {name: x, tag: "dryrun|container", _: y}
    """))
    return path


@pytest.fixture(autouse=True)
def exported(monkeypatch, tmp_path):
    """What JUBE exports to the step that runs the pre-flight."""
    for name in preflight.EXPORTED:
        monkeypatch.setenv(name, str(tmp_path))


def run(capsys, run_config, script, tags, *args):
    code = preflight.main(["--run-config", str(run_config(*tags)), "--script", str(script),
                           *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_step_continued_without_jubes_exported_variables_says_so(capsys, run_config, script,
                                                                    monkeypatch):
    monkeypatch.delenv("CARAML_RUNDIR")
    code, _, err = run(capsys, run_config, script, ["CPU"], "--system", "CPU")
    assert code == 2
    assert err.startswith("CARAML ERROR: this step runs without CARAML_RUNDIR: JUBE continued a "
                          "work package that an interrupted `jube run` had started")
    assert err.count("\n") == 1


def test_unknown_system_names_the_system_tags(capsys, run_config, script):
    code, _, err = run(capsys, run_config, script, ["B200"], "--system", "NONE")
    assert code == 2
    assert err.startswith("CARAML ERROR: unknown tag B200; systems: CPU; LOCAL; A100; H100")


def test_missing_image_names_the_tag_that_builds_it(capsys, run_config, script, tmp_path,
                                                     monkeypatch):
    monkeypatch.setattr(jobplan, "ROOT", tmp_path)
    image = tmp_path / "containers" / "caraml_nvidia_x86.sif"
    image.parent.mkdir()
    args = ["--system", "A100", "--devices-per-node", "4", "--container-name", "nvidia_x86"]
    code, _, err = run(capsys, run_config, script, ["A100"], *args)
    assert code == 2
    assert ("jube run llm_training/bench.yaml --tag container A100 "
            "(definition containers/nvidia_x86.def)") in err
    # a dry run does not need the image
    assert run(capsys, run_config, script, ["A100", "dryrun"], *args, "--dry-run")[0] == 0
    image.write_bytes(b"sif")
    assert run(capsys, run_config, script, ["A100"], *args)[0] == 0


def test_the_asked_batch_and_precision_are_the_drivers(capsys):
    """What a row that never ran shows: the layout's global batch and the size's precision."""
    def asked(*args):
        assert layout_check.main(["--system", "JEDI", *args]) == 0
        return capsys.readouterr().out

    assert asked("--model-size", "117M", "--devices-per-node", "4", "--asked", "global_batch") == "32"
    assert asked("--model-size", "800M", "--devices-per-node", "4", "--asked", "global_batch") == "512"
    assert asked("--model-size", "13B", "--nodes", "44", "--devices-per-node", "4",
                 "--asked", "global_batch") == "5632"
    assert asked("--model-size", "117M", "--global-batch-size", "64", "--devices-per-node", "4",
                 "--asked", "global_batch") == "64"
    # a layout that does not fit: nothing asked; the check itself fails the row
    assert asked("--model-size", "175B", "--asked", "global_batch") == ""
    assert [asked("--model-size", size, "--asked", "precision")
            for size in ("cpu-small", "800M", "175B")] == ["fp32", "fp16", "bf16"]


def test_the_jsc_systems_refuse_a_job_without_an_account():
    required = {tag for tag, s in systems.load().items() if s["account_required"] == "yes"}
    assert required == {"A100", "H100", "WAIH100", "GH200", "JEDI", "JUPITER", "MI250", "GC200"}


def test_layout_line_and_impossible_layouts(capsys):
    def check(*args):
        code = layout_check.main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    ok = check("--system", "A100", "--nodes", "44", "--devices-per-node", "4",
               "--model-size", "13B")
    assert ok[0] == 0
    assert ok[1].strip() == ("CARAML layout: system=A100 nodes=44 devices=176 tp=2 pp=2 dp=44 "
                             "micro_batch=2 global_batch=5632 microbatches=64")
    code, _, err = check("--system", "GH200", "--nodes", "1", "--model-size", "175B")
    assert code == 2
    assert err.strip() == ("CARAML ERROR: 175B on GH200: 1 node x 1 device = 1: tensor x "
                           "pipeline parallel size 8 x 8 = 64 does not divide the 1 devices")
    code, _, err = check("--system", "A100", "--nodes", "1", "--devices-per-node", "4",
                         "--model-size", "800M", "--global-batch-size", "20")
    assert code == 2 and "global batch size 20 is not divisible by micro-batch size 4" in err


def test_node_count_beyond_the_partition_fails(capsys, run_config, script):
    code, _, err = run(capsys, run_config, script, ["MI250", "13B"], "--system", "MI250",
                       "--nodes", "44", "--devices-per-node", "8",
                       "--nodes-set-by", "the 13B layout", "--dry-run")
    assert code == 2
    assert ("MI250 has 2 nodes (nodes_available in platform.xml) and the job asks for 44 "
            "(the 13B layout)") in err


def test_device_kinds_and_container_builds(capsys, run_config, script):
    code, _, err = run(capsys, run_config, script, ["GC200"], "--system", "GC200",
                       "--kinds", "cpu", "cuda", "rocm", "--other-script", "x/ipu.yaml",
                       "--dry-run")
    assert code == 2 and err.strip() == ("CARAML ERROR: GC200 (ipu devices) is not run by "
                                         "bench.yaml; use x/ipu.yaml")
    code, _, err = run(capsys, run_config, script, ["CPU", "container"], "--system", "CPU",
                       "--build-container")
    assert code == 2 and "CPU has no container" in err
    # building checks no layout and no image
    assert run(capsys, run_config, script, ["H100", "container"], "--system", "H100",
               "--nodes", "44", "--container-name", "nvidia_x86", "--build-container")[0] == 0


def test_pipelined_models_need_their_devices(capsys, run_config, script):
    code, _, err = run(capsys, run_config, script, ["GC200"], "--system", "GC200",
                       "--devices-per-node", "2", "--devices-needed", "4", "--dry-run")
    assert code == 2 and "needs 4 devices" in err and "has 2" in err


def test_the_llm_script_takes_each_sizes_node_count_from_model_sizes(root):
    """model_sizes.py holds a size's node count; the JUBE script applies it
    under the tags of exactly the sizes that have one."""
    from llm_training.model_sizes import SIZES

    script = preflight.load_yaml_script(root / "llm_training" / "llm_benchmark_nvidia_amd.yaml")
    [system_set] = [p for p in script["parameterset"] if p["name"] == "systemParameter"]
    [nodes] = [p for p in system_set["parameter"] if p["name"] == "nodes"]
    assert set(nodes["tag"].split("|")) == {name for name, size in SIZES.items() if size.nodes}
    assert (nodes["mode"], nodes["_"]) == \
        ("shell", "${expand_tool} -m llm_training.model_sizes nodes ${model_size}")


def test_both_llm_scripts_take_the_shared_steps(root):
    """The steps are written once (llm_steps.yaml); the tags they use count
    as declared for the pre-flight of either script."""
    steps = preflight.load_yaml_script(root / "llm_training" / "llm_steps.yaml")["step"]
    for name in ("llm_benchmark_nvidia_amd.yaml", "llm_benchmark_ipu.yaml"):
        script = root / "llm_training" / name
        assert preflight.load_yaml_script(script)["step"] == steps
        assert "!container" in preflight._tag_expressions(script)
