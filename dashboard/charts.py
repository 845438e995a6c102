"""Daily charts drawn on the server as inline SVG: no script, no CDN, no library.

``svg(chart)`` turns a chart spec — a dict the context builders make, so the
same data answers ``?format=json`` — into one ``<svg>``: stacked bars per
day, or a line with gaps on days without a value. Colours come from the
stylesheet (``.tone-N``), so nothing here needs an inline style (the
dashboard's CSP allows none). Every number shown is escaped text; each
day's group carries a ``<title>`` (the browser's tooltip) with its values.

A spec: ``{"title", "kind": "bars" | "line", "unit": "" | "ms", "days":
[YYYY-MM-DD…], "series": [{"label", "tone", "values": [number | None…]}]}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

# Drawn at about the size a chart card shows it, so its 10 px labels stay readable.
WIDTH = 360
HEIGHT = 160
LEFT = 40  # room for the y labels
RIGHT = 6
TOP = 8
BOTTOM = 20  # room for the x labels
PLOT_W = WIDTH - LEFT - RIGHT
PLOT_H = HEIGHT - TOP - BOTTOM


def nice_ceiling(value: float) -> float:
    """The axis top for ``value``: 1, 2, 2.5 or 5 times a power of ten, at least 1."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def number(value: float, unit: str = "") -> str:
    """A value as a label: 1234 → "1,234", 12500 → "12.5k", 0.37 ms → "0.4 ms"."""
    if value >= 10_000:
        text = f"{value / 1000:,.1f}k".replace(".0k", "k")
    elif value >= 100 or float(value).is_integer():
        text = f"{value:,.0f}"
    else:
        text = f"{value:.1f}"
    return f"{text} {unit}" if unit else text


def _day_label(day: str) -> str:
    """2024-02-05 → "5 Feb 2024" (unambiguous, short)."""
    months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
    try:
        y, m, d = (int(p) for p in day.split("-"))
        return f"{d} {months[m - 1]} {y}"
    except (ValueError, IndexError):
        return day


def _stack_total(series: Sequence[Mapping[str, Any]], i: int) -> float:
    return sum(float(s["values"][i] or 0) for s in series)


def svg(chart: Mapping[str, Any]) -> Markup:
    days: list[str] = list(chart["days"])
    series: list[Mapping[str, Any]] = list(chart["series"])
    unit = str(chart.get("unit") or "")
    n = max(1, len(days))
    if chart.get("kind") == "line":
        peak = max((float(v) for s in series for v in s["values"] if v is not None), default=0.0)
    else:
        peak = max((_stack_total(series, i) for i in range(len(days))), default=0.0)
    top = nice_ceiling(peak)
    slot = PLOT_W / n

    def y(value: float) -> float:
        return TOP + PLOT_H - (value / top) * PLOT_H

    title = str(chart["title"])
    label = f"{title} per day, {_day_label(days[0])} to {_day_label(days[-1])}" if days else title
    out: list[str] = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" preserveAspectRatio="xMidYMid meet">'
    ]
    # Grid and y labels: 0, half, top (no half label where it would be a
    # fraction of a count: "0.5 messages").
    for frac in (0.0, 0.5, 1.0):
        gy = y(top * frac)
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}"/>'
        )
        if frac == 0.5 and not unit and not (top / 2).is_integer():
            continue
        out.append(
            f'<text class="axis" x="{LEFT - 5}" y="{gy + 3.5:.1f}" text-anchor="end">'
            f"{escape(number(top * frac, unit))}</text>"
        )
    # x labels: first, middle and last day.
    for i, anchor in ((0, "start"), (n // 2, "middle"), (n - 1, "end")):
        if i < len(days):
            x = LEFT + slot * i + (slot / 2 if anchor == "middle" else 0 if i == 0 else slot)
            out.append(
                f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 5}" text-anchor="{anchor}">'
                f"{escape(_day_label(days[i]))}</text>"
            )
    if peak <= 0:
        out.append(
            f'<text class="empty-note" x="{LEFT + PLOT_W / 2:.1f}" y="{TOP + PLOT_H / 2:.1f}" '
            'text-anchor="middle">none in these days</text>'
        )
    elif chart.get("kind") == "line":
        out.extend(_line(days, series, slot, y, unit))
    else:
        out.extend(_bars(days, series, slot, y, unit))
    out.append("</svg>")
    return Markup("".join(out))


def _tooltip(day: str, series: Sequence[Mapping[str, Any]], i: int, unit: str) -> str:
    parts = [
        f"{s['label']} {number(float(s['values'][i]), unit)}"
        for s in series
        if s["values"][i] is not None
    ]
    return f"{_day_label(day)}: " + (", ".join(parts) if parts else "nothing")


def _bars(
    days: Sequence[str], series: Sequence[Mapping[str, Any]], slot: float, y: Any, unit: str
) -> list[str]:
    out: list[str] = []
    width = max(1.0, slot * 0.72)
    for i, day in enumerate(days):
        x = LEFT + slot * i + (slot - width) / 2
        out.append(f"<g><title>{escape(_tooltip(day, series, i, unit))}</title>")
        # A full-height transparent target, so a day with a thin bar (or none)
        # still shows its tooltip.
        out.append(
            f'<rect class="hit" x="{LEFT + slot * i:.2f}" y="{TOP}" width="{slot:.2f}" '
            f'height="{PLOT_H}"/>'
        )
        base = 0.0
        for s in series:
            v = float(s["values"][i] or 0)
            if v <= 0:
                continue
            y0, y1 = y(base), y(base + v)
            out.append(
                f'<rect class="tone-{int(s["tone"])}" x="{x:.2f}" y="{y1:.2f}" '
                f'width="{width:.2f}" height="{max(0.6, y0 - y1):.2f}"/>'
            )
            base += v
        out.append("</g>")
    return out


def _line(
    days: Sequence[str], series: Sequence[Mapping[str, Any]], slot: float, y: Any, unit: str
) -> list[str]:
    out: list[str] = []
    for s in series:
        path: list[str] = []
        pen_up = True
        for i, v in enumerate(s["values"]):
            if v is None:
                pen_up = True
                continue
            x = LEFT + slot * i + slot / 2
            path.append(f"{'M' if pen_up else 'L'}{x:.1f} {y(float(v)):.1f}")
            pen_up = False
        if path:
            out.append(f'<path class="line tone-{int(s["tone"])}" d="{" ".join(path)}"/>')
        for i, v in enumerate(s["values"]):
            if v is None:
                continue
            x = LEFT + slot * i + slot / 2
            out.append(
                f"<g><title>{escape(_tooltip(days[i], [s], i, unit))}</title>"
                f'<circle class="dot tone-{int(s["tone"])}" cx="{x:.1f}" cy="{y(float(v)):.1f}" '
                f'r="{2.5 if len(days) <= 31 else 1.6}"/></g>'
            )
    return out
