"""A sweep's measured points drawn one line per backend (the capacity curves side by side); timelines are not."""

from __future__ import annotations

from typing import Any

from harness.record.charts import across_backends, evidence_charts


def evidence(criterion: str, style: str, points: list[tuple[float, float]]) -> dict[str, Any]:
    return {"criterion": criterion, "series": {"curve": {"TTFT p99": points}},
            "charts": [{"key": "curve", "title": "t", "ylabel": "seconds", "xlabel": "req/s", "style": style}]}


def test_points_charts_are_drawn_side_by_side_one_line_per_backend() -> None:
    charts = across_backends([("kueue", evidence("inference.capacity", "points", [(1, 0.1), (4, 0.3)])),
                              ("volcano", evidence("inference.capacity", "points", [(1, 0.1), (5, 0.9)])),
                              ("kueue", evidence("training.queue_wait", "steps", [(0, 1), (5, 2)]))])
    assert len(charts) == 1 and "inference.capacity: TTFT p99, per backend" in charts[0]
    assert "kueue" in charts[0] and "volcano" in charts[0]
    assert len(evidence_charts(evidence("training.queue_wait", "steps", [(0, 1)]))) == 1  # each cell keeps its own
