"""ReFrame's site configuration, made from platform.xml: every system is
there with its Slurm partition, access and the suite's launcher; a system
added to platform.xml appears without another edit."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.login import systems
from caraml.regression.site import SiteError, site_configuration

ROOT = systems.PLATFORM_XML.parent


def _partitions(config: dict) -> dict[str, dict]:
    return {f"{s['name']}:{p['name']}": p for s in config["systems"] for p in s["partitions"]}


def test_every_slurm_system_of_platform_xml_is_a_reframe_system_with_its_partition_and_launcher():
    config = site_configuration(environ={})
    by_name = {s["name"]: s for s in config["systems"]}
    for tag, system in systems.load().items():
        if system["submit_mode"] == "local":
            continue
        [part] = by_name[tag]["partitions"]
        assert part["name"] == (system["partition"] or "default")
        assert part["scheduler"] == "slurm"
        # the job script runs the system's launcher itself; ReFrame starts it once
        assert part["launcher"] == "local"
        assert part["extras"]["launcher"] == system["launcher"]
        assert part["extras"]["energy_methods"] == system["energy_methods"]
        assert part["extras"]["caraml_tags"] == [tag]
        if system["partition"]:
            assert f"--partition={system['partition']}" in part["access"]


def test_this_hosts_systems_are_the_local_system_and_come_last():
    config = site_configuration(environ={})
    local = config["systems"][-1]
    assert local["name"] == "local" and local["hostnames"] == [".*"]
    assert {p["name"]: p["extras"]["caraml_tags"] for p in local["partitions"]} == {
        "cpu": ["CPU"], "host": ["LOCAL"]}
    assert all(p["scheduler"] == "local" for p in local["partitions"])


def test_account_partition_and_constraint_reach_the_access_options():
    parts = _partitions(site_configuration(environ={"CARAML_ACCOUNT": "proj1",
                                                    "CARAML_REFRAME_PARTITION": "batch"}))
    assert parts["A100:dc-gpu"]["access"] == ["--partition=dc-gpu", "--account=proj1"]
    assert parts["MI300X:default"]["access"] == ["--account=proj1", "--constraint=mi300x"]
    assert parts["slurm-cpu:batch"]["access"] == ["--partition=batch"]
    assert parts["slurm-cpu:batch"]["extras"]["caraml_tags"] == ["CPU", "slurm"]
    assert parts["A100:dc-gpu"]["devices"] == [{"type": "gpu", "arch": "A100", "num_devices": 4}]
    assert parts["A100:dc-gpu"]["container_platforms"] == [{"type": "Apptainer"}]
    assert parts["A100:dc-gpu"]["processor"] == {"num_cpus": 128}


def _platform_with(tmp_path, block: str):
    text = systems.PLATFORM_XML.read_text()
    marker = '<parameter tag="slurm" name="submit_mode">'
    path = tmp_path / "platform.xml"
    path.write_text(text.replace(marker, block + "\n    " + marker, 1))
    return path


def test_a_system_added_to_platform_xml_appears_without_another_edit(tmp_path):
    path = _platform_with(tmp_path, (
        '<parameter tag="NEWSYS" name="system_name">NEWSYS</parameter>'
        '<parameter tag="NEWSYS" name="partition">booster</parameter>'
        '<parameter tag="NEWSYS" name="launcher">srun</parameter>'))
    parts = _partitions(site_configuration(path, environ={}))
    assert parts["NEWSYS:booster"]["extras"]["launcher"] == "srun"


def test_a_tag_reframe_cannot_name_is_one_clear_error(tmp_path):
    path = _platform_with(tmp_path, '<parameter tag="9X" name="system_name">9X</parameter>')
    with pytest.raises(SiteError, match="'9X' cannot name a ReFrame system"):
        site_configuration(path, environ={})


def test_the_config_file_reframe_loads_is_the_generated_one():
    config = runpy.run_path(str(ROOT / "regression" / "config.py"))["site_configuration"]
    assert set(_partitions(config)) == set(_partitions(site_configuration()))
    [handler] = config["logging"][0]["handlers_perflog"]
    for field in ("check_caraml_commit", "check_caraml_torch", "check_caraml_energy_scope",
                  "check_caraml_energy_methods", "check_caraml_energy_kind", "check_caraml_system",
                  "check_caraml_config", "check_perfvalues"):
        assert f"%({field})s" in handler["format"]


def test_reframes_log_goes_where_reframe_was_started_not_into_the_checkout(tmp_path):
    """ReFrame reads the configuration from its own folder (regression/):
    the log's path stays relative to where ReFrame was started, so a run
    without --prefix leaves nothing in the checkout."""
    listed = subprocess.run([str(Path(sys.executable).with_name("reframe")), "-C",
                             str(ROOT / "regression" / "config.py"), "-c",
                             str(ROOT / "regression" / "checks" / "caraml_checks.py"), "-l"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert (tmp_path / "reframe.log").is_file()
    assert f"Log file(s) saved in '{tmp_path / 'reframe.log'}'" in listed.stdout
