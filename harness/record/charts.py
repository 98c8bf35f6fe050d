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


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], ylabel: str, xlabel: str = "seconds",
               style: str = "steps") -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 2.6))
    drawn = {"drawstyle": "steps-post"} if style == "steps" else {"marker": "o"}
    for name, points in series.items():
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=name, **drawn)
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
                       spec.get("xlabel", "seconds"), spec.get("style", "steps"))
            for spec in evidence.get("charts") or [] if series.get(spec["key"])]


def across_backends(evidences: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A chart per measured-points chart a criterion declared (style "points": a sweep's stages), its lines drawn
    one per backend, from (backend, evidence) pairs: the capacity curves of the backends side by side."""
    lines: dict[tuple[str, str, str, str], dict[str, list[tuple[float, float]]]] = {}
    for backend, evidence in evidences:
        series = evidence.get("series") or {}
        for spec in evidence.get("charts") or []:
            if spec.get("style") != "points":
                continue
            for name, points in (series.get(spec["key"]) or {}).items():
                key = (evidence["criterion"], name, spec["ylabel"], spec.get("xlabel", "seconds"))
                if points:
                    lines.setdefault(key, {})[backend] = points
    return [line_chart(f"{criterion}: {name}, per backend", by_backend, ylabel, xlabel, "points")
            for (criterion, name, ylabel, xlabel), by_backend in lines.items()]
