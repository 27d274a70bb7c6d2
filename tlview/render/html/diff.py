"""`tlview diff --format html`: one self-contained page (no script, styles pinned by the CSP)."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

from markupsafe import Markup

from tlview.analyze.changes import change_text
from tlview.analyze.diff import CacheFigure, ComparedCompile, Diff, Figure, FrameDiff, change_words
from tlview.render import Options, Split
from tlview.render.html.report import page_environment
from tlview.runtime.output import Output
from tlview.version import __version__

TEMPLATE = "diff.html.j2"  # beside report.html.j2, loaded by the report's environment
CSS = """
:root{--fg:#1b1f24;--bg:#fff;--dim:#6a737d;--line:#d0d7de;--bad:#b31d28;--good:#1a7f37;--head:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--dim:#8b949e;--line:#30363d;--bad:#ff7b72;--good:#56d364;--head:#161b22}}
body{font:14px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1400px;padding:1em 1.5em}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em}
.facts{display:grid;grid-template-columns:auto 1fr;gap:.1em 1em;margin:.5em 0}.facts div{display:contents}
.facts dt{font-weight:600}.facts dd{margin:0;word-break:break-all}
table{border-collapse:collapse;width:100%;margin:.3em 0}
th,td{border:1px solid var(--line);padding:.25em .5em;text-align:left;vertical-align:top}
th{background:var(--head)}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pre{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.92em}
.dim{color:var(--dim)}.worse{color:var(--bad)}.better{color:var(--good)}
.gate{padding:.5em 1em;border:2px solid;border-radius:6px}.gate.fail{border-color:var(--bad)}
.gate.pass{border-color:var(--good)}.note{color:var(--dim)}
details{border:1px solid var(--line);border-radius:6px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer;font-weight:600}ul{margin:0;padding-left:1.2em}
"""


class FigureRow(NamedTuple):
    """A measure of both runs, and how it changed."""

    name: str
    base: str
    new: str
    delta: str  # "" when it did not change
    tone: str  # worse | better | dim (within noise) | ""


class CacheRow(NamedTuple):
    cache: str
    base: str  # its hit rate, with the outcomes counted
    new: str


class ChangeRow(NamedTuple):
    kind: str
    frame: str
    words: str
    tone: str  # worse | better | ""
    mark: str
    compiles: str  # BASE's compile → NEW's


class CompileRow(NamedTuple):
    """One compile of a frame in both runs, side by side."""

    number: int  # its place among the frame's compiles, from 1
    base: str  # its key in BASE ("" when BASE has no such compile)
    new: str
    status: str
    ops: str
    time: str
    inputs: list[str]  # each input change, in words
    no_inputs: str  # what to say when there is none


class FrameRow(NamedTuple):
    name: str
    match: str
    changed: int  # changes in this frame
    compiles: list[CompileRow]


@dataclass(slots=True)
class DiffPage:
    """Everything the diff page's template reads."""

    version: str
    csp: str
    css: Markup
    base_path: str
    new_path: str
    base_torch: str
    new_torch: str
    notes: list[str]
    gate: list[str] | None  # --fail-on: what is worse (None: no gate asked for)
    figures: list[FigureRow]
    phases: list[FigureRow]
    cache: list[CacheRow]
    changes: list[ChangeRow]
    frames: list[FrameRow]


def figure_row(f: Figure) -> FigureRow:
    d = f.delta
    if not d:
        delta, tone = "", ""
    else:
        delta = f"{d:+.2f}" if f.seconds else f"{int(d):+d}"
        if f.seconds and not f.changed:
            delta, tone = f"{delta} (noise)", "dim"
        else:
            tone = "" if not f.more_is_worse else ("worse" if d > 0 else "better")
    return FigureRow(f.name, f.value(f.base), f.value(f.new), delta, tone)


def _rate(counts: dict[str, int]) -> str:
    r = CacheFigure.rate(counts)
    if r is None:
        return "-"
    return f"{r:.0%} (" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + ")"


def _compile(cc: ComparedCompile) -> CompileRow:
    b, n = cc.base, cc.new

    def pair(x: Any, y: Any) -> str:
        if x == y:
            return "-" if x is None else str(x)
        return f"{'-' if x is None else x} → {'-' if y is None else y}"

    def secs(c: Any) -> str | None:
        return None if c is None or c.compile_time_s is None else f"{c.compile_time_s:.2f}"

    return CompileRow(
        cc.index + 1,
        "" if b is None else b.key,
        "" if n is None else n.key,
        pair(b and b.status, n and n.status),
        pair(b and b.graph_ops, n and n.graph_ops),
        pair(secs(b), secs(n)),
        [change_text(x) for x in cc.input_changes],
        "no change" if cc.compared else ("" if b is None or n is None else "not logged"),
    )


def _frame(p: FrameDiff, changed: int) -> FrameRow:
    return FrameRow(str(p.key), p.match, changed, [_compile(cc) for cc in p.compiles])


def diff_page(d: Diff, gate: list[str] | None = None) -> DiffPage:
    """The comparison as the diff page shows it: worse changes first, then the rest."""
    counts: dict[str, int] = {}
    for c in d.changes:
        counts[c.frame] = counts.get(c.frame, 0) + 1
    order = {True: 0, None: 1, False: 2}
    changes = [
        ChangeRow(
            c.kind,
            c.frame,
            change_words(c),
            {True: "worse", False: "better", None: ""}[c.worse],
            {True: "worse", False: "better", None: ""}[c.worse],
            " → ".join(x for x in (c.base_compile, c.new_compile) if x),
        )
        for c in sorted(d.changes, key=lambda c: order[c.worse])
    ]
    digest = base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode()
    return DiffPage(
        version=__version__,
        csp=f"default-src 'none'; style-src 'sha256-{digest}'",
        css=Markup(CSS),  # our own constant, never text from a log
        base_path=d.base_path,
        new_path=d.new_path,
        base_torch=d.base_torch or "unknown",
        new_torch=d.new_torch or "unknown",
        notes=d.notes,
        gate=gate,
        figures=[figure_row(f) for f in d.figures],
        phases=[figure_row(f) for f in d.phases],
        cache=[CacheRow(c.cache, _rate(c.base), _rate(c.new)) for c in d.cache],
        changes=changes,
        frames=[_frame(p, counts.get(str(p.key), 0)) for p in d.frames],
    )


def render(d: Diff, gate: list[str] | None = None) -> str:
    """The page as one string (`stream` writes it)."""
    return page_environment().get_template(TEMPLATE).render(page=diff_page(d, gate))


def stream(d: Diff, out: IO[bytes], gate: list[str] | None = None) -> None:
    out.write(render(d, gate).encode("utf-8"))


def write(d: Diff, out: Output, opts: Options, split: Split | None = None) -> None:
    """The comparison as a page (the renderer of `tlview diff --format html`)."""
    with out.open() as f:
        stream(d, f, opts.gate)
