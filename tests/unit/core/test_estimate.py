"""A deciding value with its uncertainty: the same threshold gives PASS, FAIL or INCONCLUSIVE from recorded
samples, and a case that cannot decide pools its runs."""

from __future__ import annotations

import pytest

from harness.core import estimate as est
from harness.core.errors import CriterionViolation, Inconclusive
from harness.criteria import AT_LEAST, AT_MOST, Criterion, Threshold
from harness.record.evidence import Evidence

# recorded queue waits (s) of one queue: tight, spread around the threshold, and far beyond it
TIGHT = [1.0 + 0.01 * i for i in range(60)]
AROUND = [6.0 + 0.1 * ((i * 37) % 40) for i in range(60)]  # 6.0-9.9 s
SLOW = [20.0 + 0.1 * i for i in range(60)]

CRITERION = Criterion("t.wait", "waits", (Threshold("p95_s", "p95 wait", AT_MOST, " s"),
                                          Threshold("min_share", "share kept", AT_LEAST),
                                          Threshold("max_lost", "jobs lost", AT_MOST)))


def evidence(before: list | None = None, lag: float | None = None) -> Evidence:
    return Evidence.of(CRITERION, "b", {"p95_s": 9.5, "min_share": 0.8, "max_lost": 0}, before,
                       (lambda: lag) if lag is not None else None)


@pytest.mark.parametrize("samples, verdict", [(TIGHT, est.PASS), (AROUND, est.INCONCLUSIVE), (SLOW, est.FAIL)])
def test_one_threshold_three_verdicts_from_recorded_samples(samples: list[float], verdict: str) -> None:
    assert est.decide(est.percentile(samples, 0.95), 9.5, "<=") == verdict


def test_the_percentile_interval_holds_the_point_and_says_how_it_was_made() -> None:
    p95 = est.percentile(AROUND, 0.95)
    assert p95.low <= p95.value <= p95.high
    assert p95.low <= 9.5 < p95.high and "bootstrap interval (too few samples" in p95.how
    big = est.percentile([i / 10 for i in range(1000)], 0.95)
    assert "order-statistic" in big.how and big.low < 94.9 < big.high
    small = est.percentile([1.0, 2.0, 3.0], 0.99)
    assert small.high == 3.0 and "too few samples" in small.how and "bootstrap" in small.how
    six = est.percentile([4.0, 8.0, 12.0, 16.0, 20.0, 24.0], 0.95)  # a queue admitting one job at a time
    assert est.decide(six, 17, "<=") == est.INCONCLUSIVE, six  # 6 waits cannot put its p95 past 17 s for sure


def test_shares_and_rates_are_wilson_intervals() -> None:
    share = est.wilson(30, 40)
    assert share.value == 0.75 and share.low < 0.75 < share.high
    assert est.decide(share, 0.8, ">=") == est.INCONCLUSIVE
    assert est.decide(est.wilson(390, 400), 0.8, ">=") == est.PASS
    assert est.decide(est.wilson(100, 400), 0.8, ">=") == est.FAIL
    assert est.wilson(0, 0).low == 0.0 and est.wilson(0, 0).high == 1.0


def test_a_one_shot_duration_carries_its_timestamps_and_the_observation_lag() -> None:
    took = est.duration(29.6, resolution_s=1.0, lag_s=0.2)
    assert (took.low, took.high) == (pytest.approx(28.4), pytest.approx(30.6))
    assert est.decide(took, 30.0, "<=") == est.INCONCLUSIVE
    assert est.decide(est.duration(12.0, 1.0, 0.2), 30.0, "<=") == est.PASS
    assert est.decide(est.duration(120.0, 1.0, 0.2), 30.0, "<=") == est.FAIL


def test_a_fairness_index_gets_a_bootstrap_over_each_tenants_jobs_the_same_every_time() -> None:
    from harness.criteria.training import queue_fairness as fairness
    expected = {"a": 0.75, "b": 0.25}
    jobs = [fairness.Interval("a", t, t + 5, 4) for t in range(0, 60, 2)] + [
        fairness.Interval("b", t, t + 5, 4) for t in range(1, 60, 6)]  # 30 and 10 jobs: a 0.75 / 0.25 split
    jain = fairness.with_interval(jobs, (3.0, 57.0), expected, fairness.jain_index)
    assert jain.low <= jain.value <= jain.high and est.decide(jain, 0.95, ">=") == est.PASS
    assert jain == fairness.with_interval(jobs, (3.0, 57.0), expected, fairness.jain_index)
    even = fairness.with_interval(jobs, (3.0, 57.0), {"a": 0.5, "b": 0.5}, fairness.max_deviation)
    assert est.decide(even, 0.10, "<=") == est.FAIL and "a 29, b 10" in even.how
    assert est.mean(TIGHT) == est.mean(TIGHT) and est.mean(TIGHT).high < 1.4


