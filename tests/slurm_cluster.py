"""Real Slurm clusters for the tests, from the distribution's packages,
configured in a temporary directory and stopped afterwards: one node on
localhost (LocalSlurm), or several nodes on this machine (NamespacedSlurm),
each slurmd in its own network, UTS and mount namespace, so that every node
has its own host name and address, reached over a bridge the cluster makes
and removes, and resolves the node names from a hosts file only its own
processes see.

Also usable by hand:  python tests/slurm_cluster.py start DIR [NODES]  /  stop DIR
(then `export SLURM_CONF=DIR/slurm.conf`)."""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
# Slurm's energy accounting as an HPE Cray EX cluster has it: each node's
# meter read through the pm_counters plugin, and the jobs' steps keeping
# what it read (extra_config; PrologFlags=Contain adds an extern step on
# every node of a job for all of its time)
METER_CONFIG = ("AcctGatherEnergyType=acct_gather_energy/pm_counters\n"
                "JobAcctGatherType=jobacct_gather/linux\n")
# what each node of the tests' metered cluster draws, and its CPU and
# memory domains' shares (tests/conftest.py, metered_slurm2n)
NODE_WATTS = {"cn1": 350.0, "cn2": 650.0}
NODE_PARTS = {"cpu": 0.4, "memory": 0.1}


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
    """One node, named localhost, with all of this machine's CPUs."""

    node_count = 1
    # seconds between the TERM and the KILL of a cancelled job
    kill_wait_s = 10

    def __init__(self, root: Path, cpus: int | None = None, extra_config: str = ""):
        self.root = Path(root)
        self.cpus = cpus or os.cpu_count() or 1
        # slurm.conf lines after the nodes' (partitions, EnforcePartLimits)
        self.extra_config = extra_config
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket.2"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, JUBE) needs."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _controller(self) -> str:
        return "localhost(127.0.0.1)"

    def _nodes_config(self, mem_mb: int) -> str:
        return (f"SlurmdPidFile={self.root}/slurmd.pid\n"
                f"SlurmdSpoolDir={self.root}/d\n"
                f"SlurmdLogFile={self.root}/log/slurmd.log\n"
                f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} "
                f"RealMemory={mem_mb // 2} State=UNKNOWN\n"
                "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n")

    def _write_config(self) -> None:
        for sub in ("munge", "ctld", "d", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text(f"""\
ClusterName=caraml-test
SlurmctldHost={self._controller()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={self.root}/ctld
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmctldLogFile={self.root}/log/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
# 1, not 2: a node a test sets DOWN stays down until the test resumes it (with 2,
# its next registration, which Slurm asks for at times of its own, returns it);
# a node that stopped responding still returns by itself
ReturnToService=1
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait={self.kill_wait_s}
# Jobs take their rendezvous port from their id (29500 + id % 1000,
# aux/job.sh.in): clusters of other test runs on this machine start their
# ids elsewhere, or their jobs would meet in each other's rendezvous
FirstJobId={random.randrange(1000, 1_000_000)}
""" + self._nodes_config(mem_mb) + self.extra_config)

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
        self._start_slurmd()
        self._wait_idle(timeout_s)
        return self

    def _start_slurmd(self) -> None:
        subprocess.run([_sbin("slurmd"), "-f", str(self.conf), "-N", "localhost"], check=True, env=self.env)

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        states: list[str] = []
        while time.monotonic() < deadline:
            # a node of several partitions is listed once for each
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env,
                                 capture_output=True, text=True)
            nodes = dict(line.split() for line in out.stdout.splitlines() if line.strip())
            states = list(nodes.values())
            if len(states) == self.node_count and set(states) == {"idle"}:
                return
            time.sleep(0.5)
        raise SlurmUnavailable(f"the local Slurm nodes did not become idle within {timeout_s:.0f} s "
                               f"(states {states}); see {self.root}/log")

    def _pid_files(self) -> list[Path]:
        return [self.root / "slurmd.pid"]

    def stop(self) -> None:
        for path in [*self._pid_files(), self.root / "slurmctld.pid", self.root / "munge/munged.pid"]:
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

    @contextmanager
    def queue_held(self) -> Iterator[None]:
        """Jobs submitted inside stay in the queue: every node is drained, so
        none can start, and resumed on the way out. (sbatch 22.05 ignores
        SBATCH_HOLD; only --hold holds, which a job script cannot ask for.)"""
        nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], env=self.env, text=True,
                               capture_output=True, check=True).stdout.split()
        names = ",".join(sorted(set(nodes)))
        subprocess.run(["scontrol", "update", f"NodeName={names}", "State=DRAIN",
                        "Reason=held-by-a-test"], env=self.env, check=True)
        try:
            yield
        finally:
            subprocess.run(["scontrol", "update", f"NodeName={names}", "State=RESUME"],
                           env=self.env, check=True)


