"""One record from the records of a run's parts (`gpupoc run --side-by-side`: each part a group of backends on a sim
of its own). A backend's results come from the one part that ran it; a run-wide case ran in every part, over that
part's sim, and its result is the worst of theirs, each part's evidence kept and named."""

from __future__ import annotations

from dataclasses import replace

from harness.record.model import Record, Result
from harness.record.verdict import CLUSTER as RUN_WIDE, SEVERITY


def _run_wide(found: list[tuple[str, Result]]) -> Result:
    """The worst part's result first, so the cell's one-line summary is the worst part's."""
    name_results = sorted(found, key=lambda pr: -SEVERITY.get(pr[1].outcome, 0))
    worst = name_results[0][1]
    evidence = [{**e, "statement": f"[part {name}] {e.get('statement', '')}"}
                for name, r in name_results for e in r.evidence]
    messages = [f"[part {name}] {r.message}" for name, r in name_results if r.message]
    return replace(worst, message="\n".join(messages), evidence=evidence,
                   duration_s=max(r.duration_s for _, r in name_results),
                   leftovers=[x for _, r in name_results for x in r.leftovers],
                   samples=[s for _, r in name_results for s in r.samples])


def merge(run_id: str, parts: list[tuple[str, Record]]) -> Record:
    """The run's record from (part name, part record) in the order the parts were given."""
    if not parts:
        raise ValueError("no part records to merge")
    first = parts[0][1]
    results: list[Result] = []
    run_wide: dict[str, list[tuple[str, Result]]] = {}
    for name, part in parts:
        for r in part.results:
            if r.backend == RUN_WIDE:
                run_wide.setdefault(r.nodeid, []).append((name, r))
            else:
                results.append(r)
    results += [_run_wide(found) for found in run_wide.values()]
    schedulers = {(s.get("name"), s.get("version")): s for _, p in parts for s in p.schedulers}
    return Record(
        run_id=run_id, started_at=min(p.started_at for _, p in parts), harness_version=first.harness_version,
        commit=first.commit,
        target={**first.target, "parts": [{"name": name, "run_id": p.run_id, "backends": sorted(
            {r.backend for r in p.results if r.backend != RUN_WIDE}), "target": p.target} for name, p in parts]},
        nodes=[{**n, "node": f"{name}: {n.get('node', '?')}", "part": name} for name, p in parts for n in p.nodes],
        schedulers=list(schedulers.values()),
        slurm=next((p.slurm for _, p in parts if p.slurm), {}),
        profile=first.profile, results=results,
        finished_at=max(p.finished_at for _, p in parts), interrupted=any(p.interrupted for _, p in parts),
        runner=first.runner, operations={b: o for _, p in parts for b, o in p.operations.items()},
        designed=first.designed, caveats={c: w for _, p in parts for c, w in p.caveats.items()})


def repeated(run_id: str, runs: list[Record]) -> Record:
    """One record of `gpupoc run --repeat K`: every run's results, each named by its run, so a cell holds its K
    outcomes (the verdict and the scenario fit take the worst) and each value's spread shows beside them."""
    if not runs:
        raise ValueError("no run records to put together")
    first, last = runs[0], runs[-1]
    results = [replace(r, nodeid=f"{run.run_id}: {r.nodeid}",
                       evidence=[{**e, "statement": f"[run {run.run_id}] {e.get('statement', '')}"}
                                 for e in r.evidence])
               for run in runs for r in run.results]
    return replace(last, run_id=run_id, started_at=min(r.started_at for r in runs), results=results,
                   caveats={c: w for run in runs for c, w in run.caveats.items()},
                   target={**first.target, "repeats": [r.run_id for r in runs]},
                   finished_at=max(r.finished_at for r in runs), interrupted=any(r.interrupted for r in runs))
