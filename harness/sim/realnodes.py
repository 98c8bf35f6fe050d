"""Real nodes beside the kwok nodes (`gpupoc sim up --real-nodes N`): a real kubelet, containerd and runc each.

Every real node lives in the sim's network namespace, so its pod IPs, probes and Service traffic never touch the
host's network:
- its node IP (10.240.1.1 + index) is an address of the namespace's loopback; its kubelet serves on it;
- its pods get 10.245.<index>.0/24 from CNI's bridge + host-local plugins (Debian's containernetworking-plugins), on
  a bridge of its own in the namespace: outside kwok's 10.244.0.0/16, which is local to the namespace's loopback
  and would swallow their traffic;
- its kubelet reaches the API server through the data plane's relay (like kube-proxy), and the API server reaches
  the kubelet (pods/log, exec, port-forward) through its `cluster` egress: an HTTP CONNECT proxy of the data plane
  on a unix socket, which dials node and pod addresses inside the namespace (harness/sim/dataplane.py);
- its containerd (Debian's 1.6: no RuntimeConfig CRI call, so the kubelet keeps its own cgroupfs driver) has its
  own root, state and socket and imports the images gpupoc builds (images.py);
- its files live under /var/lib/gpupoc/sim-<port base>/<node>, not under $GPUPOC_HOME: unix socket paths are limited
  to 108 bytes, and the kubelet's and containerd's sockets sit deep below their directories;
- its pods' cgroups sit under /gpupoc-<port base>/<node> of each cgroup v1 hierarchy (the kubelet's cgroupRoot);
- its processes (containerd, its shims, the kubelet) share a mount namespace of the node's own, as on a machine of
  its own: there /var/lib/kubelet is the node's directory (the kubelet keeps its device-plugin socket and checkpoint
  at that fixed path, whatever --root-dir says), and the mounts of its pods (root filesystems, volumes, /dev/shm,
  their network namespaces) never show on the host; they go when the node's last process does.

This module renders the files and describes the processes; realnode_teardown.py leaves nothing behind.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from harness.cluster.apply import apply_objects
from harness.core.errors import ConfigError, SimError, WaitTimeout
from harness.sim import files, images, pki
from harness.sim.components import Component, Layout, binary
from harness.sim.config import GpuSpec, Ports
from harness.sim.nodes import GPU_RESOURCE, gfd_labels

NAME_PREFIX = "real-node-"
LABEL = "gpupoc.io/real-node"
# Only pods that tolerate it land on a real node: the suites' workloads are made for kwok (images that exist only
# as names, annotations kwok reads), and a real kubelet would fail them.
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
NODE_IPS = ipaddress.ip_network("10.240.1.0/24")  # kwok's nodes claim 10.240.0.1
POD_NETWORK = ipaddress.ip_network("10.245.0.0/16")  # one /24 a node, beside kwok's 10.244.0.0/16
KUBELET_PORT = 10250
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
RUNC = Path("/usr/sbin/runc")
CGROUP_FS = Path("/sys/fs/cgroup")
NODES_ROOT = Path("/var/lib/gpupoc")
KUBELET_FIXED = Path("/var/lib/kubelet")  # bound to the node's own directory inside its mount namespace
# What a kubelet writes into the kernel on start (protectKernelDefaults: false); the sim puts the values back at down.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes")
MAX_REAL_NODES = 20  # the kubelet health relays' port range (Ports.real_node_health)
DEVICE_PLUGIN_SOCKET = "gpupoc-gpu.sock"  # in the node's /var/lib/kubelet/device-plugins (sim/deviceplugin)
SIMULATED_GPUS_LABEL = "gpupoc.io/simulated-gpus"  # a real node, simulated devices: the record says so
GPU_ALLOCATABLE_TIMEOUT_S = 30.0
KUBELET_CLIENT = "kube-apiserver-kubelet-client"  # the API server's identity at the kubelets (system:masters)
# CPU isolation as a reference node has it: the static CPU manager gives a Guaranteed pod's integer CPUs to it alone
# (the reservation, rounded up to whole CPUs, keeps CPU 0 for the system and the shared pool), and CFS quota caps
# each container at its limit. A reservation of 100m, not a whole CPU: the nodes share the host's 2 cores, and the
# scheduler should still see room for a second tenant's pod beside a 1-CPU sample.
KUBE_RESERVED_CPU = "100m"
CPU_MANAGER_STATE = "cpu_manager_state"  # in the kubelet's root directory: a changed policy must start without it
# The kubelet restarted without its CPU isolation (a misconfiguration on purpose: `gpupoc sim cpu-isolation off`)
CPU_ISOLATION_OFF = ("--cpu-manager-policy=none", "--cpu-cfs-quota=false")


@dataclass(frozen=True)
class RealNode:
    index: int
    root: Path  # the node's files: containerd's root and state, the kubelet's root directory, CNI, pod logs
    port_base: int  # the sim's: names its cgroups apart from another sim's

    @property
    def name(self) -> str:
        return f"{NAME_PREFIX}{self.index}"

    @property
    def ip(self) -> str:
        return str(NODE_IPS[1 + self.index])

    @property
    def pod_cidr(self) -> str:
        return str(list(POD_NETWORK.subnets(new_prefix=24))[self.index])

    @property
    def bridge(self) -> str:
        return f"rn{self.index}"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def cgroup_parent(self) -> str:
        """The sim's cgroup directory (every hierarchy): removed whole at down."""
        return f"gpupoc-{self.port_base}"

    @property
    def cgroup_root(self) -> str:
        return f"/{self.cgroup_parent}/{self.name}"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def mount_ns(self) -> Path:
        """The file that keeps the node's mount namespace (under a private mount: the kernel wants it so)."""
        return self.root.parent / "mntns" / self.name

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs each of the node's processes inside its mount namespace."""
        return ("nsenter", f"--mount={self.mount_ns}", "--")


