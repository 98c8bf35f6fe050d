#!/usr/bin/env bash
# kind on a machine that reaches no container registry (this one): Debian's podman, rootful, in a network namespace
# of gpupoc's own, on the node image kind/node-image.sh builds here.
#
#   kind/here.sh up      # node image (cached), the cluster, pod networking, simulated GPUs, the API on 127.0.0.1
#   kind/here.sh down    # the cluster, podman's network, the namespace; then compares the host with before `up`
#   kind/here.sh env     # the kubeconfig and Prometheus to point gpupoc at
#   kind/here.sh poc     # make kind: up, every suite on kueue, volcano and default, the record, down
#
# The host's own network is never touched: podman, netavark's bridge, its firewall rules and ip_forward all live in
# the namespace `gpupoc-kind`, which `down` deletes. The runner reaches the API server through a forwarder from
# the host's 127.0.0.1 into the namespace (socat). What differs from kind/up.sh and why: docs/kind-node-image.md.
# GPUPOC_KIND_WORKERS (2) and GPUPOC_KIND_GPUS_PER_NODE (4) as in up.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kind/up.sh
source "$here/kind/up.sh"   # its pins, chart flags (chart_sets) and the simulated GPUs (simulate_gpus)
say() { printf 'kind/here.sh: [%3ss] %s\n' "$SECONDS" "$*" >&2; }

home=${GPUPOC_BUILD_HOME:-${GPUPOC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupoc}}
bin=$home/bin
state=${GPUPOC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupoc}/kind
NETNS=gpupoc-kind
kubernetes=$(pin kubernetes)
NODE_IMAGE=localhost/gpupoc-kind-node:$kubernetes
inside_kubeconfig=$state/kubeconfig.inside   # the server as the namespace sees it
KUBECONFIG_OUT=$state/kubeconfig             # the same server through the host's 127.0.0.1 (the forwarder)

in_ns() {
    nsenter --net="/run/netns/$NETNS" env CONTAINERS_CONF="$state/containers.conf" KIND_EXPERIMENTAL_PROVIDER=podman \
        PATH="$bin:$PATH" "$@"
}
k() { in_ns kubectl --kubeconfig "$inside_kubeconfig" "$@"; }

# What `down` must leave as `up` found it: the host's network, rules, mounts, namespaces and podman's objects.
# (The sim's own namespaces come and go beside it, in make test: only kind's are listed.)
host_state() {
    echo "ip_forward $(cat /proc/sys/net/ipv4/ip_forward)"
    echo "ipv6 forwarding $(cat /proc/sys/net/ipv6/conf/all/forwarding 2>/dev/null || echo -)"
    echo "--- nftables"; nft -s list ruleset 2>/dev/null || true
    echo "--- iptables"; iptables-save 2>/dev/null | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//' || true
    echo "--- links"; ip -o link show | awk '{print $2}'
    echo "--- addresses"; ip -o addr show | awk '{print $2, $4}'
    echo "--- routes"; ip route show
    echo "--- namespaces"; ls /run/netns 2>/dev/null | grep -x "$NETNS" || true
    echo "--- mounts"; findmnt -rn -o TARGET | grep -E 'containers/storage|/run/netns/gpupoc-kind|/kind' || true
    echo "--- podman"
    CONTAINERS_CONF="$state/containers.conf" podman ps -a --filter "label=io.x-k8s.kind.cluster=$CLUSTER" --format '{{.Names}}' 2>/dev/null || true
    CONTAINERS_CONF="$state/containers.conf" podman volume ls --format '{{.Name}} {{.Labels}}' 2>/dev/null | grep "$CLUSTER-" || true
    ls /etc/containers/networks 2>/dev/null | grep -x kind.json || true
    # (zombies left out: podman's conmon and aardvark-dns linger a moment until their parent reaps them)
    echo "--- processes"; ps -eo stat=,args= | awk '$1 !~ /^Z/ && /conmon|aardvark-dns|netns\/gpupoc-kind/ && !/awk/ {print $2}' || true
}

