"""One interface for every output format, and the registry the command line picks them from.

A renderer is a module with `write(subject, out, opts)`: SUBJECT is a Report (or a Diff), OUT
where the output goes (`runtime.output.Output`), OPTS what the command line asked (`Options`).
It returns the report's figures when it computed them on its one pass (for `--fail-on`), else
None. A new format is one module and one line in `REPORT_FORMATS` or `DIFF_FORMATS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tlview.analyze.gate import Check
    from tlview.analyze.summary import Overview
    from tlview.index.keep import Keep
    from tlview.runtime.output import Output


@dataclass(frozen=True, slots=True)
class Options:
    """What the command line asked of a renderer."""

    compile_id: str | None = None  # --compile-id: that compile alone, or in full
    verbosity: int = 0  # -1 for -q, 0 by default, 1 and more for -v
    full: bool = False  # --full: every payload whole (the page)
    gate: list[str] | None = None  # diff: the --fail-on checks that failed
    checks: tuple[Check, ...] = ()  # --fail-on's checks, for a format that shows the verdict


class Renderer(Protocol):
    def __call__(self, subject: Any, out: Output, opts: Options) -> Overview | None: ...


@dataclass(frozen=True, slots=True)
class Format:
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
