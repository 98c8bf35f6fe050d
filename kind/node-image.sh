#!/usr/bin/env bash
# A kind node image built on this machine, offline: what `kind build node-image` makes, without a registry.
#
#   kind/node-image.sh            # builds localhost/gpupoc-kind-node:<kubernetes pin> into podman's store
#
# - A Debian bookworm rootfs (mmdebstrap, from Debian's mirror), with kind's base files from the kind module
#   (images/base/files) and the steps of kind's base Dockerfile;
# - containerd, runc and the CNI plugins from Debian; kubeadm, kubelet and kubectl from the sim's Kubernetes module;
# - the control-plane, etcd, CoreDNS and pause images (harness/sim/kind_node.py) preloaded into the node's containerd
#   (namespace k8s.io), as kind's builder does, so that kubeadm and the kubelet never pull.
# Cached: the image is rebuilt only when its inputs (this script, the binaries, kind's files) change.
# docs/kind-node-image.md says why each step is there, read from kind's and Kubernetes' sources.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
home=${GPUPOC_BUILD_HOME:-${GPUPOC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupoc}}
bin=$home/bin
pin() { awk -v t="[$1]" '$0==t{f=1;next} /^\[/{f=0} f&&$1=="version"{gsub(/"/,"",$3);print $3;exit}' "$here/sim/versions.toml"; }
kubernetes=$(pin kubernetes)
kind_version=$(pin kind)
image=localhost/gpupoc-kind-node:$kubernetes
work=$home/kind-node
kind_files=$(go env GOMODCACHE)/sigs.k8s.io/kind@$kind_version/images/base/files
# kind's base Dockerfile's packages, less network storage (nfs-common, open-iscsi) and fuse-overlayfs (only for
# userns, zfs or fuseblk); plus containerd, runc and the CNI plugins, which kind builds from source.
packages=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash
packages=$packages,ca-certificates,jq,procps,containerd,runc,containernetworking-plugins

say() { echo "kind node image: $*" >&2; }
die() { say "$*"; exit 1; }

for tool in podman mmdebstrap ctr containerd; do
    command -v "$tool" >/dev/null || die "$tool missing: install Debian's podman, mmdebstrap and containerd (sim/install-deps.sh)"
done
[ -d "$kind_files" ] || (cd "$here" && go mod download "sigs.k8s.io/kind@$kind_version") \
    || die "kind $kind_version's module is not in the Go module cache and cannot be downloaded"
for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns gpupoc-pause; do
    [ -x "$bin/$b" ] || die "$bin/$b missing: run \`gpupoc sim build --with kind\` first"
done

inputs=$( (cat "$0"; sha256sum "$bin"/{kubeadm,kubelet,kubectl,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd,coredns,gpupoc-pause}; \
           find "$kind_files" -type f -exec sha256sum {} + | sort; cat "$here/harness/sim/kind_node.py" "$here/harness/sim/images.py") | sha256sum | cut -c1-16)
if [ "$(podman image inspect --format '{{index .Labels "gpupoc.inputs"}}' "$image" 2>/dev/null)" = "$inputs" ]; then
    say "$image is current ($inputs)"; exit 0
fi

start=$(date +%s)
rm -rf "$work"; mkdir -p "$work"
rootfs=$work/rootfs
containerd_pid=""
trap '[ -z "$containerd_pid" ] || kill "$containerd_pid" 2>/dev/null; rm -rf "$work/containerd"' EXIT

say "Debian bookworm rootfs (mmdebstrap) ..."
mmdebstrap --quiet --variant=minbase --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' bookworm "$rootfs" >"$work/mmdebstrap.log" 2>&1 \
    || die "mmdebstrap failed; see $work/mmdebstrap.log"

say "kind $kind_version's base files and steps ..."
cp -r "$kind_files/." "$rootfs/"
chmod 0755 "$rootfs"/usr/local/bin/* "$rootfs/kind" "$rootfs/kind/bin" "$rootfs"/kind/bin/*
find "$rootfs/etc/containerd" "$rootfs/etc/default" "$rootfs/etc/sysctl.d" "$rootfs/etc/systemd/system" -type f -exec chmod 0644 {} +
rm -f "$rootfs"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service \
      "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/* \
      "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* \
      "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl* "$rootfs"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$rootfs/sbin/init"
chroot "$rootfs" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1 \
    || die "systemctl enable in the rootfs failed"
chroot "$rootfs" systemctl mask systemd-binfmt.service >/dev/null 2>&1 || die "systemctl mask in the rootfs failed"
mkdir -p "$rootfs/etc/kubernetes/manifests" "$rootfs/opt/cni/bin" "$rootfs/usr/local/sbin"
# Debian's containerd and CNI plugins live elsewhere than kind's units and configuration look for them
ln -sf /usr/bin/containerd "$rootfs/usr/local/bin/containerd"
for p in host-local loopback ptp portmap; do ln -sf "/usr/lib/cni/$p" "$rootfs/opt/cni/bin/$p"; done
# root here lacks CAP_SYS_RESOURCE: runc refuses the CRI's negative oom_score_adj unless containerd clamps it
sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$rootfs/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$rootfs/etc/containerd/config.toml" \
    || sed -i 's/^\(\s*\)\[plugins."io.containerd.grpc.v1.cri"\]$/&\n\1  restrict_oom_score_adj = true/' "$rootfs/etc/containerd/config.toml"
chroot "$rootfs" ctr oci spec \
    | jq '.hooks.createContainer[.hooks.createContainer|length] |= .+{"path":"/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' >"$rootfs/etc/containerd/cri-base.json"
install -m 0755 "$bin/kubeadm" "$bin/kubelet" "$bin/kubectl" "$rootfs/usr/bin/"
echo "$kubernetes" >"$rootfs/kind/version"

say "control-plane images, preloaded into the node's containerd ..."
(cd "$here" && "$python" -m harness.sim.kind_node "$work/images") >/dev/null || die "building the control-plane images failed"
state=$work/containerd
mkdir -p "$state"
cat >"$state/config.toml" <<EOF
version = 2
root = "$rootfs/var/lib/containerd"
state = "$state/run"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$state/sock"
EOF
containerd --config "$state/config.toml" >"$work/containerd.log" 2>&1 &
containerd_pid=$!
for _ in $(seq 100); do [ -S "$state/sock" ] && break; sleep 0.1; done
[ -S "$state/sock" ] || die "the image's containerd did not start; see $work/containerd.log"
for archive in "$work"/images/*.tar; do
    ctr --address "$state/sock" -n k8s.io images import --all-platforms --no-unpack --digests "$archive" >/dev/null \
        || { kill "$containerd_pid"; die "importing $archive failed"; }
done
kill "$containerd_pid"; wait "$containerd_pid" 2>/dev/null || true
containerd_pid=""

say "podman import ..."
tar -C "$rootfs" -c . | podman import --quiet \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]' --change 'ENV container=docker' \
    --change 'STOPSIGNAL SIGRTMIN+3' --change "LABEL gpupoc.inputs=$inputs" - "$image" >/dev/null
rm -rf "$rootfs" "$work/images"
say "$image built in $(( $(date +%s) - start )) s ($(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec))"
