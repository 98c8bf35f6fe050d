"""Charts of an evidence's timelines as inline SVG (matplotlib, no external resources)."""

from __future__ import annotations

import io
from typing import Any


def _pyplot() -> Any:
    """matplotlib on first use (it costs a third of a second to import; most commands draw nothing)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _svg(fig: Any) -> str:
    plt = _pyplot()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: the SVG is inlined in HTML


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], ylabel: str, xlabel: str = "seconds") -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 2.6))
    for name, points in series.items():
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=name, drawstyle="steps-post")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    return _svg(fig)


def evidence_charts(evidence: dict[str, Any]) -> list[str]:
    """The charts the criterion declared (Criterion.charts), drawn from the evidence's series of that key."""
    series = evidence.get("series") or {}
    return [line_chart(f"{evidence['criterion']}: {spec['title']}", series[spec["key"]], spec["ylabel"],
                       spec.get("xlabel", "seconds"))
            for spec in evidence.get("charts") or [] if series.get(spec["key"])]