def nodes_dir(ports: Ports) -> Path:
    """Every real node's files of one sim (removed whole by `sim down`)."""
    return NODES_ROOT / f"sim-{ports.base}"


def real_nodes(ports: Ports, count: int) -> list[RealNode]:
    return [RealNode(i, nodes_dir(ports) / f"{NAME_PREFIX}{i}", ports.base) for i in range(count)]


def check_host(count: int) -> None:
    """Fail early, saying what to install, when a piece the real nodes need is missing."""
    if count > MAX_REAL_NODES:
        raise ConfigError(f"--real-nodes {count}: at most {MAX_REAL_NODES}")
    missing = [tool for tool in ("containerd", "ctr") if shutil.which(tool) is None]
    missing += [str(p) for p in (RUNC, CNI_BIN_DIR / "bridge", CNI_BIN_DIR / "host-local", images.BUSYBOX)
                if not p.exists()]
    if missing:
        raise ConfigError(f"--real-nodes needs {', '.join(missing)}: run `bash sim/install-deps.sh` (Debian's "
                          "containerd, runc, containernetworking-plugins and busybox-static)")
    for name, how in (("kubelet", "kubelet"), ("gpupoc-pause", "pause"), ("gpupoc-device-plugin", "device-plugin")):
        binary(name, f"gpupoc sim build --with real-nodes (or: gpupoc sim build {how})")


