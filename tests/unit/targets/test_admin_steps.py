"""The admin's client is for what belongs to the sim itself, never a case's measurement: every place that touches it
is listed here with what it does (a new one fails this test until it is listed and justified)."""

from __future__ import annotations

import re

from harness.core.paths import REPO_ROOT

ADMIN_STEPS = {
    "harness/run/session.py": "the reference queue model, applied before the cases (--queue-model apply); the sweep "
                              "deleting the namespaces the project's tests made",
    "harness/scenarios/scale.py": "the scale suite's simulated nodes added and removed, its queue model at size",
    "harness/cli/cluster.py": "gpupoc setup, clean and rbac --apply: an admin's commands",
    "harness/run/collect.py": "reads the admin's credentials only to redact them wherever they would appear",
    "harness/run/fixtures.py": "the per-test namespace of the project's own tests (no case of the suites asks for one)",
    "suites/operations/test_multicluster.py": "MultiKueue's join of the case's worker sims (and its undoing)",
}
USES = re.compile(r"\.admin_api\b|\.admin\b(?! is)|\.as_admin\(\)|connect_to\([^)]*admin=True")


def test_only_the_listed_places_act_as_the_sims_admin() -> None:
    found = {str(p.relative_to(REPO_ROOT)) for top in ("harness", "suites") for p in (REPO_ROOT / top).rglob("*.py")
             if USES.search(p.read_text()) and "targets" not in p.relative_to(REPO_ROOT).parts[:2]}
    assert found == set(ADMIN_STEPS), f"acting as the admin, not listed: {sorted(found - set(ADMIN_STEPS))}; " \
                                      f"listed, no longer acting: {sorted(set(ADMIN_STEPS) - found)}"
