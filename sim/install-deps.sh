#!/usr/bin/env bash
# System packages gpupoc needs: Prometheus (run by the sim as a plain process), Chromium (the headless
# check of the HTML record), nftables (kube-proxy in the sim's namespace), the real nodes' runtime (`sim up
# --real-nodes N`: containerd 1.6, runc, the CNI bridge and host-local plugins, busybox-static for the trainer
# image) and, when GPUPOC_SIM_SCHEDULERS
# names slurm, Debian's Slurm 22.05 with slurmdbd on MariaDB, slurmrestd, JWT auth and munge, plus the
# system user slurmrestd runs as; and for kind on this machine (kind/here.sh, tests/kind): podman, netavark,
# aardvark-dns, mmdebstrap and socat. Installing starts no service (the sim starts its own processes).
# Go 1.26+ must be on PATH already.
set -euo pipefail
if ! command -v go >/dev/null; then
  echo "gpupoc: Go toolchain not found on PATH: install Go 1.26 or newer, then re-run" >&2
  exit 2
fi
# A Debian package is there when dpkg says so (some of these binaries live in /usr/sbin, off a user's PATH);
# without dpkg, when its command is on PATH.
installed() {
  if command -v dpkg-query >/dev/null; then
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
  else
    command -v "$2" >/dev/null
  fi
}
missing=()
slurm=0
case ",${GPUPOC_SIM_SCHEDULERS:-}," in *,slurm,*) slurm=1 ;; esac
wanted="prometheus:prometheus chromium:chromium nftables:nft"
wanted="$wanted containerd:containerd runc:runc containernetworking-plugins:/usr/lib/cni/bridge busybox-static:busybox"
# kind on this machine (kind/here.sh): rootful podman with netavark and aardvark-dns (the nodes' names), mmdebstrap
# for the node image's rootfs, socat for the API server's forwarder into kind's network namespace
wanted="$wanted podman:podman netavark:/usr/lib/podman/netavark aardvark-dns:/usr/lib/podman/aardvark-dns"
wanted="$wanted mmdebstrap:mmdebstrap socat:socat"
if [ "$slurm" = 1 ]; then
  wanted="$wanted slurmctld:slurmctld slurmd:slurmd slurm-client:sacctmgr slurmdbd:slurmdbd slurmrestd:slurmrestd"
  wanted="$wanted slurm-wlm-jwt-plugin:slurmrestd munge:munged mariadb-server:mariadbd"
fi
for pair in $wanted; do
  installed "${pair%%:*}" "${pair#*:}" || missing+=("${pair%%:*}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # packages must not start their services (MariaDB, munge, Slurm)
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "gpupoc: missing ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'" >&2
    exit 2
  fi
fi
if [ "$slurm" = 1 ] && ! id gpupoc-slurmrestd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    useradd --system --no-create-home --shell /usr/sbin/nologin gpupoc-slurmrestd
  else
    echo "gpupoc: slurmrestd refuses root: run 'sudo useradd --system --no-create-home gpupoc-slurmrestd'" >&2
    exit 2
  fi
fi