def containerd_config(node: RealNode, pause_image: str = images.PAUSE_IMAGE) -> str:
    """containerd 1.6's config (version 2). restrict_oom_score_adj: the CRI plugin clamps each container's
    oom_score_adj to containerd's own, since this machine refuses to lower it (the kubelet asks -998 for the
    sandbox, and runc's create fails with `can't get final child's PID from pipe: EOF`)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        f'root = "{node.root / "containerd"}"',
        f'state = "{node.root / "containerd-state"}"',
        "oom_score = 0",
        # no /opt/containerd, no snapshotters this machine cannot run
        'disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", '
        '"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]',
        "[grpc]", f'  address = "{node.containerd_socket}"',
        "[ttrpc]", f'  address = "{node.root / "containerd.sock.ttrpc"}"',
        f"[{cri}]",
        f'  sandbox_image = "{pause_image}"',
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",  # the pods' network namespaces under the node's state, not /run/netns
        '  stream_server_address = "127.0.0.1"', '  stream_server_port = "0"',
        "  enable_selinux = false",
        f"[{cri}.cni]",
        f'  bin_dir = "{CNI_BIN_DIR}"', f'  conf_dir = "{node.root / "cni"}"', "  max_conf_num = 1",
        f"[{cri}.containerd]", '  snapshotter = "overlayfs"', '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]", '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        f'  BinaryName = "{RUNC}"', f'  Root = "{node.root / "runc"}"', "  SystemdCgroup = false",
        "",
    ])


def cni_config(node: RealNode) -> dict[str, Any]:
    """A bridge of the node's own in the sim's namespace, its gateway the first address of the node's pod range."""
    return {"cniVersion": "0.4.0", "name": f"gpupoc-{node.port_base}-{node.name}", "plugins": [
        {"type": "bridge", "bridge": node.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": node.pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}],
                  "dataDir": str(node.root / "cni-ipam")}},
    ]}


def kubelet_config(node: RealNode, layout: Layout, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this machine has cgroup v1 (KEP-5573)
        "cgroupDriver": "cgroupfs", "cgroupRoot": node.cgroup_root,
        "address": node.ip, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": health_port,  # relayed to the host's 127.0.0.1
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(layout.pki / "gpupoc-sim-ca.crt")}},
        "authorization": {"mode": "Webhook"},
        # served with a certificate of the sim's CA for its node IP, which the API server verifies
        "tlsCertFile": str(node.root / "pki" / "kubelet.crt"),
        "tlsPrivateKeyFile": str(node.root / "pki" / "kubelet.key"),
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "podLogsDir": str(node.pod_logs), "volumePluginDir": str(node.root / "volume-plugins"),
        "resolvConf": "",  # no cluster DNS in the sim; the host's resolv.conf is not the pods' business
        "failSwapOn": False, "oomScoreAdj": 0,  # this machine refuses a lower oom_score_adj
        # The images are imported, not pulled: garbage collection must never remove them.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "registerWithTaints": [TAINT], "maxPods": 30,
        "cpuManagerPolicy": "static", "kubeReserved": {"cpu": KUBE_RESERVED_CPU}, "cpuCFSQuota": True,
        # a change (the device plugin's GPUs) reaches the Node within 3 s, not 10; unchanged status is still posted
        # only every nodeStatusReportFrequency (5 min)
        "nodeStatusUpdateFrequency": "3s",
    }


def prepare(layout: Layout, ports: Ports, nodes: list[RealNode]) -> None:
    """Certificates, kubeconfigs and configs of each node, and the API server's identity at the kubelets."""
    ca = pki.KeyPair(layout.pki / "gpupoc-sim-ca.crt", layout.pki / "gpupoc-sim-ca.key")
    pki.make_client_cert(ca, layout.pki, KUBELET_CLIENT, KUBELET_CLIENT, groups=("system:masters",))
    server = f"https://127.0.0.1:{ports.apiserver}"  # the data plane's relay inside the namespace
    shutil.rmtree(nodes_dir(ports), ignore_errors=True)
    for node in nodes:
        for sub in ("cni", "pod-logs", "kubelet", "volume-plugins", "pki", "var-lib-kubelet"):
            (node.root / sub).mkdir(parents=True, exist_ok=True)
        pki.make_serving_cert(ca, node.root / "pki", "kubelet", dns=(node.name,), ips=(node.ip,))
        cert = pki.make_client_cert(ca, layout.pki, f"kubelet-{node.name}", f"system:node:{node.name}",
                                    groups=("system:nodes",))
        files.write_kubeconfig(node.root / "kubelet.kubeconfig", cert_kubeconfig(server, ca.cert, cert))
        (node.root / "containerd.toml").write_text(containerd_config(node))
        (node.root / "cni" / "10-gpupoc.conflist").write_text(json.dumps(cni_config(node), indent=2))
        (node.root / "kubelet.yaml").write_text(yaml.safe_dump(kubelet_config(node, layout,
                                                                             ports.real_node_health(node.index))))


