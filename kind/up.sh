#!/usr/bin/env bash
# kind/up.sh: a kind cluster for gpupoc on a laptop without GPUs (Docker or Podman needed; see kind/README.md).
#   1. a kind cluster on Kubernetes v1.36 (pinned node image), one control plane and GPUPOC_KIND_WORKERS workers;
#   2. simulated GPUs on the workers: GPU Feature Discovery's labels and nvidia.com/gpu in the nodes' capacity;
#   3. Prometheus (kube-prometheus-stack) and kube-state-metrics, the schedulers with their own Helm charts at
#      sim/versions.toml's pins: Kueue, Volcano, KAI-Scheduler, the KubeRay operator;
#   4. `gpupoc setup` with profiles/kind.yaml (the reference queue model).
# Re-running it is safe: an existing cluster is kept, charts are upgraded in place, labels and capacity re-set.
# Usage: bash kind/up.sh      (GPUPOC_KIND_NAME, GPUPOC_KIND_WORKERS, GPUPOC_KIND_GPUS_PER_NODE to change)
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSIONS="$REPO_ROOT/sim/versions.toml"
PROFILE="$REPO_ROOT/profiles/kind.yaml"
CLUSTER=${GPUPOC_KIND_NAME:-gpupoc}
CONTEXT="kind-$CLUSTER"
WORKERS=${GPUPOC_KIND_WORKERS:-2}
GPUS_PER_NODE=${GPUPOC_KIND_GPUS_PER_NODE:-4}   # profiles/kind.yaml: gpu.per_node
HARNESS_IMAGE=gpupoc:dev   # profiles/kind.yaml: workloads.model_server.image
# kind v0.33.0's image for Kubernetes v1.36 (the sim runs v1.36.3; kind publishes v1.36.4). The digest is the
# one that release lists: an image built for another kind release may not start.
NODE_IMAGE="kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed"
# Not in sim/versions.toml: the sim runs its own Prometheus; kind runs the community chart.
KUBE_PROMETHEUS_STACK_VERSION="81.6.2"
MONITORING_NAMESPACE=monitoring
KUEUE_CHART="oci://registry.k8s.io/kueue/charts/kueue"
KAI_CHART="oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler"
VOLCANO_REPO="https://volcano-sh.github.io/helm-charts"
KUBERAY_REPO="https://ray-project.github.io/kuberay-helm/"
PROMETHEUS_REPO="https://prometheus-community.github.io/helm-charts"
HELM_TIMEOUT=10m

say() { printf 'kind/up.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

python_bin() {
  if [ -x "$REPO_ROOT/.venv/bin/python" ]; then echo "$REPO_ROOT/.venv/bin/python"; else echo python3; fi
}
PYTHON=$(python_bin)

# A version from sim/versions.toml: the same pins the sim is built from.
pin() {
  "$PYTHON" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))[sys.argv[2]]["version"])' \
    "$VERSIONS" "$1"
}

# helm: the one `gpupoc sim build --with helm` built (the version the chart checks use), else helm on PATH.
helm_bin() {
  local root=${GPUPOC_BUILD_HOME:-${GPUPOC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupoc}}
  if [ -x "$root/bin/helm" ]; then echo "$root/bin/helm"; else command -v helm; fi
}

require_tools() {
  local missing=()
  for tool in kind kubectl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  command -v docker >/dev/null || command -v podman >/dev/null || missing+=("docker or podman")
  helm_bin >/dev/null || missing+=("helm (or run: gpupoc sim build --with helm)")
  [ -f "$PROFILE" ] || missing+=("$PROFILE")
  [ "${#missing[@]}" -eq 0 ] || die "missing: ${missing[*]}"
}

# The flags a chart is installed with: harness/setup/kind_charts.py's --set flags and its values file with the POC's
# reference scheduler configuration, the ones tests/suites/test_kind_charts.py renders.
chart_sets() {
  local listed
  listed=$(cd "$REPO_ROOT" && "$PYTHON" -c 'import sys
from harness.setup.kind_charts import kind_install_flags
from harness.config.versions import load_pins
print("\n".join(kind_install_flags(sys.argv[1], load_pins())))' "$1")
  SETS=()
  [ -z "$listed" ] || mapfile -t SETS <<< "$listed"
}

HELM=""
SETS=()
k() { kubectl --context "$CONTEXT" "$@"; }
h() { "$HELM" --kube-context "$CONTEXT" "$@"; }

create_cluster() {
  if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    say "cluster $CLUSTER exists: kept"
    return
  fi
  local config
  config=$(mktemp)
  {
    echo "kind: Cluster"
    echo "apiVersion: kind.x-k8s.io/v1alpha4"
    echo "nodes:"
    echo "- role: control-plane"
    for _ in $(seq 1 "$WORKERS"); do echo "- role: worker"; done
  } > "$config"
  kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$config" --wait 180s
  rm -f "$config"
}

worker_nodes() {
  k get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}'
}

# GFD's labels for the simulated GPUs, from the harness's own definition (the sim's nodes carry the same).
gpu_labels() {
  "$PYTHON" - "$GPUS_PER_NODE" <<'PY'
import sys
sys.path.insert(0, ".")
from harness.sim.config import GpuSpec
from harness.sim.nodes import SIMULATED_LABEL, gfd_labels
labels = {**gfd_labels(GpuSpec(count=int(sys.argv[1]))), SIMULATED_LABEL: "true"}
print("\n".join(f"{key}={value}" for key, value in labels.items()))
PY
}

