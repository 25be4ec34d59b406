"""What the operator's commands print: aligned plain-text tables (readable, and easy to grep or cut)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import typer


def when(moment: datetime | None) -> str:
    """A stored UTC time to the minute, or `-`."""
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, empty: str) -> None:
    """Columns padded to their widest cell, two spaces apart; `empty` alone when there are no rows."""
    if not rows:
        typer.echo(empty)
        return
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    for line in cells:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