def cert_kubeconfig(server: str, ca_file: Path, cert: pki.KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpupoc-sim",
        "clusters": [{"name": "gpupoc-sim", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "node", "user": {"client-certificate": str(cert.cert), "client-key": str(cert.key)}}],
        "contexts": [{"name": "gpupoc-sim", "context": {"cluster": "gpupoc-sim", "user": "node"}}],
    }


def egress_selector_config(socket_path: Path) -> dict[str, Any]:
    """The API server's `cluster` traffic (kubelets, proxies, webhooks, aggregated APIs) through the data plane."""
    return {"apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
            "egressSelections": [{"name": "cluster", "connection": {
                "proxyProtocol": "HTTPConnect", "transport": {"uds": {"udsName": str(socket_path)}}}}]}


def apiserver_args(layout: Layout) -> tuple[str, ...]:
    """What the API server adds when real nodes run: its egress to them, and its identity at their kubelets."""
    return (f"--egress-selector-config-file={layout.root / 'egress-selector.yaml'}",
            f"--kubelet-client-certificate={layout.pki / (KUBELET_CLIENT + '.crt')}",
            f"--kubelet-client-key={layout.pki / (KUBELET_CLIENT + '.key')}",
            f"--kubelet-certificate-authority={layout.pki / 'gpupoc-sim-ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP")  # the node IP, not a host name nobody resolves


def egress_socket(layout: Layout) -> Path:
    return layout.root / "egress.sock"


def _version_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def runtime_version() -> str:
    """'containerd 1.6.20~ds1 + runc 1.1.5+ds1': what `sim status` shows for each node's runtime."""
    containerd = _version_line(["containerd", "--version"]).split()
    runc = _version_line([str(RUNC), "--version"]).split()
    return f"containerd {containerd[2] if len(containerd) > 2 else '?'} + runc {runc[2] if len(runc) > 2 else '?'}"


def containerd_component(node: RealNode, netns_name: str) -> Component:
    containerd = shutil.which("containerd") or "containerd"
    return Component(f"containerd-{node.name}", (containerd, f"--config={node.root / 'containerd.toml'}"),
                     f"unix://{node.containerd_socket}", 0, known_version=runtime_version(), netns=netns_name,
                     prefix=node.prefix)


def kubelet_component(node: RealNode, ports: Ports, netns_name: str, labels: dict[str, str]) -> Component:
    return Component(f"kubelet-{node.name}", (
        binary("kubelet"), f"--config={node.root / 'kubelet.yaml'}",
        f"--kubeconfig={node.root / 'kubelet.kubeconfig'}", f"--root-dir={node.kubelet_dir}",
        f"--cert-dir={node.root / 'pki'}",  # not /var/lib/kubelet/pki, the default whatever the root directory
        f"--hostname-override={node.name}", f"--node-ip={node.ip}",
        f"--node-labels={','.join(f'{k}={v}' for k, v in sorted(labels.items()))}",
    ), f"http://127.0.0.1:{ports.real_node_health(node.index)}/healthz", ports.real_node_health(node.index),
        netns=netns_name, prefix=node.prefix)


def device_plugin_component(node: RealNode, netns_name: str, gpus: int) -> Component:
    """Simulated GPUs through the kubelet's real device-plugin API; its socket seen from the host through the
    node's own /var/lib/kubelet."""
    socket = node.root / "var-lib-kubelet" / "device-plugins" / DEVICE_PLUGIN_SOCKET
    return Component(f"device-plugin-{node.name}", (
        binary("gpupoc-device-plugin"), f"--node={node.name}", f"--count={gpus}", f"--resource={GPU_RESOURCE}",
    ), f"unix://{socket}", 0, known_version="gpupoc-device-plugin 1 (deviceplugin/v1beta1; devices simulated)",
        netns=netns_name, prefix=node.prefix)


