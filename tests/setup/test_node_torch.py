"""A venv made on a node's own torch never gets another torch: the node's
torch here is a module build, 2.6.0a0, which megatron-core's
`torch>=2.6.0` does not accept, and the package folder offers PyPI's torch
2.13.0, which plain pip would take."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

from wheels import installed, wheel

ROOT = Path(__file__).resolve().parents[2]


def _pip(python: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_nodes_torch_is_kept_and_what_needs_torch_still_installs(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "megatron-core", "0.16.1", ["torch>=2.6.0", "fakeneed>=1"])
    wheel(wheels, "fakeneed", "1.0")
    wheel(wheels, "plainpkg", "2.0")
    wheel(wheels, "torch", "2.13.0")
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    lock = tmp_path / "constraints.txt"
    lock.write_text("# lock\nfakeneed==1.0\nmegatron-core==0.16.1\ntorch==2.13.0\ntriton==3.7.1\n")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # pip of the test's own Python, and the node's torch, as a module puts them
    env = _env(module_site)
    source = ["--no-index", "--find-links", str(wheels)]

    # the trap is real: plain pip replaces the node's torch
    plain = _pip(python, "install", "--dry-run", *source, "megatron-core", env=env)
    assert "torch-2.13.0" in plain.stdout, plain.stdout + plain.stderr

    done = subprocess.run([str(python), str(ROOT / "aux/node_torch.py"), "--constraint", str(lock),
                           "megatron-core==0.16.1", "plainpkg", "--", *source],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert sorted(p.name for p in site.glob("*.dist-info")) == [
        "fakeneed-1.0.dist-info", "megatron_core-0.16.1.dist-info", "plainpkg-2.0.dist-info"]
    torch = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert torch.stdout.strip() == "2.6.0a0"
    assert "keeping this node's torch 2.6.0a0" in done.stdout
    written = (env_dir / "caraml-node-constraints.txt").read_text().splitlines()
    assert "torch==2.6.0a0" in written and "torch==2.13.0" not in written
    assert "triton==3.7.1" not in written and "fakeneed==1.0" in written


def test_the_nodes_own_packages_stay_and_new_ones_come_at_the_locked_version(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "megatron-core", "0.16.1", ["torch>=2.6.0", "nodenumpy>=1", "fakeneed"])
    for version in ("1.0", "2.0"):
        wheel(wheels, "nodenumpy", version)
        wheel(wheels, "fakeneed", version)
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    installed(module_site, "nodenumpy", "1.5")  # what the node's torch came with
    lock = tmp_path / "constraints.txt"
    lock.write_text("nodenumpy==2.0\nfakeneed==1.0\ntorch==2.13.0\n")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    done = subprocess.run([str(env_dir / "bin/python"), str(ROOT / "aux/node_torch.py"),
                           "--constraint", str(lock), "megatron-core", "--",
                           "--no-index", "--find-links", str(wheels)],
                          env=_env(module_site), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert sorted(p.name for p in site.glob("*.dist-info")) == [
        "fakeneed-1.0.dist-info", "megatron_core-0.16.1.dist-info"]


def test_a_package_that_asks_for_another_torch_stops_the_install(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "needsnewtorch", "1.0", ["fakeneed"])
    wheel(wheels, "fakeneed", "1.0", ["torch>=2.13"])  # torch only one level down
    wheel(wheels, "torch", "2.13.0")
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    lock = tmp_path / "constraints.txt"
    lock.write_text("torch==2.13.0\n")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    env = _env(module_site)
    done = subprocess.run([str(env_dir / "bin/python"), str(ROOT / "aux/node_torch.py"),
                           "--constraint", str(lock), "needsnewtorch", "--",
                           "--no-index", "--find-links", str(wheels)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "[caraml setup] ERROR: pip stopped (above) while keeping this node's torch 2.6.0a0")
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert not list(site.glob("torch*"))


def _env(module_site: Path) -> dict:
    """pip sees the node's torch and only the test's package folder (no
    index or find-links of this machine's pip configuration)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PYTHONPATH"] = os.pathsep.join([str(module_site), str(_pip_alone(module_site.parent))])
    return env


def _pip_alone(folder: Path) -> Path:
    """A folder holding only the test's own pip (a link to it): the venv
    gets no pip of its own (creating one costs seconds and is not what is
    tested), and the folder pip comes from must not show pip the packages
    installed beside it, megatron-core among them."""
    import pip

    alone = folder / "pip-alone"
    alone.mkdir(exist_ok=True)
    link = alone / "pip"
    if not link.exists():
        link.symlink_to(Path(pip.__file__).resolve().parent)
    return alone