require() {
    local missing=()
    for tool in podman socat nsenter mmdebstrap curl go jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
    for b in kind kubectl helm; do [ -x "$bin/$b" ] || missing+=("$bin/$b (gpupoc sim build --with kind)"); done
    [ "$(id -u)" = 0 ] || missing+=("root (network namespaces, rootful podman)")
    [ "${#missing[@]}" -eq 0 ] || die "missing: ${missing[*]}"
}

cluster_config() {
    cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true      # kindnetd's image is not built here: a static ptp config per node instead
  kubeProxyMode: nftables      # kube-proxy's image carries nft, not iptables
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  failCgroupV1: false          # this host has cgroup v1; the kubelet refuses it by default since v1.35
  # Kueue's chart makes its webhook certificate in a Secret and waits until the kubelet has refreshed the pod's
  # mounted copy: 87 s at the default 1 min sync (2026-12-05)
  syncFrequency: 10s
- |
  kind: ClusterConfiguration
  etcd:
    local:
      imageTag: "$(pin etcd | sed 's/^v//')-0"   # the sim's etcd, not kubeadm's 3.6.8
nodes:
- role: control-plane
EOF
    for _ in $(seq 1 "$WORKERS"); do echo "- role: worker"; done
}

# kind's default CNI (kindnetd) does, per node: a ptp + host-local config for its podCIDR, and a route to every
# other node's podCIDR through that node. Routes are lost when a node restarts: run `up` again.
pod_network() {
    local nodes n m
    for _ in $(seq 60); do   # the node IPAM controller gives each node its podCIDR a moment after it joins
        k get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{"\n"}{end}' | grep -q '^$' || break
        sleep 1
    done
    nodes=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
    while read -r n cidr _; do
        printf '{"cniVersion":"0.4.0","name":"gpupoc","plugins":[{"type":"ptp","ipMasq":false,"mtu":1500,"ipam":{"type":"host-local","dataDir":"/run/cni-ipam-state","routes":[{"dst":"0.0.0.0/0"}],"ranges":[[{"subnet":"%s"}]]}},{"type":"portmap","capabilities":{"portMappings":true}}]}' "$cidr" \
            | in_ns podman exec -i "$n" cp /dev/stdin /etc/cni/net.d/10-gpupoc.conflist \
            || die "node $n: cannot write its CNI configuration (podCIDR '$cidr')"
        while read -r m other_cidr other_ip; do
            [ "$m" = "$n" ] || in_ns podman exec "$n" ip route replace "$other_cidr" via "$other_ip"
        done <<< "$nodes"
    done <<< "$nodes"
    k wait --for=condition=Ready node --all --timeout=120s >/dev/null
}