def require_namespaces() -> None:
    """Raises SlurmUnavailable, with the reason, where this process cannot
    make network and UTS namespaces, bridges and veth pairs."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("a cluster of several nodes on one machine needs root "
                               "(network and UTS namespaces, a bridge)")
    tools = ("ip", "nsenter", "unshare", "mount")
    if not all(map(shutil.which, tools)) and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-qq", "iproute2", "util-linux", "mount"],
                       env=env, capture_output=True)
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        raise SlurmUnavailable(f"a cluster of several nodes needs {' and '.join(missing)}")
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise SlurmUnavailable(f"cannot make network and UTS namespaces here: {probe.stderr.strip()}")


# Inside a node's private mount namespace, with a counters folder ($5): a
# /sys of the host's entries (bound with what is mounted below them, the
# cgroup file system included) and the folder as cray/pm_counters, built in
# $6 and mounted over /sys. sysfs itself cannot take a new folder, and none
# of this reaches the host's namespace.
SYS_WITH_COUNTERS = """if [ -n "$5" ]; then
    for entry in /sys/*; do
        mkdir -p "$6/${entry##*/}" && mount --rbind "$entry" "$6/${entry##*/}" || exit 1
    done
    mkdir -p "$6/cray/pm_counters" && mount --bind "$5" "$6/cray/pm_counters" \\
        && mount --rbind "$6" /sys || exit 1
fi
"""


class NamespacedSlurm(LocalSlurm):
    """Several nodes on this machine, each slurmd in its own network, UTS and
    mount namespace: its own host name (cn1, cn2, ...) and address on a
    private /24 behind a bridge, which slurmctld (in this machine's
    namespace) owns as .1. Node names resolve only inside the nodes, from a
    hosts file bind-mounted over /etc/hosts there. Every process of a job
    lives in its node's namespaces; traffic stays on the bridge."""

    # Slurm's default: a cancelled two-node job has the time to stop on
    # both nodes, write its files and let its job script mark the end
    kill_wait_s = 30

    def __init__(self, root: Path, nodes: int = 2, cpus_per_node: int = 1,
                 extra_config: str = "", pm_counters: bool = False):
        super().__init__(root, cpus=cpus_per_node, extra_config=extra_config)
        # each node sees its own pm_counters_dir(node) as /sys/cray/pm_counters
        self.pm_counters = pm_counters
        self.node_count = nodes
        self.nodes = [f"cn{i}" for i in range(1, nodes + 1)]
        self.network_file = self.root / "network.json"
        self.net: dict = {}

    def address(self, node: str) -> str:
        return self.net["addresses"][node]

    def namespace(self, node: str) -> str:
        return self.net["namespaces"][node]

    def pm_counters_dir(self, node: str) -> Path:
        """The folder a node's processes see as /sys/cray/pm_counters, where
        HPE Cray EX nodes have their power management counters (and Slurm's
        acct_gather_energy/pm_counters reads them); with pm_counters=True."""
        return self.root / "cray" / node / "pm_counters"

    def pids(self, node: str) -> list[int]:
        """The processes living in a node (its slurmd, its jobs' processes)."""
        out = subprocess.run(["ip", "netns", "pids", self.namespace(node)],
                             capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def _controller(self) -> str:
        # slurmctld accepts the name localhost wherever it runs; clients and
        # the nodes reach it at the bridge's address
        return f"localhost({self.net['controller']})"

    def _nodes_config(self, mem_mb: int) -> str:
        share = mem_mb // (2 * self.node_count)
        lines = [f"SlurmdPidFile={self.root}/slurmd.%n.pid",
                 f"SlurmdSpoolDir={self.root}/d/%n",
                 f"SlurmdLogFile={self.root}/log/slurmd.%n.log"]
        lines += [f"NodeName={node} NodeAddr={self.address(node)} CPUs={self.cpus} "
                  f"RealMemory={share} State=UNKNOWN" for node in self.nodes]
        lines.append(f"PartitionName=debug Nodes={','.join(self.nodes)} Default=YES "
                     "MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def _free_subnet(self) -> ipaddress.IPv4Network:
        out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True)
        used = [ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
                for link in json.loads(out.stdout) for a in link.get("addr_info", [])]
        routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
        for word in routes.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
        candidates = [ipaddress.ip_network(f"10.231.{c}.0/24") for c in range(256)]
        random.shuffle(candidates)
        for net in candidates:
            if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
                return net
        raise SlurmUnavailable("no free private /24 in 10.231.0.0/16 for the test cluster's bridge")

    def _make_network(self) -> None:
        subnet = self._free_subnet()
        hosts = list(subnet.hosts())
        tag = f"{subnet.network_address.packed[2]}"
        self.net = {
            "bridge": f"crmbr{tag}",
            "controller": str(hosts[0]),
            "namespaces": {node: f"caraml-{tag}-{node}" for node in self.nodes},
            "veths": {node: f"crm{tag}{node}" for node in self.nodes},
            "addresses": {node: str(hosts[10 + i]) for i, node in enumerate(self.nodes)},
        }
        self.root.mkdir(parents=True, exist_ok=True)
        self.network_file.write_text(json.dumps(self.net))
        bridge = self.net["bridge"]
        commands = [["ip", "link", "add", bridge, "type", "bridge"],
                    ["ip", "addr", "add", f"{self.net['controller']}/24", "dev", bridge],
                    ["ip", "link", "set", bridge, "up"]]
        for node in self.nodes:
            ns, veth = self.namespace(node), self.net["veths"][node]
            commands += [["ip", "netns", "add", ns],
                         ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                          "netns", ns],
                         ["ip", "link", "set", veth, "master", bridge, "up"],
                         ["ip", "-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0"],
                         ["ip", "-n", ns, "link", "set", "eth0", "up"],
                         ["ip", "-n", ns, "link", "set", "lo", "up"]]
        for cmd in commands:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SlurmUnavailable(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
        (self.root / "hosts").write_text(
            "127.0.0.1 localhost\n" + f"{self.net['controller']} caraml-controller\n"
            + "".join(f"{self.address(node)} {node}\n" for node in self.nodes))

    def start(self, timeout_s: float = 60) -> NamespacedSlurm:
        require_namespaces()
        self._make_network()
        super().start(timeout_s)
        return self

    def _start_slurmd(self) -> None:
        for node in self.nodes:
            (self.root / "d" / node).mkdir(parents=True, exist_ok=True)
            counters = new_sys = ""
            if self.pm_counters:
                self.pm_counters_dir(node).mkdir(parents=True, exist_ok=True)
                counters, new_sys = str(self.pm_counters_dir(node)), str(self.root / "sys" / node)
            subprocess.run(
                # nsenter, not `ip netns exec`: that one remounts /sys, and
                # slurmd needs the cgroup file system under it
                ["nsenter", f"--net=/run/netns/{self.namespace(node)}",
                 "unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c",
                 'hostname "$1" && mount --bind "$2" /etc/hosts || exit 1\n' + SYS_WITH_COUNTERS
                 + 'exec "$3" -f "$4" -N "$1"',
                 "sh", node, str(self.root / "hosts"), _sbin("slurmd"), str(self.conf),
                 counters, new_sys],
                check=True, env=self.env)

    def _pid_files(self) -> list[Path]:
        return [self.root / f"slurmd.{node}.pid" for node in self.nodes]

    def stop(self) -> None:
        if not self.net and self.network_file.is_file():
            self.net = json.loads(self.network_file.read_text())
        super().stop()
        if not self.net:
            return
        # what a job left behind in a node is this cluster's to end
        for node in self.nodes:
            for pid in self.pids(node):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    continue
        for node in self.nodes:
            subprocess.run(["ip", "link", "del", self.net["veths"][node]], capture_output=True)
            subprocess.run(["ip", "netns", "del", self.namespace(node)], capture_output=True)
        subprocess.run(["ip", "link", "del", self.net["bridge"]], capture_output=True)


if __name__ == "__main__":
    action, where = sys.argv[1], Path(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    cluster = NamespacedSlurm(where, nodes=count) if count > 1 else LocalSlurm(where)
    if action == "start":
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        if (where / "network.json").is_file():
            cluster = NamespacedSlurm(where, nodes=len(json.loads(
                (where / "network.json").read_text())["namespaces"]))
        cluster.stop()
