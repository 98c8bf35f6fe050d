#!/usr/bin/env bash
# System packages gpupoc needs: Prometheus (run by the sim as a plain process) and Chromium
# (the headless check of the HTML record). Go 1.26+ must be on PATH already.
set -euo pipefail
if ! command -v go >/dev/null; then
  echo "gpupoc: Go toolchain not found on PATH: install Go 1.26 or newer, then re-run" >&2
  exit 2
fi
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "gpupoc: missing ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'" >&2
    exit 2
  fi
fi