# A forwarder from the host's 127.0.0.1:PORT to ADDRESS inside the namespace (socat; its argv names the namespace,
# so host_state sees one left behind). Its pid in $state/forward-NAME.pid.
forward() {
    local port=$1 address=$2 name=$3
    stop_forward "$state/forward-$name.pid"
    setsid socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" \
        "EXEC:nsenter --net=/run/netns/$NETNS socat STDIO TCP\:${address//:/\\:},nofork" \
        >"$state/forward-$name.log" 2>&1 < /dev/null &
    echo $! > "$state/forward-$name.pid"
    sleep 0.2
    kill -0 "$!" 2>/dev/null || die "the $name forwarder on 127.0.0.1:$port stopped: $(tail -1 "$state/forward-$name.log")"
}

# A forwarder's pid file: stopped if it still names our socat (not a pid reused since), then removed.
stop_forward() {
    local pid
    [ -f "$1" ] || return 0
    pid=$(cat "$1")
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "socat.*$NETNS"; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$1"
}

# The API server's port, published on the namespace's 127.0.0.1, forwarded from the host's 127.0.0.1.
forward_api() {
    local server port
    server=$(k config view -o jsonpath='{.clusters[0].cluster.server}')
    port=${server##*:}
    forward "$port" "127.0.0.1:$port" api
    sed "s#$server#https://127.0.0.1:$port#" "$inside_kubeconfig" > "$KUBECONFIG_OUT"
    for _ in $(seq 50); do
        kubectl_host get --raw /readyz >/dev/null 2>&1 && return
        sleep 0.2
    done
    die "the API server is not reachable through 127.0.0.1:$port (socat forwarder, pid $(cat "$state/forward-api.pid"))"
}
kubectl_host() { "$bin/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

# Kueue from the chart in its own Go module, running the kueue binary the sim builds, in an image built here under
# the name the release publishes (registry.k8s.io/kueue/kueue:<pin>), loaded into every node with the kind
# profile's trainer image (harness/sim/kind_node.py); never pulled.
# No ServiceMonitor: no Prometheus operator runs here (kind/up.sh installs kube-prometheus-stack).
install_kueue() {
    local version chart images
    version=$(pin kueue)
    chart=$(go env GOMODCACHE)/sigs.k8s.io/kueue@$version/charts/kueue
    [ -d "$chart" ] || (cd "$here" && go mod download "sigs.k8s.io/kueue@$version") || die "Kueue $version's module cannot be downloaded"
    images=$state/images
    rm -rf "$images"
    (cd "$here" && "$PYTHON" -m harness.sim.kind_node --cluster "$images") >/dev/null
    for archive in "$images"/*.tar; do
        in_ns kind load image-archive "$archive" --name "$CLUSTER" >"$state/load.log" 2>&1 \
            || die "kind load image-archive $archive failed: $(tail -1 "$state/load.log")"
    done
    say "images built here and loaded: $(cd "$images" && echo *.tar)"
    chart_sets kueue
    in_ns "$bin/helm" --kubeconfig "$inside_kubeconfig" upgrade --install kueue "$chart" --namespace kueue-system \
        --create-namespace "${SETS[@]}" --set enablePrometheus=false \
        --set controllerManager.manager.image.repository=registry.k8s.io/kueue/kueue \
        --set controllerManager.manager.image.tag="$version" --set controllerManager.manager.image.pullPolicy=Never \
        --wait --timeout 3m >"$state/kueue.log" 2>&1 \
        || die "helm install of Kueue $version failed ($(tail -1 "$state/kueue.log")); its pods: $(k -n kueue-system get events --field-selector type=Warning -o jsonpath='{.items[-1:].message}')"
    say "Kueue $version from its chart: $(k -n kueue-system get deploy -o jsonpath='{.items[*].status.readyReplicas}') ready"
}

# Volcano from the chart in its module: scheduler, controllers and admission webhook (whose init Job makes the
# webhook's certificate with openssl and kubectl), each in an image built here under its published name.
install_volcano() {
    local version chart
    version=$(pin volcano)
    chart=$(go env GOMODCACHE)/volcano.sh/volcano@$version/installer/helm/chart/volcano
    [ -d "$chart" ] || (cd "$here" && go mod download "volcano.sh/volcano@$version") || die "Volcano $version's module cannot be downloaded"
    chart_sets volcano
    in_ns "$bin/helm" --kubeconfig "$inside_kubeconfig" upgrade --install volcano "$chart" --namespace volcano-system \
        --create-namespace "${SETS[@]}" --set basic.image_pull_policy=Never --wait --timeout 3m >"$state/volcano.log" 2>&1 \
        || die "helm install of Volcano $version failed ($(tail -1 "$state/volcano.log")); its pods: $(k -n volcano-system get events --field-selector type=Warning -o jsonpath='{.items[-1:].message}')"
    say "Volcano $version from its chart: $(k -n volcano-system get deploy -o jsonpath='{range .items[*]}{.metadata.name}={.status.readyReplicas} {end}')"
}

# Prometheus (kind/monitoring.yaml) and kube-state-metrics (its own examples/standard), then the host's
# 127.0.0.1:$PROMETHEUS_PORT forwarded to Prometheus' NodePort on the control-plane node.
# Below the ephemeral ports (32768-60999 here), where an outgoing connection can hold it (CI, 2026-12-06: 39090 in use),
# and outside every sim's port range (18000-32999: a multi-cluster worker sim's Prometheus had 19090, mt41 2026-12-08).
PROMETHEUS_PORT=${GPUPOC_KIND_PROMETHEUS_PORT:-17090}
install_monitoring_here() {
    local ksm config node_ip
    ksm=$(go env GOMODCACHE)/k8s.io/kube-state-metrics/v2@$(pin kube-state-metrics)/examples/standard
    [ -d "$ksm" ] || (cd "$here" && go mod download "k8s.io/kube-state-metrics/v2@$(pin kube-state-metrics)") \
        || die "kube-state-metrics' module cannot be downloaded"
    k apply --server-side --field-manager gpupoc-kind -k "$ksm" >/dev/null
    config=$(sha256sum "$here/kind/monitoring.yaml" | cut -c1-12)
    sed -e "s#PROMETHEUS_IMAGE#$(cd "$here" && "$PYTHON" -c 'from harness.sim.kind_node import PROMETHEUS_IMAGE; print(PROMETHEUS_IMAGE)')#" \
        -e "s#CONFIG_HASH#$config#" "$here/kind/monitoring.yaml" | k apply --server-side --field-manager gpupoc-kind -f - >/dev/null
    k -n kube-system rollout status deployment/kube-state-metrics --timeout=120s >/dev/null \
        || die "kube-state-metrics is not ready: $(k -n kube-system get events --field-selector type=Warning -o jsonpath='{.items[-1:].message}')"
    k -n kube-system rollout status deployment/prometheus --timeout=120s >/dev/null \
        || die "Prometheus is not ready: $(k -n kube-system get events --field-selector type=Warning -o jsonpath='{.items[-1:].message}')"
    node_ip=$(k get node "$CLUSTER-control-plane" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    forward "$PROMETHEUS_PORT" "$node_ip:30090" prometheus
    for _ in $(seq 50); do
        curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" >/dev/null && break
        sleep 0.2
    done
    curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" >/dev/null \
        || die "Prometheus does not answer on 127.0.0.1:$PROMETHEUS_PORT (forwarder to $node_ip:30090)"
    say "Prometheus and kube-state-metrics as pods; Prometheus at http://127.0.0.1:$PROMETHEUS_PORT"
}

up() {
    require
    mkdir -p "$state"
    bash "$here/kind/node-image.sh"
    local start; start=$(date +%s)
    # a namespace with no record of the host before it was left by a run that was killed, from another GPUPOC_HOME:
    # taken down first, so that this up records the host as it is and down can compare (CI, 2026-12-07)
    if ip netns list | grep -qw "$NETNS" && [ ! -f "$state/host-before" ]; then
        say "namespace $NETNS was left by an earlier run (no record of the host before it): taking it down first"
        down
    fi
    if ! ip netns list | grep -qw "$NETNS"; then
        host_state > "$state/host-before"
        mountpoint -q /run/netns || touch "$state/made-run-netns"
        ip netns add "$NETNS"
        ip -n "$NETNS" link set lo up
    fi
    # kind mounts the host's /lib/modules (read-only) into every node; this machine has none
    if [ ! -d /lib/modules ]; then mkdir /lib/modules; touch "$state/made-lib-modules"; fi
    # root here lacks CAP_SYS_RESOURCE: without these ulimits every container fails on setting its rlimits.
    # crun refuses this host's hybrid cgroups; runc runs them. netavark (not CNI) gives the nodes DNS names.
    cat > "$state/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
EOF
    if in_ns kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
        say "cluster $CLUSTER exists: kept"
        in_ns kind export kubeconfig --name "$CLUSTER" --kubeconfig "$inside_kubeconfig" >/dev/null 2>&1 \
            || die "cluster $CLUSTER exists but its kubeconfig cannot be exported: kind/here.sh down, then up"
    else
        cluster_config > "$state/cluster.yaml"
        in_ns kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$state/cluster.yaml" \
            --kubeconfig "$inside_kubeconfig" >"$state/create.log" 2>&1 \
            || die "kind create cluster failed; see $state/create.log: $(grep -m1 ERROR "$state/create.log")"
    fi
    pod_network
    simulate_gpus
    install_kueue
    install_volcano
    install_monitoring_here
    forward_api
    say "up in $(( $(date +%s) - start )) s: $(k get nodes --no-headers | wc -l) nodes Ready; KUBECONFIG=$KUBECONFIG_OUT"
}

down() {
    local start; start=$(date +%s)
    for pid in "$state"/forward-*.pid; do stop_forward "$pid"; done
    # the nodes may outlive the namespace (a reboot): a fresh namespace to delete them in
    if ip netns list | grep -qw "$NETNS" || [ -n "$(podman ps -aq --filter "label=io.x-k8s.kind.cluster=$CLUSTER" 2>/dev/null)" ]; then
        ip netns list | grep -qw "$NETNS" || ip netns add "$NETNS"
        in_ns kind delete cluster --name "$CLUSTER" >"$state/delete.log" 2>&1 \
            || say "kind delete cluster failed: $(tail -1 "$state/delete.log")"
        in_ns podman network rm --force kind >/dev/null 2>&1 || true
        ip netns delete "$NETNS"
    fi
    # `ip netns add` bind-mounts /run/netns the first time; undone when up made it and no namespace is left
    if [ -f "$state/made-run-netns" ]; then
        [ -n "$(ls -A /run/netns 2>/dev/null)" ] || umount /run/netns 2>/dev/null || true
        rm -f "$state/made-run-netns"
    fi
    if [ -f "$state/made-lib-modules" ]; then
        rmdir /lib/modules 2>/dev/null || say "/lib/modules is no longer empty: left in place"
        rm -f "$state/made-lib-modules"
    fi
    say "down in $(( $(date +%s) - start )) s"
    if [ -f "$state/host-before" ]; then
        if ! diff <(cat "$state/host-before") <(host_state) > "$state/host-diff"; then
            die "the host is not as before up: $(head -c 2000 "$state/host-diff")"
        fi
        rm -f "$state/host-before" "$state/host-diff"
        say "the host's network, rules, mounts and namespaces are as before up"
    fi
}

# make kind: up, the reference queue model, every suite on the backends installed here, the record, down (always).
# gpupoc runs as a user's would: the cluster's kubeconfig and Prometheus, the kind profile, the queue model kept.
KIND_BACKENDS=${GPUPOC_KIND_BACKENDS:-kueue,volcano,default}
# A make kind cut short (Ctrl-C, CI's limit) stops the runner first, so it cleans up its case and writes what it has,
# then takes kind down: bash runs a trap only once its foreground child ends, so the runner runs in the background
# (a cut on 2026-12-06 took kind down and left the runner going against a cluster that was gone).
RUNNER_STOP_S=60
stop_runner() {
    [ -n "${runner:-}" ] || return 0
    kill -TERM "$runner" 2>/dev/null || return 0
    say "stopping the runner (pid $runner, up to ${RUNNER_STOP_S} s for it to clean up)"
    for _ in $(seq "$RUNNER_STOP_S"); do kill -0 "$runner" 2>/dev/null || return 0; sleep 1; done
    kill -KILL "$runner" 2>/dev/null || true
}
poc() {
    local rc=0
    trap down EXIT
    trap 'stop_runner; exit 143' TERM
    trap 'stop_runner; exit 130' INT
    up
    (cd "$here" && "$PYTHON" -m harness.cli setup --kubeconfig "$KUBECONFIG_OUT" --profile profiles/kind.yaml \
        --backends "${KIND_BACKENDS/,default/}") || return
    (cd "$here" && exec "$PYTHON" -m harness.cli run --kubeconfig "$KUBECONFIG_OUT" --profile profiles/kind.yaml \
        --prometheus-url "http://127.0.0.1:$PROMETHEUS_PORT" --backends "$KIND_BACKENDS" --queue-model keep \
        --allow-destructive "kind-$CLUSTER" "$@") &
    runner=$!
    wait "$runner" || rc=$?
    runner=
    return "$rc"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    poc) shift; poc "$@" ;;
    env) echo "KUBECONFIG=$KUBECONFIG_OUT GPUPOC_PROMETHEUS_URL=http://127.0.0.1:$PROMETHEUS_PORT" ;;
    *) die "usage: kind/here.sh up|down|env|poc [gpupoc run's options]" ;;
esac
