"""A real Slurm beside the Kubernetes sim: Debian's slurmctld, one slurmd per simulated GPU node, slurmdbd on a
private MariaDB, slurmrestd with JWT auth, and munge; host processes under the sim's state directory.

Facts this rests on (Slurm 22.05.8 from Debian bookworm, checked here):
- Debian's slurmd is built with --enable-multiple-slurmd: one slurmd per node name (`-N gpu-node-0`) on its own
  port, all on 127.0.0.1. slurm-wlm-emulator is not used (a front-end build that replaces slurmd by alternatives).
- a GPU GRES without `File=` is dropped by slurmd ("Removing file-less GPU"): each node names eight device files,
  symbolic links to /dev/null under the sim's state (a character device; no GPU is touched, TaskPlugin none).
- clients reach slurmdbd through AccountingStoragePass (the munge socket), not AuthInfo.
- slurmrestd refuses root and SlurmUser: it runs as its own system user.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from harness.core.errors import ConfigError, HarnessError, SimError
from harness.cluster.wait import poll
from harness.sim.components import Component, Layout
from harness.sim.nodes import LEAF, SPINE, topology_labels

CLUSTER = "gpupoc"
PARTITION = "gpu"
REST_USER = "gpupoc-slurmrestd"
OPENAPI = "v0.0.38"
# The Debian packages it needs (install-deps.sh installs them when slurm is asked for).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmdbd", "slurmrestd", "slurm-wlm-jwt-plugin", "munge",
            "mariadb-server")
BINARIES = ("munged", "mungekey", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd",
            "slurmrestd", "sacctmgr", "scontrol")
CANCEL_WAIT_S = 10.0
START_NICENESS = 5
PRIVATE_DATA = "accounts,jobs,usage,users"
CRED_EXPIRE_S = 5  # a requeued job may start again this long after (default 120 s; 5 works on 22.05)


@dataclass(frozen=True)
class SlurmPorts:
    base: int

    @property
    def mariadb(self) -> int:
        return self.base + 700

    @property
    def slurmdbd(self) -> int:
        return self.base + 701

    @property
    def slurmctld(self) -> int:
        return self.base + 702

    @property
    def slurmrestd(self) -> int:
        return self.base + 703

    @property
    def exporter(self) -> int:
        return self.base + 704

    def slurmd(self, index: int) -> int:
        return self.base + 710 + index


@dataclass(frozen=True)
class SlurmLayout:
    """Where the sim's Slurm keeps its files: config and keys under the sim's root, state under its data."""

    sim: Layout

    @property
    def root(self) -> Path:
        return self.sim.root / "slurm"

    @property
    def run(self) -> Path:
        """What other users must reach (slurmrestd drops to its own user; munged wants every directory above its
        socket open to all): a directory under /run, not under a home directory; removed by `sim down`."""
        tag = hashlib.sha1(str(self.sim.root.resolve()).encode()).hexdigest()[:8]
        return Path("/run") / f"gpupoc-sim-{tag}"

    @property
    def etc(self) -> Path:
        return self.run / "etc"

    @property
    def conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_dir(self) -> Path:
        return self.run / "munge"

    @property
    def spool(self) -> Path:
        return self.run / "spool"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.sock"

    @property
    def jwt_key(self) -> Path:
        return self.root / "jwt.key"

    @property
    def devices(self) -> Path:
        return self.root / "dev"

    @property
    def state(self) -> Path:
        return self.sim.data / "slurm"

    @property
    def db(self) -> Path:
        return self.state / "mariadb"

    @property
    def db_socket(self) -> Path:
        return self.state / "mariadb.sock"

    def env(self) -> dict[str, str]:
        """What a Slurm client command needs to talk to this Slurm."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}


def node_names(count: int) -> list[str]:
    return [f"gpu-node-{i}" for i in range(count)]


def gres_type(product: str) -> str:
    """'NVIDIA-H100-80GB-HBM3' -> 'h100': the GRES type Slurm sites use for the model."""
    found = re.search(r"(?i)\b(?:nvidia-)?([a-z]+\d+[a-z]*)", product)
    return found.group(1).lower() if found else "gpu"


