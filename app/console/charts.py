"""Charts drawn on the server as SVG: a page shows them without scripts, and the numbers stay beside
them in a table for screen readers and for copying."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from app.kit.templates import escape

WIDTH = 600
HEIGHT = 160
LABEL_ROOM = 20


@dataclass(frozen=True)
class Bar:
    label: str
    value: int


def bar_chart(bars: Sequence[Bar], *, title: str) -> Markup:
    """Vertical bars scaled to the largest value, each with a tooltip; `title` names the chart for
    assistive technology (the same figures are in a table beside it)."""
    top = max((bar.value for bar in bars), default=0) or 1
    slot = WIDTH / max(len(bars), 1)
    shapes: list[str] = []
    for index, bar in enumerate(bars):
        height = (HEIGHT - LABEL_ROOM) * bar.value / top
        x = index * slot + slot * 0.1
        y = HEIGHT - LABEL_ROOM - height
        shapes.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.8:.1f}" height="{height:.1f}" class="bar">'
            f"<title>{escape(bar.label)}: {bar.value}</title></rect>"
        )
    for index in (0, len(bars) - 1) if bars else ():
        anchor = "start" if index == 0 else "end"
        x = 0 if index == 0 else WIDTH
        shapes.append(
            f'<text x="{x}" y="{HEIGHT - 4}" text-anchor="{anchor}">{escape(bars[index].label)}</text>'
        )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
        f'<line x1="0" y1="{HEIGHT - LABEL_ROOM}" x2="{WIDTH}" y2="{HEIGHT - LABEL_ROOM}" class="axis"/>'
        + "".join(shapes)
        + "</svg>"
    )
