#!/usr/bin/env bash
# Refresh docs/record.png, the README's picture: the top of a `make poc` record (its scenario fit first), taken by
# Debian's headless Chromium from the file on disk (the page loads nothing over the network).
# Usage: bash docs/screenshot.sh [reports/<run id>/record.html]   (default: the newest make poc record)
set -euo pipefail
cd "$(dirname "$0")/.."
record=${1:-$(ls -t reports/poc-*/record.html 2>/dev/null | grep -v -- '-real-nodes/' | head -1 || true)}
[ -n "$record" ] && [ -f "$record" ] || { echo "screenshot: no record (run make poc, or name a record.html)" >&2; exit 2; }
command -v chromium > /dev/null || { echo "screenshot: Debian's chromium is not installed" >&2; exit 2; }
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 --no-first-run \
  --virtual-time-budget=5000 --screenshot="$PWD/docs/record.png" "file://$PWD/$record" > /dev/null 2>&1
echo "docs/record.png: the top of $record ($(stat -c %s docs/record.png) bytes)"
