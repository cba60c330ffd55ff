"""A venv made on a node's own torch never gets another torch: the node's
torch here is a module build, 2.6.0a0, which megatron-core's
`torch>=2.6.0` does not accept, and the package folder offers PyPI's torch
2.13.0, which plain pip would take. The lock's other packages come with
their hashes checked; what only the framework needs stays out."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

from tests.setup.wheels import installed, lock_entry, wheel

ROOT = Path(__file__).resolve().parents[2]


def _pip(python: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          env=env, capture_output=True, text=True, timeout=300)


def _node_torch(python: Path, lock: Path, wheels: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(ROOT / "aux/node_torch.py"), "-r", str(lock), "--",
                           "--no-index", "--find-links", str(wheels)],
                          env=env, capture_output=True, text=True, timeout=300)


def _site(env_dir: Path) -> Path:
    return next((env_dir / "lib").glob("python3*/site-packages"))


def test_the_nodes_torch_is_kept_and_what_only_it_needs_stays_out(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    megatron = wheel(wheels, "megatron-core", "0.16.1", ["torch>=2.6.0", "fakeneed>=1"])
    fakeneed = wheel(wheels, "fakeneed", "1.0")
    plain = wheel(wheels, "plainpkg", "2.0")
    torch = wheel(wheels, "torch", "2.13.0", ["nvidia-fake"])
    cuda = wheel(wheels, "nvidia-fake", "13.0")
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    lock = tmp_path / "main.txt"
    lock.write_text("# lock\n" + lock_entry("fakeneed", "1.0", [fakeneed], via=("megatron-core",))
                    + lock_entry("megatron-core", "0.16.1", [megatron])
                    + lock_entry("nvidia-fake", "13.0", [cuda], via=("torch",))
                    + lock_entry("plainpkg", "2.0", [plain])
                    + lock_entry("otherarch", "1.0", [plain], marker="platform_machine == 'none'")
                    + lock_entry("torch", "2.13.0", [torch],
                                 via=("megatron-core", "caraml (pyproject.toml)")))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # pip of the test's own Python, and the node's torch, as a module puts them
    env = _env(module_site)

    # the trap is real: plain pip replaces the node's torch
    trap = _pip(python, "install", "--dry-run", "--no-index", "--find-links", str(wheels),
                "megatron-core", env=env)
    assert "torch-2.13.0" in trap.stdout, trap.stdout + trap.stderr

    done = _node_torch(python, lock, wheels, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in _site(env_dir).glob("*.dist-info")) == [
        "fakeneed-1.0.dist-info", "megatron_core-0.16.1.dist-info", "plainpkg-2.0.dist-info"]
    torch_now = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                               env=env, capture_output=True, text=True, timeout=60)
    assert torch_now.stdout.strip() == "2.6.0a0"
    assert "keeping this node's torch 2.6.0a0" in done.stdout
    assert "--require-hashes" in done.stdout
    written = (env_dir / "caraml-node-requirements.txt").read_text()
    assert "torch==" not in written and "nvidia-fake" not in written and "otherarch" not in written


def test_the_nodes_own_packages_stay_unless_an_installed_one_rejects_them(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    megatron = wheel(wheels, "megatron-core", "0.16.1", ["torch>=2.6.0", "nodenumpy>=1", "nodeyaml>=6"])
    numpy2 = wheel(wheels, "nodenumpy", "2.0")
    yaml6 = wheel(wheels, "nodeyaml", "6.0")
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    installed(module_site, "nodenumpy", "1.5")  # what the node's torch came with, accepted
    installed(module_site, "nodeyaml", "5.0")  # not accepted by megatron-core
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("megatron-core", "0.16.1", [megatron])
                    + lock_entry("nodenumpy", "2.0", [numpy2], via=("megatron-core",))
                    + lock_entry("nodeyaml", "6.0", [yaml6], via=("megatron-core",)))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    done = _node_torch(env_dir / "bin/python", lock, wheels, _env(module_site))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in _site(env_dir).glob("*.dist-info")) == [
        "megatron_core-0.16.1.dist-info", "nodeyaml-6.0.dist-info"]
    assert "the lock's versions of nodeyaml: the node's are not accepted" in done.stdout, done.stdout


def test_a_file_that_does_not_match_the_locks_hash_stops_the_install(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    locked = wheel(tmp_path, "plainpkg", "2.0")
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("plainpkg", "2.0", [locked]))
    # the folder's file of that name and version is another one
    wheel(wheels, "plainpkg", "2.0", ["fakeneed"])
    module_site = tmp_path / "module-site"
    installed(module_site, "torch", "2.6.0a0")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    done = _node_torch(env_dir / "bin/python", lock, wheels, _env(module_site))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DO NOT MATCH THE HASHES" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "[caraml setup] ERROR: pip stopped (above) while keeping this node's torch 2.6.0a0")
    assert not list(_site(env_dir).glob("plainpkg*"))


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
