"""The terminal's console: text from a log made inert, tables that fit, stdout or a file.

Width: $COLUMNS when set; else, for standard output, the terminal the run is attached to, also
when the output is piped (`| less`: the terminal of stderr, stdin or /dev/tty); else 100.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from tlview.render.clean import clean
from tlview.render.text.grid import Grid, Kind, wrap
from tlview.runtime.output import Output, stdout
from tlview.version import __version__

Drawn = TypeVar("Drawn")
WIDTH = 100  # columns of text for no terminal (a file, a CI log) when $COLUMNS is not set
MIN_WIDTH = 40

# How each column of the terminal's tables may break, by its header, the same in every table:
# ids, places and numbers never (a list of them between its items), names cut in the middle
# (whole under the table), anything else wraps at its spaces.
KEEP = frozenset(
    {
        "id",
        "compile",
        "compiles",
        "where",
        "ops",
        "time",
        "max time",
        "count",
        "log line",
        "line",
        "lines",
        "bytes",
        "#",
        "size",
        "stride",
        "offset",
        "dtype",
        "device",
        "storage",
        "alias",
        "ranks",
        "graph",
        "BASE",
        "NEW",
        "change",
        "frame",
        "match",
        "BASE compiles",
        "NEW compiles",
        "total",
        "backward",
    }
)
NAMES = frozenset({"function", "source", "kernel", "name", "symbol", "type", "kind", "measure"})


class Line(Text):
    """Text from tlview for the terminal, one style: wrapped at its spaces to the width, each
    wrapped line indented under its own line's start, no line ending in spaces."""

    def __rich__(self) -> _Wrapped:
        # rich joins the Text objects of one print() into one; this keeps them a renderable.
        return _Wrapped(self.plain, self.style)


class _Wrapped:
    def __init__(self, text: str, style: str | Style) -> None:
        self.text, self.style = text, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        style = console.get_style(self.style) if self.style else None
        width = 1 << 30 if options.no_wrap else options.max_width  # print(no_wrap=True): a command
        for par in self.text.split("\n"):
            for line in wrap(par, width):
                yield Segment(line, style)
                yield Segment.line()


def T(text: object, style: str = "") -> Text:
    return Line(clean(text), style=style)


def kind_of(col: str) -> Kind:
    """How a column may break, by its header (a compile-time phase is a number of seconds)."""
    if col in KEEP or col.endswith(" time") or col.endswith("_s"):
        return Kind.KEEP
    return Kind.NAME if col in NAMES else Kind.TEXT


def table(title: str, *cols: str, console: Console) -> Grid:
    kinds = [kind_of(c) for c in cols]
    return Grid(title, *cols, ascii_box=not console.is_terminal, kinds=kinds)


def on_console(out: Output, fn: Callable[[Console], Drawn]) -> Drawn:
    """Run FN on a terminal console, or on a plain one whose text goes to OUT's file; what it
    returns. On standard output rich writes as it goes (colour on a terminal, never piped)."""
    if out.is_stdout:
        stdout()  # closed (`>&-`): one line, not a report that goes nowhere
        return fn(_stdout_console(highlight=False, width=terminal_width()))
    with out.open() as f:
        buf = io.StringIO()
        console = _Console(
            file=buf, highlight=False, width=pipe_width(), no_color=True, force_terminal=False
        )
        console.print(f"# written by tlview {__version__}", markup=False)
        got = fn(console)
        f.write(buf.getvalue().encode("utf-8"))
    return got


def pipe_width() -> int:
    """The width of text written to a file: $COLUMNS, else 100."""
    return _columns() or WIDTH


def terminal_width() -> int:
    """The width of standard output: $COLUMNS; else the terminal's the run is attached to, on
    stdout, stderr, stdin or /dev/tty (`tlview report LOG | less` fits the terminal); else 100."""
    return _columns() or _attached() or WIDTH


def _columns() -> int | None:
    try:
        return max(MIN_WIDTH, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return None


def _attached() -> int | None:
    """The columns of the first terminal among stdout, stderr, stdin and /dev/tty."""
    for fd in (1, 2, 0):
        with contextlib.suppress(OSError, ValueError):
            if os.isatty(fd):
                return max(MIN_WIDTH, os.get_terminal_size(fd).columns)
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:  # no controlling terminal: cron, CI, a daemon
        return None
    try:
        return max(MIN_WIDTH, os.get_terminal_size(fd).columns)
    except OSError:
        return None
    finally:
        os.close(fd)


class _Console(Console):
    """A console that never crops a line: a table of ids and places alone that is wider than
    the terminal runs past its edge (the terminal wraps it) and loses no character."""

    def print(self, *objects: Any, crop: bool = False, **kw: Any) -> None:
        super().print(*objects, crop=crop, **kw)


def _stdout_console(**kw: Any) -> Console:
    """A console on stdout whose reader may go away (`| head`): that ends the run as it does for
    every format, with exit 0 (rich's own console exits 1, which fails a `pipefail` script)."""

    class Stdout(_Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return Stdout(**kw)
