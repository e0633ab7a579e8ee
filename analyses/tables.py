"""Printed summaries as text: rich tables and lines rendered to a string, so that an analysis's
registered ``summary(ds) -> str`` ([`dynlab.registry.Entry`][]) prints the same on a terminal,
in a pipe and in a test."""

from __future__ import annotations


def render(*items, width: int = 120) -> str:
    """``items`` (rich tables or strings) as the plain text a ``width``-column console prints."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    for item in items:
        console.print(item)
    return console.file.getvalue().rstrip("\n")