simulate_gpus() {
  local labels node listed
  listed=$(cd "$REPO_ROOT" && gpu_labels)   # a failure stops the script here (set -e), not in a pipe
  mapfile -t labels <<< "$listed"
  for node in $(worker_nodes); do
    k label node "$node" --overwrite "${labels[@]}" >/dev/null
    # Extended resources are advertised through the status subresource (`~1` is the JSON-pointer escape of /);
    # the scheduler then counts them like a device plugin's. A kubelet restart drops them: re-run this script.
    k patch node "$node" --subresource=status --type=json \
      -p "[{\"op\": \"add\", \"path\": \"/status/capacity/nvidia.com~1gpu\", \"value\": \"$GPUS_PER_NODE\"}]" >/dev/null
    say "node $node: $GPUS_PER_NODE simulated GPUs"
  done
}

install_monitoring() {
  local values
  values=$(mktemp)
  # kube-state-metrics comes from its own pinned manifests (below), as the sim runs it; Prometheus picks up
  # every ServiceMonitor (Kueue's) and scrapes what carries the prometheus.io/scrape annotation (Volcano's).
  cat > "$values" <<'YAML'
grafana: {enabled: false}
alertmanager: {enabled: false}
kubeStateMetrics: {enabled: false}
prometheus:
  prometheusSpec:
    serviceMonitorSelectorNilUsesHelmValues: false
    podMonitorSelectorNilUsesHelmValues: false
    scrapeInterval: 15s
    additionalScrapeConfigs:
      - job_name: kube-state-metrics
        static_configs: [{targets: ["kube-state-metrics.kube-system.svc:8080"]}]
      - job_name: annotated-endpoints
        kubernetes_sd_configs: [{role: endpoints}]
        relabel_configs:
          - {source_labels: [__meta_kubernetes_service_annotation_prometheus_io_scrape], regex: "true", action: keep}
          - {source_labels: [__meta_kubernetes_service_annotation_prometheus_io_path], regex: "(.+)",
             target_label: __metrics_path__}
          - {source_labels: [__address__, __meta_kubernetes_service_annotation_prometheus_io_port],
             regex: "([^:]+)(?::\\d+)?;(\\d+)", replacement: "$1:$2", target_label: __address__}
          - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
          - {source_labels: [__meta_kubernetes_service_name], target_label: service}
YAML
  h repo add prometheus-community "$PROMETHEUS_REPO" --force-update >/dev/null
  h upgrade --install prometheus prometheus-community/kube-prometheus-stack --version "$KUBE_PROMETHEUS_STACK_VERSION" \
    --namespace "$MONITORING_NAMESPACE" --create-namespace --values "$values" --wait --timeout "$HELM_TIMEOUT"
  rm -f "$values"
  k apply --server-side --field-manager gpupoc-kind \
    -k "https://github.com/kubernetes/kube-state-metrics//examples/standard?ref=$(pin kube-state-metrics)"
}

install_schedulers() {
  local kueue volcano kai kuberay
  kueue=$(pin kueue); volcano=$(pin volcano); kai=$(pin kai-scheduler); kuberay=$(pin kuberay)
  # Helm chart versions drop the tag's "v", except KAI's, whose OCI tags keep it.
  chart_sets kueue
  h upgrade --install kueue "$KUEUE_CHART" --version "${kueue#v}" --namespace kueue-system --create-namespace \
    "${SETS[@]}" --wait --timeout "$HELM_TIMEOUT"
  chart_sets volcano
  h repo add volcano-sh "$VOLCANO_REPO" --force-update >/dev/null
  h upgrade --install volcano volcano-sh/volcano --version "${volcano#v}" --namespace volcano-system \
    --create-namespace "${SETS[@]}" --wait --timeout "$HELM_TIMEOUT"
  chart_sets kai-scheduler
  h upgrade --install kai-scheduler "$KAI_CHART" --version "$kai" --namespace kai-scheduler --create-namespace \
    "${SETS[@]}" --wait --timeout "$HELM_TIMEOUT"
  h repo add kuberay "$KUBERAY_REPO" --force-update >/dev/null
  h upgrade --install kuberay-operator kuberay/kuberay-operator --version "${kuberay#v}" --namespace ray-system \
    --create-namespace --wait --timeout "$HELM_TIMEOUT"
}

# The harness's own image (the repository's Dockerfile): profiles/kind.yaml runs its `gpupoc standin` as the model
# server (OpenAI-compatible completions, vLLM's metrics), so the inference suite runs on kind without GPUs.
load_harness_image() {
  local builder
  builder=$(command -v docker || command -v podman)
  "$builder" build -q -t "$HARNESS_IMAGE" "$REPO_ROOT" >/dev/null
  kind load docker-image "$HARNESS_IMAGE" --name "$CLUSTER" >/dev/null
  say "image $HARNESS_IMAGE built from Dockerfile and loaded into the cluster's nodes"
}

queue_model() {
  (cd "$REPO_ROOT" && "$PYTHON" -m harness.cli setup --kubeconfig "${KUBECONFIG:-$HOME/.kube/config}" \
    --context "$CONTEXT" --profile "$PROFILE")
}

main() {
  require_tools
  HELM=$(helm_bin)
  say "helm: $HELM ($("$HELM" version --short))"
  create_cluster
  simulate_gpus
  install_monitoring
  install_schedulers
  load_harness_image
  queue_model
  say "ready. Prometheus: kubectl --context $CONTEXT -n $MONITORING_NAMESPACE port-forward svc/prometheus-operated 9090"
  say "then: gpupoc run --kubeconfig ${KUBECONFIG:-$HOME/.kube/config} --context $CONTEXT --profile profiles/kind.yaml" \
      "--prometheus-url http://127.0.0.1:9090 --allow-destructive $CONTEXT"
}

# kind/here.sh sources this file for its functions (the simulated GPUs) and runs its own main.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
