"""One interface for every output format, and the registry the command line picks them from.

A renderer is a module with `write(subject, out, opts, split)`: SUBJECT is a Report (or a Diff),
OUT where the output goes (`runtime.output.Output`), OPTS what the command line asked
(`Options`), SPLIT what runs its passes over the analysed compiles (`Split`: here, or on two
cores; it never cuts or forks itself). It returns the report's figures when it computed them on
its one pass (for `--fail-on`), else None. A new format is one module and one line in
`REPORT_FORMATS` or `DIFF_FORMATS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from tlview.analyze.compiles import Analysis
    from tlview.analyze.gate import Check
    from tlview.analyze.summary import Overview
    from tlview.index.keep import Keep
    from tlview.model import Report
    from tlview.runtime.output import Output

S = TypeVar("S")
Out = TypeVar("Out", covariant=True)  # what a pass writes: str or bytes


class Pass(Protocol[S, Out]):
    """One pass of a renderer over the analysed compiles: its state, made fresh for each part
    of the compiles it runs on, the output it writes as it goes, and how two parts' states
    become one. A renderer never cuts, forks or joins: a `Split` does."""

    def start(self, later: bool) -> S:
        """A fresh state; `later`: for a copy that runs the later part, beside this process."""
        ...

    def run(self, state: S, compiles: Iterator[Analysis]) -> Iterable[Out]:
        """Take in these compiles, in order, and yield what is written of them."""
        ...

    def merge(self, state: S, later: S) -> None:
        """Take in the state of the compiles after these, as if this pass had gone on."""
        ...


# A compile's share of a pass's work: (its place in the report, its size) -> weight.
Weigh = Callable[[int, int], int]


class Split(Protocol):
    """Runs a renderer's passes over a report's compiles: in this process, or in two parts on
    two cores with the later part's output and state joined after this one's."""

    def fold(self, p: Pass[S, Any], scale: int = 1) -> S:
        """Run a pass that writes nothing; its state."""
        ...

    def write(self, p: Pass[S, bytes], out: IO[bytes]) -> S:
        """Run a pass, writing its output to OUT in order; its state."""
        ...

    def text(self, p: Pass[S, str], span: tuple[int, int], weigh: Weigh) -> Iterator[str]:
        """Run a pass over the compiles [span) and yield its output in order."""
        ...


class InProcess:
    """A `Split` that runs every pass here, over the compiles in order."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def fold(self, p: Pass[S, Any], scale: int = 1) -> S:
        from tlview.analyze.compiles import analysed

        state = p.start(False)
        for _ in p.run(state, analysed(self.report)):
            pass
        return state

    def write(self, p: Pass[S, bytes], out: IO[bytes]) -> S:
        from tlview.analyze.compiles import analysed

        state = p.start(False)
        for piece in p.run(state, analysed(self.report)):
            out.write(piece)
        return state

    def text(self, p: Pass[S, str], span: tuple[int, int], weigh: Weigh) -> Iterator[str]:
        from tlview.analyze.compiles import analysed

        yield from p.run(p.start(False), analysed(self.report, *span))


def split_of(report: Report, split: Split | None) -> Split:
    """The split a renderer was given, else one that runs everything here."""
    return InProcess(report) if split is None else split


class Options(NamedTuple):
    """What the command line asked of a renderer."""

    compile_id: str | None = None  # --compile-id: that compile alone, or in full
    verbosity: int = 0  # -1 for -q, 0 by default, 1 and more for -v
    full: bool = False  # --full: every payload whole (the page)
    gate: list[str] | None = None  # diff: the --fail-on checks that failed
    checks: tuple[Check, ...] = ()  # --fail-on's checks, for a format that shows the verdict


class Renderer(Protocol):
    def __call__(
        self, subject: Any, out: Output, opts: Options, split: Split | None = None
    ) -> Overview | None: ...


class Format(NamedTuple):
    """An output format: its renderer's module, and what reading must do for it."""

    name: str
    module: str  # has write(subject, out, opts)
    import_ns: float = 0.0  # importing it, measured: done while a second reader still reads
    keep: str | None = None  # "module:function" giving the payload texts it needs kept
    # Reads the logs again (a log from a pipe is copied first), and only these records'
    # payloads, by a marker in their line: the copy keeps the other payloads as empty lines.
    rereads: tuple[bytes, ...] = ()

    def renderer(self) -> Renderer:
        write: Renderer = importlib.import_module(self.module).write
        return write

    def warm(self) -> None:
        """Import the renderer now (rich, Jinja and all), while something else waits."""
        importlib.import_module(self.module)

    def keep_for(self, opts: Options) -> Keep | None:
        """The payload texts to keep while reading (None: none), without importing the renderer."""
        if self.keep is None:
            return None
        module, _, name = self.keep.partition(":")
        keep: Keep = getattr(importlib.import_module(module), name)(opts)
        return keep


# Importing the page's renderer (Jinja, render/html/report.py) and the terminal's (rich) on this
# machine, with both cores busy.
REPORT_FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("text", "tlview.render.text.report", import_ns=20e6),
        Format("json", "tlview.render.json.report"),
        Format(
            "html",
            "tlview.render.html.report",
            import_ns=25e6,
            keep="tlview.render.html.budget:keep",
        ),
        Format(
            "perfetto",
            "tlview.render.perfetto",
            # its events, the file names they are interned by, inductor's runtime estimates
            rereads=(b'"chromium_event"', b'"str"', b"inductor_runtime_and_tensor_meta"),
        ),
        Format("markdown", "tlview.render.markdown.report"),
    )
}
DIFF_FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("text", "tlview.render.text.diff"),
        Format("json", "tlview.render.json.diff"),
        Format("html", "tlview.render.html.diff"),
        Format("markdown", "tlview.render.markdown.diff"),
    )
}


def format_for(fmt: str | None, output: str | None) -> str:
    """--format, else what the output file's name asks for (report.html, diff.json), else
    text: `-o report.html` alone writes the page, not the terminal report in a .html file."""
    if fmt is not None:
        return fmt
    name = (output or "").lower()
    if name.endswith((".html", ".htm")):
        return "html"
    if name.endswith(".json"):
        return "json"
    if name.endswith(".md"):
        return "markdown"
    return "text"