def slurm_conf(lay: SlurmLayout, ports: SlurmPorts, nodes: int, gpus: int, gpu_type: str) -> str:
    names = node_names(nodes)
    node_lines = [f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports.slurmd(i)} CPUs=32 "
                  f"RealMemory=256000 Gres=gpu:{gpu_type}:{gpus} Features={topology_labels(name)[LEAF]} State=UNKNOWN"
                  for i, name in enumerate(names)]  # its leaf switch as a feature: a job kept within one asks for it
    state, logs = lay.state, lay.sim.logs
    return "\n".join([
        "# gpupoc sim: a real Slurm on 127.0.0.1 (written by `gpupoc sim up`)",
        f"ClusterName={CLUSTER}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ports.slurmctld}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={lay.munge_socket},cred_expire={CRED_EXPIRE_S}",
        f"AccountingStoragePass={lay.munge_socket}",
        "CredType=cred/munge",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={lay.jwt_key}",
        f"StateSaveLocation={state / 'ctld'}",
        f"SlurmdSpoolDir={lay.spool / 'slurmd.%n'}",  # the job's user runs its script from here
        f"SlurmctldPidFile={state / 'slurmctld.pid'}",
        f"SlurmdPidFile={state / 'slurmd.%n.pid'}",
        f"SlurmctldLogFile={logs / 'slurmctld.daemon.log'}",
        f"SlurmdLogFile={logs / 'slurmd.%n.daemon.log'}",
        "SlurmdParameters=config_overrides",  # the simulated nodes are bigger than this host
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={ports.slurmdbd}",
        f"AccountingStorageTRES=gres/gpu,gres/gpu:{gpu_type}",
        "AccountingStorageEnforce=associations,limits,qos",
        "JobCompType=jobcomp/none",
        "PriorityType=priority/multifactor",
        "PriorityCalcPeriod=1",  # minutes: fair share recomputed every minute
        "PriorityDecayHalfLife=0",
        "PriorityUsageResetPeriod=NONE",
        "PriorityWeightFairshare=100000",
        "PriorityWeightQOS=10000",
        "PriorityWeightAge=0",
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        "JobRequeue=0",  # requeued only when a job asks (slurmrestd v0.0.38 cannot say requeue=false)
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1,bf_interval=1",
        "TopologyPlugin=topology/tree",  # topology.conf: the nodes' leaf and spine labels
        "MinJobAge=600",  # finished jobs stay in slurmctld's view (and slurmrestd's) for 10 minutes
        f"PrivateData={PRIVATE_DATA}",  # a tenant sees its own jobs, usage and associations only
        "ReturnToService=2",  # a failed node (fail_node) whose slurmd answers is back at once
        "KillWait=2",
        *node_lines,
        f"PartitionName={PARTITION} Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP "
        f"TRESBillingWeights=GRES/gpu=1",
        "",
    ])


def topology_conf(nodes: int) -> str:
    """topology/tree's switches: each node under the leaf and spine its kwok twin is labelled with
    (harness/sim/nodes.py), so a Slurm leaf switch is the profile's leaf domain; spines under one root."""
    leaves: dict[str, list[str]] = {}
    spines: dict[str, list[str]] = {}
    for name in node_names(nodes):
        labels = topology_labels(name)
        leaves.setdefault(labels[LEAF], []).append(name)
        if labels[LEAF] not in spines.setdefault(labels[SPINE], []):
            spines[labels[SPINE]].append(labels[LEAF])
    lines = [f"SwitchName={leaf} Nodes={','.join(names)}" for leaf, names in leaves.items()]
    lines += [f"SwitchName={spine} Switches={','.join(under)}" for spine, under in spines.items()]
    if len(spines) > 1:
        lines.append(f"SwitchName=core Switches={','.join(spines)}")
    return "# gpupoc sim: topology/tree from the nodes' topology labels (written by `gpupoc sim up`)\n" + \
        "\n".join(lines) + "\n"


def leaf_features(lay: SlurmLayout) -> dict[str, str]:
    """Each node's feature as slurm.conf gives it (its leaf switch)."""
    return dict(re.findall(r"^NodeName=(\S+) .*\bFeatures=(\S+)", lay.conf.read_text(), re.MULTILINE))


def set_features(lay: SlurmLayout, features: dict[str, str]) -> None:
    """Nodes' features changed in the running slurmctld (scontrol update; slurm.conf unchanged)."""
    for node, feature in features.items():
        subprocess.run(["scontrol", "update", f"NodeName={node}", f"AvailableFeatures={feature}",
                        f"ActiveFeatures={feature}"], env=lay.env(), check=True, capture_output=True, timeout=30)


