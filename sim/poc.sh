#!/usr/bin/env bash
# `make poc`: the main job on the sim — every suite on every backend, and the acceptance record.
# The backends run side by side in parts, each part on a sim of its own that the run starts and stops
# (harness/cli/side_by_side.py). Missed thresholds are results, not errors: the exit status is non-zero
# when the run itself broke, or when an outcome differs from the reference sim's design
# (suites/expected.yaml).
set -uo pipefail
# The checkout's own harness, whatever an earlier `pip install -e` of another checkout left on PATH.
gpupoc() { "${PYTHON:-python3}" -m harness.cli "$@"; }
run_id="poc-$(date -u +%Y%m%d-%H%M%S)"
gpupoc run --run-id "$run_id" --side-by-side ${GPUPOC_POC_PARTS:-} -- -q -rfEs
status=$?
[ -f "reports/$run_id/record.json" ] || exit 2
# pytest: 0 all criteria passed, 1 some criterion failed (a result); anything else broke the run.
[ "$status" -le 1 ] || exit "$status"
# The reference sim's designed outcomes (suites/expected.yaml): the baselines FAIL, everything else passes.
gpupoc check-designed "reports/$run_id/record.json" || exit 1
# What the runner asked of the API server stays inside its least-privilege role (manifests/rbac/).
gpupoc rbac --check "reports/$run_id/requests.json"
