"""Charts of an evidence's timelines as inline SVG (matplotlib, no external resources)."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STATE_ORDER = ("pending", "queued", "bound", "admitted", "running", "succeeded", "failed", "preempted", "deleted")


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: the SVG is inlined in HTML


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 2.6))
    for name, points in series.items():
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=name, drawstyle="steps-post")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("seconds")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    return _svg(fig)


def pods_over_time(timeline: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Pods in each state (bound, running) over time, from the Pod rows of a timeline."""
    current: dict[str, str] = {}
    series: dict[str, list[tuple[float, float]]] = {"bound or running": [], "running": []}
    for row in sorted((r for r in timeline if r.get("kind") == "Pod"), key=lambda r: float(r.get("t", 0))):
        current[str(row["name"])] = str(row["state"])
        t = float(row.get("t", 0))
        series["bound or running"].append((t, sum(1 for s in current.values() if s in ("bound", "running"))))
        series["running"].append((t, sum(1 for s in current.values() if s == "running")))
    return series if series["running"] else {}


def evidence_charts(evidence: dict[str, Any]) -> list[str]:
    charts = []
    if evidence.get("series"):
        charts.append(line_chart(f"{evidence['criterion']}: shares over the contended window",
                                 evidence["series"], "share"))
    pods = pods_over_time(evidence.get("timeline") or [])
    if pods:
        charts.append(line_chart(f"{evidence['criterion']}: pods over time", pods, "pods"))
    return charts