def topology_conf_of(lay: SlurmLayout) -> str:
    """The sim's topology.conf as slurmctld read it ('' before `sim up` wrote one)."""
    path = lay.etc / "topology.conf"
    return path.read_text() if path.is_file() else ""


def gres_conf(lay: SlurmLayout, nodes: int, gpus: int, gpu_type: str) -> str:
    files = f"{lay.devices}/nvidia[0-{gpus - 1}]" if gpus > 1 else f"{lay.devices}/nvidia0"
    names = ",".join(node_names(nodes))
    return f"AutoDetect=off\nNodeName={names} Name=gpu Type={gpu_type} File={files}\n"


def slurmdbd_conf(lay: SlurmLayout, ports: SlurmPorts, db_password: str) -> str:
    return "\n".join([
        "AuthType=auth/munge",
        f"AuthInfo=socket={lay.munge_socket}",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={lay.jwt_key}",
        "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={ports.slurmdbd}",
        "SlurmUser=root",
        f"PidFile={lay.state / 'slurmdbd.pid'}",
        f"LogFile={lay.sim.logs / 'slurmdbd.daemon.log'}",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1", f"StoragePort={ports.mariadb}",
        "StorageUser=slurm", f"StoragePass={db_password}", "StorageLoc=slurm_acct_db",
        f"PrivateData={PRIVATE_DATA}",  # a tenant reads its own accounting records only
        "",
    ])


def check_installed() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        raise ConfigError(f"Slurm is not installed ({', '.join(missing)} not found): run `apt-get install -y "
                          f"{' '.join(PACKAGES)}` (bash sim/install-deps.sh does it with GPUPOC_SIM_SCHEDULERS "
                          "naming slurm)")
    if os.geteuid() != 0:
        raise ConfigError("the sim's Slurm needs root: slurmd runs each job as its submitting user")
    try:
        pwd.getpwnam(REST_USER)
    except KeyError:
        raise ConfigError(f"user {REST_USER} missing (slurmrestd refuses root): `useradd --system --no-create-home "
                          f"--shell /usr/sbin/nologin {REST_USER}` (install-deps.sh does it)") from None


