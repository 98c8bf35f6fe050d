#!/usr/bin/env bash
# `make poc` until the suites exist: bring the sim up, show the cluster and GPU inventory, stop it.
set -euo pipefail
started=0
if ! gpupoc sim status >/dev/null 2>&1; then
  gpupoc sim up
  started=1
fi
trap '[ "$started" = 1 ] && gpupoc sim down' EXIT
gpupoc sim status
gpupoc inventory
