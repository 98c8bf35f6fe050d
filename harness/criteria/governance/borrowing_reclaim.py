"""Governance 2 — borrowing and reclaim: a tenant borrows idle quota of another (between its quota and its
limit), the scheduler's API object and its metric both say so; when the lender submits within its quota it
gets its GPUs back within the threshold, and only the borrower's jobs are the victims."""

from __future__ import annotations

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.borrowing_reclaim",
    "While the lender is idle the borrower holds GPUs beyond its quota up to its limit (borrowed in the queue's "
    "API object and in the scheduler's metric); when the lender submits within its quota it holds its quota "
    "within the threshold, and the jobs evicted for it are the borrower's only, each with the scheduler's reason.",
    (Threshold("min_borrowed_share", "GPUs borrowed (beyond the quota) as a share of what the limit allows (1.0: "
               "all of it)", AT_LEAST),
     Threshold("max_borrowed_mismatch", "|borrowed GPUs in the API object - in the scheduler's metric|", AT_MOST,
               " GPUs"),
     Threshold("reclaim_within_s", "seconds from the lender's submission to it holding its quota", AT_MOST, " s"),
     Threshold("max_wrong_victims", "jobs evicted for the lender that were not the borrower's borrowed ones",
               AT_MOST, " jobs")),
    (Chart("gpus", "GPUs held per tenant", "GPUs"),)))


def borrowed(held_gpus: float, quota_gpus: int) -> float:
    return max(0.0, held_gpus - quota_gpus)


def borrowed_share(held_gpus: float, quota_gpus: int, limit_gpus: int) -> float:
    """Share of the borrowing allowance (limit - quota) in use; 1.0 when there is none to use."""
    allowance = limit_gpus - quota_gpus
    return 1.0 if allowance <= 0 else max(0.0, min(held_gpus, limit_gpus) - quota_gpus) / allowance


def wrong_victims(victims: dict[str, str], lender: str, borrower: str, borrowed_jobs: int) -> int:
    """victims: job -> tenant. The lender's own jobs are wrong victims, and so is any borrower job beyond
    the number it had borrowed (those beyond ran within its quota)."""
    of_lender = sum(1 for t in victims.values() if t == lender)
    of_borrower = sum(1 for t in victims.values() if t == borrower)
    others = len(victims) - of_lender - of_borrower
    return of_lender + others + max(0, of_borrower - borrowed_jobs)
