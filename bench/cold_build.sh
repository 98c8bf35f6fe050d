#!/usr/bin/env bash
# Cold build time per component: empty build root, module cache and Go build cache in a temp dir.
# Run: bash bench/cold_build.sh   (takes a long time; uses the network to the module proxy)
set -euo pipefail
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
GPUPOC_HOME="$tmp/home" GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" gpupoc sim build "$@"