def prepare(lay: SlurmLayout, ports: SlurmPorts, nodes: int, gpus: int, product: str) -> None:
    """Config files, keys and directories; the accounting user's grants for MariaDB (init_database)."""
    check_installed()
    gpu_type = gres_type(product)
    for directory in (lay.etc, lay.devices, lay.state / "ctld", *(lay.spool / f"slurmd.{n}" for n in node_names(nodes))):
        directory.mkdir(parents=True, exist_ok=True)
    for directory in (lay.run, lay.etc, lay.munge_dir, lay.spool):
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o755)  # munged refuses a socket directory others cannot reach; slurmrestd reads etc
    key = lay.munge_dir / "munge.key"
    if not key.exists():
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
    key.chmod(0o600)
    if not lay.jwt_key.exists():
        lay.jwt_key.write_bytes(secrets.token_bytes(32))
    lay.jwt_key.chmod(0o600)
    for i in range(gpus):
        device = lay.devices / f"nvidia{i}"
        if not device.is_symlink():
            device.symlink_to("/dev/null")
    lay.conf.write_text(slurm_conf(lay, ports, nodes, gpus, gpu_type))
    (lay.etc / "gres.conf").write_text(gres_conf(lay, nodes, gpus, gpu_type))
    (lay.etc / "topology.conf").write_text(topology_conf(nodes))
    (lay.etc / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")  # v1's init does nothing: no systemd here
    password = secrets.token_hex(16)
    dbd = lay.etc / "slurmdbd.conf"
    dbd.write_text(slurmdbd_conf(lay, ports, password))
    dbd.chmod(0o600)  # slurmdbd refuses it otherwise (it holds the database password)
    grants = lay.etc / "mariadb-init.sql"
    grants.write_text(f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';\n"
                      f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';\n"
                      "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';\n")
    grants.chmod(0o600)


def db_tmpdir(lay: SlurmLayout) -> Path:
    """MariaDB's temporary files, the sim's own: two sims bootstrapping at once in /tmp once lost each other's
    (`Could not remove temporary table '/tmp/#sql-temptable-...'`, then `Unknown table 'mysql.tmp_user_sys'`)."""
    return lay.db.parent / "mariadb-tmp"


def init_database(lay: SlurmLayout) -> None:
    """A fresh MariaDB data directory (on Slurm's own start-up thread: it costs half a second of CPU)."""
    db_tmpdir(lay).mkdir(parents=True, exist_ok=True)
    if not (lay.db / "mysql").exists():
        lay.db.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={lay.db}", "--user=root",
                               "--auth-root-authentication-method=normal", "--skip-test-db",
                               f"--tmpdir={db_tmpdir(lay)}"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ConfigError(f"mariadb-install-db failed: {done.stdout[-500:]}{done.stderr[-500:]}")


def components(sim: Layout, ports: SlurmPorts, nodes: int) -> list[list[Component]]:
    """Groups started in order, each group together: munge and MariaDB, slurmdbd, slurmctld, the slurmds and
    slurmrestd."""
    lay = SlurmLayout(sim)
    env = (("SLURM_CONF", str(lay.conf)),)
    which = shutil.which
    version = slurm_version()

    def tcp(port: int) -> str:
        return f"tcp://127.0.0.1:{port}"

    first = [
        Component("munged", (str(which("munged")), "--foreground", f"--socket={lay.munge_socket}",
                             f"--key-file={lay.munge_dir / 'munge.key'}", f"--pid-file={lay.state / 'munged.pid'}",
                             f"--seed-file={lay.state / 'munged.seed'}",
                             f"--log-file={sim.logs / 'munged.daemon.log'}"),
                  f"unix://{lay.munge_socket}", 0),
        Component("mariadb", (str(which("mariadbd")), "--no-defaults", f"--datadir={lay.db}",
                              f"--tmpdir={db_tmpdir(lay)}", f"--socket={lay.db_socket}", f"--port={ports.mariadb}",
                              "--bind-address=127.0.0.1",
                              f"--pid-file={lay.state / 'mariadb.pid'}", "--user=root", "--skip-log-bin",
                              "--innodb-buffer-pool-size=32M", f"--init-file={lay.etc / 'mariadb-init.sql'}"),
                  tcp(ports.mariadb), ports.mariadb),
    ]
    dbd = [Component("slurmdbd", (str(which("slurmdbd")), "-D"), tcp(ports.slurmdbd), ports.slurmdbd, env=env,
                     known_version=version)]
    ctld = [Component("slurmctld", (str(which("slurmctld")), "-D", "-i", "-f", str(lay.conf)), tcp(ports.slurmctld),
                      ports.slurmctld, env=env, known_version=version)]
    rest: list[Component] = [
        Component(f"slurmd-{name}", (str(which("slurmd")), "-D", "-N", name, "-f", str(lay.conf)),
                  tcp(ports.slurmd(i)), ports.slurmd(i), env=env) for i, name in enumerate(node_names(nodes))]
    rest.append(Component("slurmrestd", (str(which("slurmrestd")), "-f", str(lay.conf), "-a", "rest_auth/jwt",
                                         "-s", f"openapi/{OPENAPI},openapi/db{OPENAPI}", "-u", REST_USER,
                                         "-g", REST_USER, f"127.0.0.1:{ports.slurmrestd}"),
                          tcp(ports.slurmrestd), ports.slurmrestd, env=(*env, ("SLURM_JWT", "daemon")),
                          known_version=version))
    rest.append(Component("slurm-exporter", (sys.executable, "-m", "harness.sim.slurm.exporter",
                                             f"--port={ports.exporter}", f"--conf={lay.conf}"),
                          f"http://127.0.0.1:{ports.exporter}/healthz", ports.exporter,
                          known_version="gpupoc sim Slurm exporter (simulated)"))
    # Niceness 5 while they start beside the Kubernetes side, whose API server is CPU-bound compiling CRDs; back to
    # 0 once the sim is up (end_start_niceness), so Slurm is measured at the priority the schedulers have.
    return [[dataclasses.replace(c, prefix=("nice", "-n", str(START_NICENESS))) for c in group]
            for group in (first, dbd, ctld, rest)]


def end_start_niceness(components: dict[str, dict[str, Any]], names: list[str]) -> None:
    """Every thread and child of Slurm's daemons back to niceness 0 (each runs in a process group of its own)."""
    for name in names:
        found = components.get(name)
        if found:
            try:
                os.setpriority(os.PRIO_PGRP, int(found["pid"]), 0)
            except OSError:
                pass  # gone: the health checks report it


def scrape_job(ports: SlurmPorts) -> dict[str, Any]:
    return {"job_name": "slurm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{ports.exporter}"]}]}


