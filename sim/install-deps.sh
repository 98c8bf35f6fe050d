#!/usr/bin/env bash
# System packages the sim needs: Prometheus (Debian package, run as a plain process).
# Go is required too and must be installed beforehand (Go 1.26+ on PATH).
set -euo pipefail
if ! command -v go >/dev/null; then
  echo "gpupoc: Go toolchain not found on PATH: install Go 1.26 or newer, then re-run" >&2
  exit 2
fi
if ! command -v prometheus >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  else
    echo "gpupoc: Prometheus not found: run 'sudo apt-get install -y prometheus'" >&2
    exit 2
  fi
fi
