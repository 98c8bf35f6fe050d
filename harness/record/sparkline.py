"""A small line chart as inline SVG text: a measured value over runs, its threshold drawn in (no matplotlib: a
trend page holds hundreds of them)."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT, PAD, LEFT = 260, 50, 5, 34  # LEFT: room for the axis labels
COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "ERROR": "#e65100", "SKIP": "#9e9e9e", "UNFINISHED": "#f9a825"}
Mark = tuple[float | None, float | None, str, str]  # (measured, threshold, outcome, tooltip); outcome '': not run


def _scale(values: list[float]) -> tuple[float, float]:
    """Low and high of the y axis: every value and threshold, zero included when close (a reviewer reads sizes)."""
    low, high = min(values), max(values)
    if 0 < low < high / 2:
        low = 0.0
    if high == low:  # one value over every run: a band around it
        pad = abs(high) * 0.1 or 1.0
        low, high = (low - pad if low - pad >= 0 or low < 0 else 0.0), high + pad
    return low, high


def sparkline(marks: list[Mark]) -> str:
    """Runs left to right; the measured values joined by a line (broken where nothing was measured), each run a dot
    coloured by its outcome with its value as a tooltip, the threshold as a dashed step line."""
    numbers = [v for m in marks for v in m[:2] if v is not None]
    if not numbers:
        return "<small>nothing measured in any run</small>"
    low, high = _scale(numbers)
    step = (WIDTH - LEFT - PAD) / max(len(marks) - 1, 1)

    def x(i: int) -> float:
        return LEFT + i * step if len(marks) > 1 else (WIDTH + LEFT) / 2

    def y(v: float) -> float:
        return HEIGHT - PAD - (v - low) / (high - low) * (HEIGHT - 2 * PAD)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" class="spark">',
             f'<text x="{LEFT - 4}" y="{PAD + 4}" font-size="9" text-anchor="end" fill="#777">{high:.3g}</text>',
             f'<text x="{LEFT - 4}" y="{HEIGHT - PAD + 3}" font-size="9" text-anchor="end" fill="#777">{low:.3g}</text>']
    threshold = [(x(i), y(m[1])) for i, m in enumerate(marks) if m[1] is not None]
    if threshold:
        steps = [threshold[0]] + [p for a, b in zip(threshold, threshold[1:]) for p in ((b[0], a[1]), b)]
        if len(threshold) == 1:
            steps = [(LEFT, threshold[0][1]), (WIDTH - PAD, threshold[0][1])]
        parts.append(f'<polyline points="{_points(steps)}" fill="none" stroke="#c62828" stroke-dasharray="4 3" '
                     'stroke-width="1"><title>threshold</title></polyline>')
    present = [(i, m) for i, m in enumerate(marks) if m[2]]  # a run without the check does not break the line
    for segment in _segments([(x(i), y(m[0])) if m[0] is not None else None for i, m in present]):
        parts.append(f'<polyline points="{_points(segment)}" fill="none" stroke="#1565c0" stroke-width="1.5"/>')
    for i, (measured, _, outcome, tip) in enumerate(marks):
        if not outcome:  # the run did not have this check: nothing to draw
            continue
        colour = COLOURS.get(outcome, "#bbb")
        cy = y(measured) if measured is not None else HEIGHT - PAD
        shape = "circle" if measured is not None else "rect"
        body = (f'cx="{x(i):.1f}" cy="{cy:.1f}" r="3.2"' if shape == "circle"
                else f'x="{x(i) - 3:.1f}" y="{cy - 3:.1f}" width="6" height="6"')
        parts.append(f'<{shape} {body} fill="{colour}"><title>{escape(tip)}</title></{shape}>')
    return "".join(parts) + "</svg>"


def _points(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in points)


def _segments(points: list[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive measured points (a run without a value breaks the line)."""
    found: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            found.append([])
        else:
            found[-1].append(point)
    return [s for s in found if s]