def node_labels(gpu: GpuSpec) -> dict[str, str]:
    """What GPU Feature Discovery would set, like the kwok nodes' (the devices behind them are simulated)."""
    return {LABEL: "true", SIMULATED_GPUS_LABEL: "true", **gfd_labels(gpu)}


def wait_gpus_allocatable(core: client.CoreV1Api, nodes: list[RealNode], gpus: int,
                          timeout_s: float = GPU_ALLOCATABLE_TIMEOUT_S) -> None:
    """Until each node's kubelet reports the device plugin's GPUs as allocatable."""
    deadline, last = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        last = {n.name: (core.read_node(n.name).status.allocatable or {}).get(GPU_RESOURCE, "0") for n in nodes}
        if all(value == str(gpus) for value in last.values()):
            return
        time.sleep(0.5)
    raise WaitTimeout(f"real nodes: {GPU_RESOURCE} not allocatable after {timeout_s:.0f}s (wanted {gpus} each); "
                      f"last: {last}; see the device-plugin-{NAME_PREFIX}*.log and kubelet logs")


def relays(nodes: list[RealNode], ports: Ports, netns_name: str) -> list[dict[str, Any]]:
    """The host's 127.0.0.1 reaches each kubelet's health port inside the namespace (`sim status`, start-up)."""
    return [{"listen_ns": "host", "listen_port": ports.real_node_health(n.index), "target_ns": netns_name,
             "target_port": ports.real_node_health(n.index)} for n in nodes]


def node_rbac(api: client.ApiClient) -> None:
    """The kubelets act as system:node:<name> in group system:nodes; the default RBAC has the role, not the binding
    (the Node authorizer usually serves them; the sim's API server runs RBAC only)."""
    apply_objects(api, [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "gpupoc-sim-nodes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}])


def add_addresses(netns_name: str, nodes: list[RealNode]) -> None:
    """Each node's IP on the namespace's loopback: the kubelet's address (it refuses a loopback one)."""
    for node in nodes:
        subprocess.run(["ip", "-n", netns_name, "addr", "add", f"{node.ip}/32", "dev", "lo"], check=True,
                       capture_output=True)


def make_mount_namespaces(nodes: list[RealNode]) -> None:
    """One persistent mount namespace a node (a slave of the host's: the host's mounts show in it, not the other
    way), with the node's own /var/lib/kubelet."""
    if not nodes:
        return
    holder = nodes[0].mount_ns.parent
    holder.mkdir(parents=True, exist_ok=True)
    KUBELET_FIXED.mkdir(parents=True, exist_ok=True)
    _run(["mount", "--bind", str(holder), str(holder)])
    _run(["mount", "--make-private", str(holder)])
    for node in nodes:
        node.mount_ns.touch()
        _run(["unshare", f"--mount={node.mount_ns}", "--propagation", "slave", "--",
              "mount", "--bind", str(node.root / "var-lib-kubelet"), str(KUBELET_FIXED)])


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if result.returncode != 0:
        raise SimError(f"`{' '.join(argv)}` failed: {(result.stderr or result.stdout).strip()} (the real nodes "
                       "need root and util-linux's unshare and nsenter)")


def make_cgroups(nodes: list[RealNode]) -> None:
    """The kubelet's cgroupRoot must exist in every hierarchy before it starts."""
    for hierarchy in cgroup_hierarchies():
        for node in nodes:
            (hierarchy / node.cgroup_root.lstrip("/")).mkdir(parents=True, exist_ok=True)


def cgroup_hierarchies() -> list[Path]:
    return [p for p in sorted(CGROUP_FS.iterdir()) if p.is_dir() and p.is_mount()] if CGROUP_FS.exists() else []


def read_sysctls() -> dict[str, str]:
    return {name: (Path("/proc/sys") / name).read_text().strip() for name in KUBELET_SYSCTLS
            if (Path("/proc/sys") / name).exists()}
