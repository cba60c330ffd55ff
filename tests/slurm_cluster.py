"""A real one-node Slurm cluster on localhost for the tests: munged,
slurmctld and slurmd from the distribution's packages, configured in a
temporary directory and stopped afterwards.

Also usable by hand:  python tests/slurm_cluster.py start DIR  /  stop DIR
(then `export SLURM_CONF=DIR/slurm.conf`)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")


class SlurmUnavailable(RuntimeError):
    pass


def ensure_installed() -> None:
    if all(shutil.which(d) or Path("/usr/sbin", d).exists() for d in DAEMONS):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SlurmUnavailable("slurm-wlm and munge are not installed and this is not a root Debian machine")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", *PACKAGES]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, check=True)
        subprocess.run(cmd, env=env, capture_output=True, check=True)


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalSlurm:
    def __init__(self, root: Path, cpus: int | None = None):
        self.root = Path(root)
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket.2"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, JUBE) needs."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write_config(self) -> None:
        for sub in ("munge", "ctld", "d", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text(f"""\
ClusterName=caraml-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={self.root}/ctld
SlurmdSpoolDir={self.root}/d
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmdPidFile={self.root}/slurmd.pid
SlurmctldLogFile={self.root}/log/slurmctld.log
SlurmdLogFile={self.root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={mem_mb // 2} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout_s: float = 60) -> LocalSlurm:
        ensure_installed()
        self._write_config()
        key = self.root / "munge" / "munge.key"
        subprocess.run([_sbin("mungekey"), "--create", "--force", f"--keyfile={key}"], check=True)
        os.chmod(key, 0o400)
        subprocess.run([_sbin("munged"), "--force", f"--key-file={key}",
                        f"--socket={self.munge_socket}", f"--pid-file={self.root}/munge/munged.pid",
                        f"--log-file={self.root}/log/munged.log",
                        f"--seed-file={self.root}/munge/munged.seed"], check=True)
        subprocess.run([_sbin("slurmctld"), "-f", str(self.conf)], check=True, env=self.env)
        subprocess.run([_sbin("slurmd"), "-f", str(self.conf), "-N", "localhost"], check=True, env=self.env)
        self._wait_idle(timeout_s)
        return self

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                                 capture_output=True, text=True)
            state = out.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise SlurmUnavailable(f"the local Slurm node did not become idle within {timeout_s:.0f} s "
                               f"(state {state!r}); see {self.root}/log")

    def stop(self) -> None:
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            path = self.root / pid_file
            try:
                os.kill(int(path.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                continue
        time.sleep(0.5)

    def wait_for_jobs(self, timeout_s: float) -> None:
        """Returns when the queue is empty."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h"], env=self.env, capture_output=True, text=True)
            if out.returncode == 0 and not out.stdout.strip():
                return
            time.sleep(1)
        raise TimeoutError(f"Slurm jobs still queued or running after {timeout_s:.0f} s")


if __name__ == "__main__":
    action, where = sys.argv[1], Path(sys.argv[2])
    cluster = LocalSlurm(where)
    if action == "start":
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        cluster.stop()