def sacctmgr(lay: SlurmLayout, *args: str) -> str:
    done = subprocess.run(["sacctmgr", "--immediate", "--noheader", *args], capture_output=True, text=True,
                          env=lay.env(), timeout=30)
    if done.returncode != 0 and "Nothing new added" not in done.stdout + done.stderr:
        raise ConfigError(f"sacctmgr {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def register_cluster(lay: SlurmLayout) -> None:
    """The cluster in slurmdbd before slurmctld registers with it."""
    if CLUSTER not in sacctmgr(lay, "list", "cluster", "format=cluster").split():
        sacctmgr(lay, "add", "cluster", CLUSTER)


def token(lay: SlurmLayout, user: str, lifespan_s: int = 3600) -> str:
    """A JWT for `user` from slurmctld (`scontrol token`, as root: the sim's admin)."""
    done = subprocess.run(["scontrol", "token", f"username={user}", f"lifespan={lifespan_s}"], capture_output=True,
                          text=True, env=lay.env(), timeout=30)
    if done.returncode != 0 or "SLURM_JWT=" not in done.stdout:
        raise ConfigError(f"scontrol token for {user} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip().split("=", 1)[1]


def fail_node(lay: SlurmLayout, node: str, reason: str) -> None:
    """`node` fails (scontrol, as the sim's administrator): slurmctld kills its jobs, requeues those that allow it
    and fails the rest (NODE_FAIL); its slurmd still answers, so ReturnToService=2 takes it back at once, like a
    node that rebooted."""
    done = subprocess.run(["scontrol", "update", f"nodename={node}", "state=DOWN", f"reason={reason}"],
                          capture_output=True, text=True, env=lay.env(), timeout=30)
    if done.returncode != 0:
        raise ConfigError(f"scontrol could not fail {node}: {(done.stderr or done.stdout).strip()}")


def end_jobs(job_ids: list[int], timeout_s: float) -> None:
    """Kill the processes of these jobs' batch scripts (found by SLURM_JOB_ID in their environment), without
    slurmctld: each job ends on its node as if its script had died; slurmd reports it when it can."""
    wanted = {f"SLURM_JOB_ID={job_id}".encode() for job_id in job_ids}
    deadline = time.monotonic() + timeout_s
    while True:
        found = [pid for pid in _pids() if wanted & set(_environ(pid))]
        if not found:
            return
        if time.monotonic() > deadline:
            raise ConfigError(f"the batch scripts of Slurm jobs {job_ids} still run after {timeout_s:.0f}s "
                              f"(pids {found})")
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def node_states(lay: SlurmLayout) -> dict[str, str]:
    done = subprocess.run(["sinfo", "--Node", "--noheader", "--format=%N %T"], capture_output=True, text=True,
                          env=lay.env(), timeout=15, check=False)
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if " " in line)


def wait_nodes_idle(lay: SlurmLayout, nodes: int, timeout_s: float) -> None:
    """Until every slurmd has registered and its node is idle (a node with its GPUs missing turns INVAL)."""
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(lay)
        if len(states) == nodes and all(s == "idle" for s in states.values()):
            return
        if any(s.startswith("inval") for s in states.values()):
            break
        time.sleep(0.2)
    raise ConfigError(f"Slurm's nodes are not idle after start-up: {states or 'no node reported'}; see "
                      f"{lay.sim.logs / 'slurmctld.daemon.log'}")


def remove_runtime_files(lay: SlurmLayout) -> None:
    shutil.rmtree(lay.run, ignore_errors=True)


def cancel_all(lay: SlurmLayout) -> None:
    """Cancel every job (before the slurmds stop, so no batch script outlives the sim)."""
    try:
        subprocess.run(["scancel", "--quiet", f"--partition={PARTITION}"], env=lay.env(), capture_output=True,
                       timeout=15, check=False)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            left = subprocess.run(["squeue", "--noheader", "--format=%i"], env=lay.env(), capture_output=True,
                                  text=True, timeout=15, check=False)
            if left.returncode != 0 or not left.stdout.strip():
                return
            time.sleep(0.2)
    except (OSError, subprocess.TimeoutExpired):
        pass  # slurmctld not answering: stopping the daemons ends their jobs' steps too


def slurm_version() -> str:
    """'slurm-wlm 22.05.8' (slurmd prints it; slurmctld and slurmdbd have no harmless version flag)."""
    done = subprocess.run([shutil.which("slurmd") or "slurmd", "--version"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def reference_model(tenants: list[dict[str, Any]], cluster_gpus: int) -> list[list[str]]:
    """sacctmgr commands for the reference model: QOS low and high (high preempts low, requeued), one account per
    tenant (fair-share shares = its weight, GPU limit = its limit), the tenant's identity a user of its account.
    `tenants`: [{"account", "user", "weight", "limit_gpus"}]. A limit of the whole cluster is no limit (-1): Slurm
    preempts for resources, never to make room under an association's limit, so a GrpTRES equal to the cluster
    would hold a high-priority job (AssocGrpGRES) where the cluster itself would preempt for it."""
    commands = [["add", "qos", "low"], ["add", "qos", "high"],  # then set: an existing QOS is brought back too
                ["modify", "qos", "where", "name=low", "set", "priority=0", "preemptmode=requeue"],
                ["modify", "qos", "where", "name=high", "set", "priority=1000", "preempt=low", "preemptmode=requeue"]]
    for t in tenants:
        commands += [["add", "account", t["account"], f"fairshare={t['weight']}"],
                     ["modify", "account", "where", f"name={t['account']}", "set", f"fairshare={t['weight']}",
                      f"GrpTRES=gres/gpu={t['limit_gpus'] if t['limit_gpus'] < cluster_gpus else -1}",
                      "qos=normal,low,high", "defaultqos=normal"],
                     ["add", "user", t["user"], f"account={t['account']}", "qos=normal,low,high",
                      "defaultqos=normal"]]
    return commands


def ranking_period_s(lay: SlurmLayout) -> float:
    """How often slurmctld ranks the accounts by their recorded usage: PriorityCalcPeriod (minutes; Slurm's default
    is 5)."""
    for line in lay.conf.read_text().splitlines():
        if line.startswith("PriorityCalcPeriod="):
            return float(line.split("=", 1)[1]) * 60
    return 300.0


def usage_from_zero(lay: SlurmLayout, accounts: list[str]) -> None:
    """The accounts' recorded usage reset (RawUsage=0), and returns once slurmctld has ranked them on it: until its
    next PriorityCalcPeriod, jobs are ordered by the fair share of the usage before the reset."""
    for account in accounts:
        sacctmgr(lay, "modify", "account", "where", f"name={account}", "set", "RawUsage=0")
    timeout_s = 2 * ranking_period_s(lay) + 10
    usage = poll(lambda: effective_usage(lay, accounts), lambda found: ranked_at_zero(found, accounts), timeout_s, 1.0)
    if not ranked_at_zero(usage, accounts):
        raise HarnessError(f"slurmctld did not rank the accounts on their reset usage within {timeout_s:.0f}s: "
                           f"sshare's effective usage is still {usage}")


def ranked_at_zero(usage: dict[str, float], accounts: list[str]) -> bool:
    return all(usage.get(account) == 0.0 for account in accounts)


def effective_usage(lay: SlurmLayout, accounts: list[str]) -> dict[str, float]:
    """account -> its usage as slurmctld last ranked it (sshare EffectvUsage, a share of the cluster's)."""
    try:
        done = subprocess.run(["sshare", "--noheader", "--parsable2", "--accounts", ",".join(accounts),
                               "--format=Account,User,EffectvUsage"], capture_output=True, text=True, env=lay.env(),
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"sshare: {exc}") from None
    if done.returncode != 0:
        raise HarnessError(f"sshare: {(done.stderr or done.stdout).strip()}")
    return {account: float(usage or 0) for account, user, usage in
            (line.split("|")[:3] for line in done.stdout.splitlines() if line.count("|") >= 2) if not user}


def apply_reference_model(lay: SlurmLayout, tenants: list[dict[str, Any]], cluster_gpus: int) -> int:
    """Apply it (idempotent); the tenants' users must exist on this host (slurmd runs their jobs as them)."""
    for t in tenants:
        try:
            pwd.getpwnam(t["user"])
        except KeyError:  # another sim on this host may be adding the same user right now: it exists either way
            added = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                                    t["user"]], capture_output=True, text=True)
            if added.returncode != 0:
                try:
                    pwd.getpwnam(t["user"])
                except KeyError:
                    raise SimError(f"useradd {t['user']}: {added.stderr.strip()}") from None
    commands = reference_model(tenants, cluster_gpus)
    for command in commands:
        sacctmgr(lay, *command)
    return len(commands)