def test_a_late_tenants_wait_counts_in_the_early_tenants_job_lengths_and_pools_as_the_median_run() -> None:
    """A RayJob's own cluster start and teardown lengthen every job: the wait is judged in those lengths (recorded:
    kuberay alone 5.5 s over 6.2-s jobs; FIFO waits out the early backlog, several job lengths)."""
    from harness.criteria.training import queue_fairness as fairness
    holds = [6.0 + 0.01 * i for i in range(44)]
    prompt = fairness.in_job_lengths(5.5, holds, lag_s=0.05)
    assert prompt.low < prompt.value < prompt.high and est.decide(prompt, 2.0, "<=") == est.PASS
    assert "5.5 s over the median of 44 job lengths" in prompt.how
    assert est.decide(fairness.in_job_lengths(40.0, holds, 0.05), 2.0, "<=") == est.FAIL
    assert est.decide(fairness.in_job_lengths(12.4, holds, 0.5), 2.0, "<=") == est.INCONCLUSIVE
    runs = est.pool(est.pool(fairness.in_job_lengths(5.5, holds, 0.05), fairness.in_job_lengths(9.0, holds, 0.05)),
                    fairness.in_job_lengths(6.0, holds, 0.05))
    assert runs.runs == 3 and runs.value == pytest.approx(6.0 / 6.215, abs=0.01) and runs.low < runs.value
    with pytest.raises(ValueError, match="reaches zero"):
        est.quotient(est.exact(1.0), est.exact(0.0), "none")
    assert fairness.hold_times([fairness.Interval("a", 0, 5, 4), fairness.Interval("a", 2, 9, 4),
                                fairness.Interval("b", 0, 5, 4)], "a", before=8.0) == [5]


def test_pooling_runs_narrows_a_percentile_and_counts_runs() -> None:
    first = est.percentile(AROUND[:20], 0.5)
    pooled = est.pool(first, est.percentile(AROUND[20:], 0.5))
    assert pooled.runs == 2 and len(pooled.samples) == 60 and pooled.width <= first.width
    shares = est.pool(est.wilson(30, 40), est.wilson(31, 40))
    assert shares.value == pytest.approx(61 / 80) and "2 runs pooled" in shares.how


def test_a_check_decides_from_its_whole_interval() -> None:
    ev = evidence()
    ev.expect("p95_s", est.percentile(TIGHT, 0.95))
    ev.expect("max_lost", 0)
    ev.verdict()
    ev = evidence()
    ev.expect("p95_s", est.percentile(SLOW, 0.95))
    ev.expect("min_share", est.wilson(30, 40))  # undecided, but a miss elsewhere decides: FAIL
    with pytest.raises(CriterionViolation, match=r"p95_s: 25\.\d+ s \[.*\] \(wanted <= 9.5 s\)"):
        ev.verdict()


def test_an_undecided_check_is_inconclusive_and_the_next_run_pools_with_it() -> None:
    ev = evidence()
    ev.expect("p95_s", est.percentile(AROUND[:30], 0.95))
    with pytest.raises(Inconclusive, match="not decided"):
        ev.verdict()
    assert ev.checks[0].verdict == est.INCONCLUSIVE
    again = evidence(before=ev.checks)
    again.expect("p95_s", est.percentile(AROUND[30:], 0.95))
    with pytest.raises(Inconclusive):
        again.verdict()
    assert again.checks[0].runs == 2 and "60 samples" in again.checks[0].how


def test_a_bare_duration_is_widened_by_the_lag_measured_in_the_case() -> None:
    ev = evidence(lag=0.4)
    check = ev.expect("p95_s", 9.7)
    assert (check.low, check.high) == (pytest.approx(9.3), 9.7) and ev.host["observation_lag_s"] == 0.4
    with pytest.raises(Inconclusive):
        ev.verdict()
    exact = evidence(lag=0.4).expect("max_lost", 1)
    assert exact.verdict == est.FAIL and exact.low == exact.high == 1


def test_a_record_keeps_what_pools_repeated_runs_into_one_interval() -> None:
    from harness.record.fit import pooled_verdict
    first = est.percentile(AROUND[:30], 0.5)
    recorded = {"measured": first.value, "low": first.low, "high": first.high, "how": first.how, "runs": 1,
                "pool": est.kept(first)}
    back = est.from_record(recorded)
    assert back is not None and back.samples == first.samples and back.kind == "percentile"
    assert est.kept(est.exact(3.0)) is None and est.from_record({"measured": 3.0, "low": 3.0, "high": 3.0}) is None
    second = est.from_record({**recorded, "pool": est.kept(est.percentile(AROUND[30:], 0.5))})
    said = pooled_verdict([back, second], 9.5, "<=")
    assert said.startswith(", pooled [") and said.endswith(": PASS"), said
    assert pooled_verdict([back, None], 9.5, "<=") == ""


def test_a_fairness_index_pooled_over_repeated_runs_joins_their_jobs_and_narrows() -> None:
    """Each run's jobs join their tenant's group (the index over both windows): a straddling interval narrows."""
    from harness.criteria.training.queue_fairness import Interval, jain_index, with_interval
    configured = {"team-a": 0.75, "team-b": 0.25}
    runs = []
    for shift in (0.0, 1.0, 2.0):  # team-b's jobs of uneven lengths: a wide interval from one window
        jobs = [Interval("team-a", i * 2.0, i * 2.0 + 6 + shift, 4) for i in range(12)]
        jobs += [Interval("team-b", i * 6.0, i * 6.0 + (1 + (i % 3) * 4), 4) for i in range(4)]
        runs.append(with_interval(jobs, (0.0, 24.0), configured, jain_index))
    one, pooled = runs[0], est.pool(est.pool(runs[0], runs[1]), runs[2])
    assert one.kind == "groups:jain_index" and pooled.runs == 3
    assert pooled.width < one.width and pooled.low > one.low
    assert "over the runs' windows" in pooled.how
    # kept in a record and read back, it pools the same (a case repeated in a later process)
    check = {"measured": one.value, "low": one.low, "high": one.high, "how": one.how, "pool": est.kept(one), "runs": 1}
    again = est.from_record(check)
    assert again is not None and est.pool(again, runs[1]) == est.pool(one, runs[1])
