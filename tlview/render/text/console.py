"""The terminal's console: text from a log made inert, tables that fit, stdout or a file."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console
from rich.text import Text

from tlview.render.clean import clean
from tlview.render.text.grid import Grid
from tlview.runtime.output import Output, stdout
from tlview.version import __version__

Drawn = TypeVar("Drawn")


def T(text: object, style: str = "") -> Text:
    return Text(clean(text), style=style)


def table(title: str, *cols: str, console: Console) -> Grid:
    return Grid(title, *cols, ascii_box=not console.is_terminal)


def on_console(out: Output, fn: Callable[[Console], Drawn]) -> Drawn:
    """Run FN on a terminal console, or on a plain one whose text goes to OUT's file; what it
    returns. On standard output rich writes as it goes (colour on a terminal, never piped)."""
    if out.is_stdout:
        tty = stdout().isatty()
        return fn(_stdout_console(highlight=False, width=None if tty else pipe_width()))
    with out.open() as f:
        buf = io.StringIO()
        console = Console(
            file=buf, highlight=False, width=pipe_width(), no_color=True, force_terminal=False
        )
        console.print(f"# written by tlview {__version__}", markup=False)
        got = fn(console)
        f.write(buf.getvalue().encode("utf-8"))
    return got


def pipe_width() -> int:
    """The width of text that is not for a terminal: $COLUMNS, else 160."""
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 160


def _stdout_console(**kw: Any) -> Console:
    """A console on stdout whose reader may go away (`| head`): that ends the run as it does for
    every format, with exit 0 (rich's own console exits 1, which fails a `pipefail` script)."""

    class Stdout(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return Stdout(**kw)
