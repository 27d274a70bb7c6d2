"""The HTML page's view model: what each part of the page shows, with the page budget applied."""

from __future__ import annotations

import hashlib
import heapq
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath
from typing import Any, NamedTuple

import orjson

from tlview import __version__
from tlview.analyze.names import Refs, describer_marks
from tlview.analyze.summary import (
    MAX_BREAK_COMPILES,
    PHASE_NAMES,
    Overview,
    Tally,
    break_key,
    break_title,
    input_flags,
    input_names,
    is_recompile,
    kernels,
    problem_order,
    stopped_in,
)
from tlview.dumps import dumps
from tlview.index.dims import DynamicDims, dynamic_dims, input_symbols
from tlview.model import (
    BadLine,
    Compile,
    Divergence,
    Event,
    ExportIssue,
    GraphBreak,
    Input,
    Kernel,
    LogIndex,
    Payload,
    Phase,
    Recompile,
    Report,
    StackFrame,
    Status,
    StorageDesc,
    Symbol,
    TensorDesc,
)
from tlview.render.html import budget as kept
from tlview.render.html.budget import KiB
from tlview.runtime import halves
from tlview.units import dims, itemsize, nbytes, seconds

METRIC_BYTES = 64 * KiB  # a compilation_metrics value longer than this is cut
DETAIL_COMPILES = 500  # compiles shown with every detail; the rest show status, reasons, inputs
PAGE_COMPILES = 1000  # compiles with a row and a section; the rest are counted in a note
MAX_ROW_CHANGES = 6  # input changes a recompile shows in the Recompiles table
MAX_ROW_ISSUES = 100  # export issues of one compile in the page's Export issues table
_REASON_CHARS = 1000  # of a compile's one-line reason kept for the table (which shows 140)
SHARED_METRIC = 200  # a metric value this long that repeats an earlier compile's is linked to it
MAX_LANE_ROWS = 8  # rows of the compile timeline per log; further overlaps share the last row
MIN_BAR_PCT = 0.3  # a compile's bar is at least this wide (% of the lane), to see and to click

# Payloads that get the page budget first: what a reader opens to see what compiled.
_FIRST_KINDS = ("dynamo_error", "dynamo_output_graph", "dynamo_cpp_guards_str", "dynamo_guards")
_PY_KINDS = re.compile(r"graph|_code$|runnable|wrapper|forward|backward|prologue|epilogue|guards")
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/!@-]")


# -- small formatting helpers, used by the templates too ----------------------------------------
def ms(us: float) -> str:
    v = us / 1000
    return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"


def clock(t: str | None) -> str:
    """'MMDD HH:MM:SS.ffffff' -> 'MM-DD HH:MM:SS' (the log has no year)."""
    if not t:
        return "?"
    return f"{t[:2]}-{t[2:4]} {t[5:13]}" if len(t) >= 13 else t


def short_path(p: str | None, keep: int = 2) -> str:
    if not p:
        return ""
    parts = p.replace("\\", "/").split("/")
    return "/".join(parts[-keep:])


def short_frame(f: StackFrame) -> str:
    return f"{short_path(f.file)}:{f.line} in {f.name}"


def pct(v: float) -> str:
    return f"{max(0.0, min(100.0, v)):.3f}"


# -- view records ---------------------------------------------------------------------------------
@dataclass(slots=True)
class PayloadView:
    """One payload as the page shows it: its text within the budget, and what was cut."""

    p: Payload
    anchor: str
    log: str
    lang: str  # py | json | text
    text: str | None = None
    shown: int = 0  # bytes of text shown
    note: str | None = None  # what was cut or left out, and how to get it

    @property
    def title(self) -> str:
        return self.p.kind

    @property
    def meta_text(self) -> str:
        if not self.p.meta:
            return ""
        return dumps(self.p.meta, default=str).decode()


@dataclass(slots=True)
class BudgetItem:
    """A payload's share of the page budget, decided before any compile section is written."""

    pos: int  # its place among the compile's graphs, artifacts and guards
    kind: str
    priority: int  # 0: a failure's; 1: dynamo's graph or guards; 2: the rest
    bytes: int  # the whole payload
    size: int | None  # bytes of text the reader kept (None: none)
    state: str = ""  # whole | cut | reader (no text kept) | spent (the page budget was)
    shown: int = 0
    text: str | None = None  # the text shown, when the page cut it


@dataclass(slots=True)
class MetricView:
    name: str
    value: str
    same_as: tuple[str, str] | None = None  # (anchor, compile label) that shows the same value
    note: str | None = None

    @property
    def long(self) -> bool:
        return len(self.value) > 120 or "\n" in self.value


@dataclass(slots=True)
class Span:
    """The bytes of a storage one tensor covers: offset * itemsize to the end of its last element."""

    label: str
    tensor: TensorDesc
    start: int | None  # bytes; None when the span is symbolic or the dtype unknown
    end: int | None
    x: str = "0"  # percent of the storage bar
    w: str = "0"
    input: bool = True  # an input of the compile (not only its base or an inner tensor)

    @property
    def detail(self) -> str:
        """Written only for the storages drawn: most inputs fill a storage of their own."""
        return _span_text(self.tensor, self.start, self.end)


@dataclass(slots=True)
class StorageView:
    label: str
    size: int | str | None
    spans: list[Span] = field(default_factory=list)
    alias_group: int | None = None
    note: str | None = None


class InputView(NamedTuple):
    """One row of a compile's inputs table, in the order the template unpacks it (a tuple:
    the template reads no attributes, the page's costliest loop)."""

    superseded: bool
    first: str | None  # the first source, if any
    rest: list[str]  # the other sources
    tensor_id: Any
    size: str
    stride: str
    offset: str
    dtype: str
    device: str
    storage: str
    alias_group: int | None
    flags: str
    inner: list[tuple[str, TensorDesc]]
    notes: list[str]
    source: str


@dataclass(slots=True)
class TimeBar:
    """One phase (or one compile, on the page timeline) as a bar in an SVG lane."""

    name: str
    x: str
    w: str
    row: int
    tip: str
    ts: float
    dur: float | None
    status: str = ""
    href: str | None = None


@dataclass(slots=True)
class Timeline:
    bars: list[TimeBar]
    rows: int
    total: str
    ticks: list[tuple[str, str]] = field(default_factory=list)  # (x percent, label)
    label: str = ""


@dataclass(slots=True)
class BreakView:
    anchor: str
    title: str
    reason: str
    count: int
    where: list[tuple[str, str, int]]  # (short place, full place, count)
    compiles: list[tuple[str, str]]  # (label, anchor; "" when the compile is not on the page)


@dataclass(slots=True)
class TrieNode:
    frames: list[StackFrame]
    compiles: list[Row] = field(default_factory=list)
    children: list[TrieNode] = field(default_factory=list)


@dataclass(slots=True)
class Row:
    """One compile as the page-wide parts show it (table, stacks, failures, recompiles, timeline).

    Made while the figures are tallied; it keeps none of the compile's records, so the page
    holds one of these per compile it shows and reads each compile again for its section.
    """

    n: int  # place among the report's compiles
    at: tuple[int, int]  # (log, place in the log): where to read the compile again
    ref: str  # compile_ref: the id, with its log when the page has several logs
    anchor: str
    key: str
    log: str
    log_label: str
    log_short: str  # the log's short name, when the page has several logs
    status: Status
    pid: int | None
    function: str | None
    file: str | None
    where: str
    sort_id: str
    ops: int | None
    time_s: float | None
    inputs: int
    alias_groups: int
    breaks: int
    reason: str  # one line for the table: fail type, graph break, recompile reason
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_where: str | None = None
    restart_reasons: list[str] = field(default_factory=list)  # problems only
    export_issues: list[ExportIssue] = field(default_factory=list)
    recompile: Recompile | None = None  # with at most MAX_ROW_CHANGES input changes
    changes: int = 0  # input changes in all
    recompile_reasons: list[str] = field(default_factory=list)  # recompiles only
    stack: tuple[StackFrame, ...] = ()
    span: tuple[float, float] | None = None  # first and last chromium_event, for the timeline
    payloads: list[BudgetItem] = field(default_factory=list)  # those its section shows
    # (name, digest, length) of its metric values of SHARED_METRIC or more, in the order its
    # section shows them: for linking repeats, and for counting those cut (over METRIC_BYTES)
    long_metrics: list[tuple[str, bytes, int]] = field(default_factory=list)
    detail: bool = True  # False: beyond DETAIL_COMPILES, shown without the heavy parts
    previous: tuple[str, str] | None = None  # (label, anchor) of the previous compile

    @property
    def label(self) -> str:
        """How the page names the compile: its id, after its log's short name if there are several."""
        return f"{self.log_short} {self.key}" if self.log_short else self.key

    @property
    def time(self) -> str:
        return seconds(self.time_s)

    @property
    def problem(self) -> bool:
        return self.status in ("failed", "incomplete")

    @property
    def listed_recompile(self) -> bool:
        return self.recompile is not None or bool(self.recompile_reasons)


@dataclass(slots=True)
class CompileView:
    """One compile's section: built from the compile as it is read again, dropped once written."""

    c: Compile
    row: Row
    inputs: list[InputView] = field(default_factory=list)
    storages: list[StorageView] = field(default_factory=list)
    plain_storages: int = 0  # storages holding exactly one input, whole: counted, not drawn
    graphs: list[PayloadView] = field(default_factory=list)
    guards: PayloadView | None = None
    artifacts: list[PayloadView] = field(default_factory=list)
    errors: list[PayloadView] = field(default_factory=list)
    metrics: list[MetricView] = field(default_factory=list)
    null_metrics: list[str] = field(default_factory=list)
    bwd_metrics: list[list[MetricView]] = field(default_factory=list)
    timeline: Timeline | None = None
    breaks: list[tuple[GraphBreak, str]] = field(default_factory=list)  # (break, its anchor)
    symbols: list[Symbol] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    anchor = property(lambda self: self.row.anchor)
    ref = property(lambda self: self.row.ref)
    key = property(lambda self: self.row.key)
    label = property(lambda self: self.row.label)
    log_label = property(lambda self: self.row.log_label)
    log_short = property(lambda self: self.row.log_short)
    status = property(lambda self: self.row.status)
    where = property(lambda self: self.row.where)
    time = property(lambda self: self.row.time)
    reason = property(lambda self: self.row.reason)
    detail = property(lambda self: self.row.detail)
    problem = property(lambda self: self.row.problem)
    alias_groups = property(lambda self: self.row.alias_groups)
    previous = property(lambda self: self.row.previous)

    @property
    def recompile(self) -> Recompile | None:
        return self.c.recompile


@dataclass(slots=True)
class LogView:
    log: LogIndex
    label: str


@dataclass(slots=True)
class HeadFigure:
    label: str
    value: str
    status: str | None = None  # the table filter a click sets: a status, or * for all rows
    tone: str = ""


@dataclass(slots=True)
class Budget:
    full: bool
    payloads: int = 0
    cut: int = 0  # payloads shown in part
    left_out: int = 0  # payloads not shown at all
    light: int = 0  # compiles shown without stack, graphs, metrics, timeline (DETAIL_COMPILES)
    shown_bytes: int = 0
    total_bytes: int = 0
    metrics_cut: int = 0
    compiles: int = 0  # compiles in the report (records outside any compile included)
    hidden: int = 0  # compiles beyond PAGE_COMPILES: no row, no section
    hidden_problems: int = 0  # of them failed, unfinished or restarted
    hidden_recompiles: int = 0  # of them recompiles
    only: str | None = None  # --compile-id: the page shows this compile alone, whole

    @property
    def limited(self) -> bool:
        cut = self.cut or self.left_out or self.metrics_cut or self.light
        return bool(cut or self.hidden and self.only is None)


class SlowRow(NamedTuple):
    """A row of the compile-time table: a compile (linked when on the page), or all of them."""

    label: str
    anchor: str
    function: str
    cells: list[str]  # one per phase, "" where the metrics have none


class TimeView(NamedTuple):
    """Where the compile time went: each phase summed, then the slowest compiles."""

    phases: list[str]
    rows: list[SlowRow]
    left: int  # compiles beyond the slowest shown


def time_view(o: Overview, shown: dict[str, Row]) -> TimeView | None:
    """The compile-time table; a compile on the page is named and linked as the page names it."""
    if not o.slowest:
        return None
    names = [n for n in PHASE_NAMES if n in o.phases]
    rows = [SlowRow(f"all {o.compiles:,}", "", "", [seconds(o.phases[n]) for n in names])]
    for s in o.slowest:
        cells = [seconds(s.phases[n]) if n in s.phases else "" for n in names]
        r = shown.get(s.ref)
        label, anchor = (r.label, r.anchor) if r is not None else (s.ref, "")
        rows.append(SlowRow(label, anchor, s.function or "", cells))
    return TimeView(names, rows, o.compiles - len(o.slowest))


@dataclass(slots=True)
class Page:
    """Everything the template renders: built in one pass over the compiles, except each
    compile's section, which `views` builds as the compile is read again."""

    report: Report
    full: bool
    title: str
    version: str
    torch_version: str | None
    logs: list[LogView]
    ranks: list[int]
    o: Overview
    figures: list[HeadFigure]
    budget: Budget
    compiles: list[Row]  # in log order
    trie: list[TrieNode]
    breaks: list[BreakView]
    recompiles: list[Row]
    problems: list[Row]
    issues: list[tuple[Row, ExportIssue]]
    divergence: list[Divergence]
    notes: list[str]
    bad_lines: list[BadLine]
    bad_total: int
    lanes: list[Timeline]
    many: bool
    statuses: list[str]
    limits: dict[str, str]
    break_anchor: dict[str, str]  # graph-break reason -> its row in the graph-break table
    time: TimeView | None = None  # where the compile time went
    # (metric, digest of a long value) -> (anchor, label) of the first section that shows it
    shared: dict[tuple[str, bytes], tuple[str, str]] = field(default_factory=dict)

    def views(self, start: int = 0, stop: int | None = None) -> Iterator[CompileView]:
        """The section of each compile the page shows, in log order, one compile read at a time:
        of all of them, or of the report's compiles [start, stop)."""
        want = {r.n: r for r in self.compiles if r.n >= start and (stop is None or r.n < stop)}
        if not want:
            return
        first = min(want)
        for n, c in enumerate(halves.compiles(self.report, first, max(want) + 1), first):
            r = want.get(n)
            if r is not None:
                yield section(r, c, self)


# -- building ---------------------------------------------------------------------------------------
def build(report: Report, full: bool = False, only: tuple[str, Picked] | None = None) -> Page:
    """The page for a report; `full` shows every compile, payload and metric whole; `only`
    (--compile-id, and what it picks) shows those compiles alone, whole, and counts them all."""
    tally = Tally(report)
    pick = _Pick(report, full or only is not None, only=only[1] if only else None)
    cut = None if only else halves.middle(halves.costs(report), scale=2)
    if cut is None:
        first_pass(report, tally, pick, 0)
    else:
        # The later compiles are read by a forked copy; what it found is taken in as if read here.
        rest = cut
        later = halves.Later(
            lambda _: first_pass(report, Tally(report), _Pick(report, full, rest), rest).sent()
        )
        first_pass(report, tally, pick, 0, cut)
        ok, value = later.result()
        later.discard()
        if ok:
            tally.merge(value.tally)
            pick.merge(value.pick)
        else:
            first_pass(report, tally, pick, cut)
    o = tally.done()
    rows, budget = pick.done()
    budget.only = only[0] if only else None
    share_budget(report, rows, budget, budget.full)
    anchors: dict[tuple[str, str], str] = {}
    for r in rows:
        anchors.setdefault((r.log, r.key), r.anchor)
    for r in rows:
        if r.recompile is not None and r.recompile.previous:
            prev = anchors.get((r.log, r.recompile.previous))
            if prev:
                r.previous = (r.recompile.previous, prev)
    breaks = break_views(o, {r.ref: r for r in reversed(rows)})
    return Page(
        report=report,
        full=budget.full,
        title=PurePath(report.path).name or report.path,
        version=__version__,
        torch_version=report.torch_version,
        logs=[LogView(log, pick.labels[id(log)]) for log in report.logs],
        ranks=report.ranks,
        o=o,
        figures=figures(o),
        budget=budget,
        compiles=rows,
        trie=trie(rows),
        breaks=breaks,
        recompiles=[r for r in rows if r.listed_recompile],
        problems=[r for r in rows if r.status in _PROBLEMS],
        issues=[(r, x) for r in rows for x in r.export_issues],
        divergence=list(report.divergence),
        notes=list(report.notes) + [f"{log.name}: {n}" for log in report.logs for n in log.notes],
        bad_lines=[b for log in report.logs for b in log.bad_lines],
        bad_total=sum(log.bad_count for log in report.logs),
        lanes=page_timeline(rows),
        many=pick.many,
        statuses=sorted({r.status for r in rows}, key=_status_order),
        limits={
            "payload": nbytes(kept.PAYLOAD_BYTES),
            "page": nbytes(kept.PAGE_PAYLOAD_BYTES),
            "metric": nbytes(METRIC_BYTES),
            "compiles": str(DETAIL_COMPILES),
            "rows": str(PAGE_COMPILES),
            "break_compiles": str(MAX_BREAK_COMPILES),
        },
        break_anchor={break_key(b.reason): b.anchor for b in breaks},
        time=time_view(o, {r.ref: r for r in rows}),
        shared=first_shown(rows),
    )


_PROBLEMS = ("failed", "incomplete", "restarted")
Picked = Callable[[Compile], bool]  # --compile-id: whether the page shows a compile


@dataclass(slots=True)
class FirstPass:
    """The figures and the rows the first pass found in a run of compiles."""

    tally: Tally
    pick: _Pick

    def sent(self) -> FirstPass:
        self.pick.frames = {}  # for sharing StackFrames among rows here; no use elsewhere
        return self


def first_pass(
    report: Report, tally: Tally, pick: _Pick, start: int, stop: int | None = None
) -> FirstPass:
    """Count and pick from the report's compiles [start, stop)."""
    for li, k, c in halves.places(report, start, stop):
        tally.add(c)
        pick.add(li, k, c)
    return FirstPass(tally, pick)


@dataclass(slots=True)
class _Gone:
    """A row the other process made and dropped: it still holds its place until dropped here."""

    status: Status
    listed_recompile: bool


class _Pick:
    """Chooses, as the compiles go by, the ones the page shows (PAGE_COMPILES) and the ones it
    shows in full (DETAIL_COMPILES): failures first, then graph breaks, restarts and recompiles,
    then the rest, each in log order. Only the rows still in the running are kept."""

    def __init__(
        self, report: Report, full: bool, start: int = 0, only: Picked | None = None
    ) -> None:
        self.full = full
        self.only = only
        self.many = len({log.name for log in report.logs}) > 1
        self.refs = Refs.of(report)
        self.labels = log_labels(report.logs)
        self.short = self.many or len(report.logs) > 1
        self.names = [self.labels[id(log)] for log in report.logs]
        self.cap = PAGE_COMPILES
        self.detail_cap = min(DETAIL_COMPILES, PAGE_COMPILES)
        # Min-heaps of (-order, -n, row): the first entry is the worst row kept.
        self.rows: list[tuple[int, int, Row | _Gone]] = []
        self.detailed: list[tuple[int, int, Row | _Gone]] = []
        self.used: set[str] = set()
        self.frames: dict[StackFrame, StackFrame] = {}
        self.n = start
        self.hidden_problems = 0
        self.hidden_recompiles = 0
        # Picking from later compiles in another process (start > 0): each row made, in order,
        # as (n, -order, anchor base, status, listed recompile), and the compiles turned away
        # before any row was made (problems, recompiles), so `merge` can replay them exactly.
        self.made: list[tuple[int, int, str, Status, bool]] | None = [] if start else None
        self.skipped = [0, 0]

    def add(self, li: int, k: int, c: Compile) -> None:
        n = self.n
        self.n += 1
        if self.only is not None and not self.only(c):
            return
        order = problem_order(c)
        key = (-order, -n)
        if self.full:
            self.rows.append((*key, self.row(li, k, n, c, True)))
            return
        if self._turned_away(key):
            self._hide_count(c.status, _listed_recompile(c))
            self.skipped[0] += c.status in _PROBLEMS
            self.skipped[1] += _listed_recompile(c)
            return
        in_detail = self._in_detail(key)
        self._keep(key, self.row(li, k, n, c, in_detail), in_detail)

    def _turned_away(self, key: tuple[int, int]) -> bool:
        return self.cap <= 0 or (len(self.rows) >= self.cap and key < self.rows[0][:2])

    def _in_detail(self, key: tuple[int, int]) -> bool:
        return len(self.detailed) < self.detail_cap or (
            self.detail_cap > 0 and key > self.detailed[0][:2]
        )

    def _keep(self, key: tuple[int, int], r: Row | _Gone, in_detail: bool) -> None:
        heapq.heappush(self.rows, (*key, r))
        if len(self.rows) > self.cap:
            out = heapq.heappop(self.rows)[2]
            self._hide_count(out.status, out.listed_recompile)
        if in_detail:
            heapq.heappush(self.detailed, (*key, r))
            if len(self.detailed) > self.detail_cap:
                out = heapq.heappop(self.detailed)[2]
                if isinstance(out, Row):
                    _lighten(out)

    def merge(self, later: _Pick) -> None:
        """Go on as if this pick had seen the compiles another process picked from (the ones
        after its own): each row it made is replayed in order against these caps, so the same
        rows are kept, in full or not, under the same anchors as in one pass."""
        assert later.made is not None
        self.n = later.n
        self.hidden_problems += later.skipped[0]
        self.hidden_recompiles += later.skipped[1]
        theirs = {e[2].n: e[2] for e in later.rows if isinstance(e[2], Row)}
        for n, neg_order, base, status, recompile in later.made:
            key = (neg_order, -n)
            r = theirs.get(n)
            if self.full:
                assert r is not None  # nothing is dropped from a full page
                r.anchor = unique(self.used, base)
                self.rows.append((*key, r))
                continue
            if self._turned_away(key):
                self._hide_count(status, recompile)
                continue
            in_detail = self._in_detail(key)
            anchor = unique(self.used, base)  # taken even by a row dropped later, as in one pass
            if r is None:
                self._keep(key, _Gone(status, recompile), in_detail)
                continue
            # A row the other process kept in full may lose that here; one it made light was
            # beaten by rows that are here too, and will be dropped from the detailed ones.
            r.anchor = anchor
            if r.detail and not in_detail:
                _lighten(r)
            self._keep(key, r, in_detail)

    def _hide_count(self, status: Status, recompile: bool) -> None:
        self.hidden_problems += status in _PROBLEMS
        self.hidden_recompiles += recompile

    def row(self, li: int, k: int, n: int, c: Compile, detail: bool) -> Row:
        ref = self.refs(c)
        base = "c-" + _ANCHOR_UNSAFE.sub("_", ref)
        anchor = unique(self.used, base)
        if self.made is not None:
            self.made.append((n, -problem_order(c), base, c.status, _listed_recompile(c)))
        ph = c.phases
        r = Row(
            n=n,
            at=(li, k),
            ref=ref,
            anchor=anchor,
            key=c.key,
            log=c.log,
            log_label=self.names[li],
            log_short=self.names[li] if self.short else "",
            status=c.status,
            pid=c.pid,
            function=c.function,
            file=c.file,
            where=f"{short_path(c.file)}:{c.firstline}" if c.file else "",
            sort_id=_sort_id(c, n),
            ops=c.graph_ops,
            time_s=c.compile_time_s,
            inputs=len(c.inputs),
            alias_groups=len({i.alias_group for i in c.inputs if i.alias_group}),
            breaks=len(c.graph_breaks),
            reason=_reason(c)[:_REASON_CHARS],
            stack=tuple(self.frames.setdefault(f, f) for f in c.stack) if c.id else (),
            span=(
                min(p.start_us for p in ph),
                max([p.start_us + (p.dur_us or 0.0) for p in ph]),
            )
            if ph
            else None,
            detail=detail,
        )
        r.export_issues = c.export_issues[:MAX_ROW_ISSUES]
        if c.status in _PROBLEMS:
            r.fail_type, r.fail_where = c.fail_type, c.fail_where
            r.fail_reason = c.fail_reason if c.fail_type else None
            r.restart_reasons = c.restart_reasons
        rc = c.recompile
        if rc is not None:
            r.recompile = Recompile(
                rc.previous,
                rc.reasons,
                rc.input_changes[:MAX_ROW_CHANGES],
                rc.limit_hit,
                rc.compared,
            )
            r.changes = len(rc.input_changes)
        if _listed_recompile(c):
            r.recompile_reasons = c.recompile_reasons
        r.payloads = budget_items(c, not detail)
        if detail:
            r.long_metrics = long_metrics(c)
        return r

    def done(self) -> tuple[list[Row], Budget]:
        rows = sorted((e[2] for e in self.rows if isinstance(e[2], Row)), key=lambda r: r.n)
        budget = Budget(full=self.full, compiles=self.n, hidden=self.n - len(rows))
        budget.hidden_problems = self.hidden_problems
        budget.hidden_recompiles = self.hidden_recompiles
        budget.light = sum(not r.detail for r in rows)
        return rows, budget


def _lighten(r: Row) -> None:
    """A row pushed out of the detailed ones by a compile that matters more."""
    r.detail = False
    r.payloads = [p for p in r.payloads if p.kind == "dynamo_error"]
    r.long_metrics = []


def _listed_recompile(c: Compile) -> bool:
    return (c.recompile is not None and not c.is_retry) or (
        is_recompile(c) and bool(c.recompile_reasons)
    )


def _status_order(s: str) -> int:
    from tlview.model import STATUSES

    return STATUSES.index(s) if s in STATUSES else len(STATUSES)


def unique(used: set[str], anchor: str) -> str:
    out, n = anchor, 1
    while out in used:
        n += 1
        out = f"{anchor}~{n}"
    used.add(out)
    return out


def _sort_id(c: Compile, n: int) -> str:
    if c.id is None:
        return f"{n:06d}:-"
    return f"{n:06d}:" + ".".join(f"{k + 1:06d}" for k in c.id.sort_key)


def log_labels(logs: list[LogIndex]) -> dict[int, str]:
    """A short name per log: its rank when ranks tell logs apart, else what differs in its name."""
    ranks = [log.rank for log in logs]
    if len(logs) > 1 and None not in ranks and len(set(ranks)) == len(ranks):
        return {id(log): f"rank {log.rank}" for log in logs}
    names = [log.name for log in logs]
    short = dict(zip(names, _distinct(sorted(set(names))), strict=False))
    out = {}
    for log in logs:
        label = short.get(log.name, log.name)
        if names.count(log.name) > 1:
            label += f" pid {log.pid}"
        if log.rank is not None:
            label = f"rank {log.rank} {label}"
        out[id(log)] = label
    return out


def _distinct(names: list[str]) -> list[str]:
    """Names without the prefix and suffix they all share (cut at a separator), if still distinct."""
    if len(names) < 2:
        return names
    pre = os.path.commonprefix(names)
    suf = os.path.commonprefix([n[::-1] for n in names])[::-1]
    pre = pre[: max((pre.rfind(ch) for ch in "_-. /"), default=-1) + 1]
    k = min((suf.find(ch) for ch in "_-. /" if ch in suf), default=len(suf))
    suf = suf[k:]
    out = [n[len(pre) : len(n) - len(suf)] for n in names]
    if all(out) and len(set(out)) == len(out):
        return out
    return names


def figures(o: Overview) -> list[HeadFigure]:
    def rows(status: Status) -> Status | None:
        """The status a figure filters the table by, when the table has rows of it."""
        return status if o.by_status.get(status) else None

    figs = [
        HeadFigure("compiles", f"{o.compiles:,}", "*"),
        HeadFigure("failed", f"{o.failures:,}", rows("failed"), "failed" if o.failures else ""),
        HeadFigure(
            "never finished",
            f"{o.incomplete:,}",
            rows("incomplete"),
            "incomplete" if o.incomplete else "",
        ),
        HeadFigure("graph breaks", f"{o.graph_breaks:,}", rows("graph_break")),
        HeadFigure("recompiles", f"{o.recompiles:,}"),
        HeadFigure("restarts", f"{o.restarts:,}", rows("restarted")),
        HeadFigure(
            "compile time",
            f"{o.compile_time_s:.2f} s" if o.timed else "not logged",
        ),
        HeadFigure("cache hits", f"{o.cache.get('hit', 0):,}"),
        HeadFigure("cache misses", f"{o.cache.get('miss', 0):,}"),
    ]
    if o.cache.get("bypass"):
        figs.append(HeadFigure("cache bypasses", f"{o.cache['bypass']:,}"))
    if o.cache.get("disabled"):
        figs.append(HeadFigure("caches disabled", f"{o.cache['disabled']:,}"))
    figs.append(HeadFigure("inputs", f"{o.inputs:,}"))
    if o.by_status.get("traced"):
        figs.append(HeadFigure("traced by export", f"{o.by_status['traced']:,}", "traced"))
    if o.export_issues:
        figs.append(HeadFigure("export issues", f"{o.export_issues:,}", None, "failed"))
    if o.outside:
        figs.append(
            HeadFigure(
                f"compiled outside dynamo ({o.outside:,})",
                f"{o.outside_s:.2f} s" if o.outside_timed else "not logged",
                None,
                "failed" if o.outside_failed else "",
            )
        )
    figs.append(HeadFigure("bad lines", f"{o.bad_lines:,}", None, "failed" if o.bad_lines else ""))
    return figs


def break_views(o: Overview, by_ref: dict[str, Row]) -> list[BreakView]:
    out = []
    for n, s in enumerate(o.breaks, 1):
        out.append(
            BreakView(
                anchor=f"gb-{n}",
                title=break_title(s.reason),
                reason=s.reason,
                count=s.count,
                where=[(short_path(w, 3), w, k) for w, k in s.where.items()],
                compiles=[
                    (by_ref[ref].label, by_ref[ref].anchor) if ref in by_ref else (ref, "")
                    for ref in s.compiles
                ],
            )
        )
    return out


def _kinds(c: Compile) -> list[tuple[str, Payload]]:
    """A compile's payloads in the order its section shows them, with where each goes."""
    kinds = [("graph", p) for p in c.graphs] + [("artifact", p) for p in c.artifacts]
    if c.guards is not None:
        kinds.append(("guards", c.guards))
    return kinds


def budget_items(c: Compile, errors_only: bool) -> list[BudgetItem]:
    """What the budget needs of the payloads a compile's section shows (light: its errors)."""
    problem = c.status in ("failed", "incomplete")
    out = []
    for pos, (_, p) in enumerate(_kinds(c)):
        if errors_only and p.kind != "dynamo_error":
            continue
        first = p.kind in _FIRST_KINDS
        size = None if p.text is None else _utf8_len(p.text)
        out.append(BudgetItem(pos, p.kind, (0 if problem else 1) if first else 2, p.bytes, size))
    return out


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "replace"))


def section(r: Row, c: Compile, page: Page) -> CompileView:
    """Everything one compile's section shows."""
    v = CompileView(c=c, row=r)
    marks = describer_marks(c.inputs)
    names = input_names(c.inputs)
    dynamic = dynamic_dims(c)
    v.inputs = [input_view(i, marks.get(id(i), ""), names, dynamic) for i in c.inputs]
    v.breaks = [(g, page.break_anchor.get(break_key(g.reason), "")) for g in c.graph_breaks]
    kinds = _kinds(c)
    for pl in r.payloads:
        where, p = kinds[pl.pos]
        pv = payload_view(p, pl, f"{r.anchor}-p{pl.pos}", c.log, page.full)
        if where == "guards":
            v.guards = pv
        elif p.kind == "dynamo_error":
            v.errors.append(pv)
        elif where == "graph":
            v.graphs.append(pv)
        else:
            v.artifacts.append(pv)
    if not r.detail:
        return v
    v.storages, v.plain_storages = storages(c)
    v.symbols = c.symbols
    v.kernels = kernels(c)
    v.events = c.events
    if c.metrics:
        v.metrics, v.null_metrics = metric_views(c.metrics, r, page.shared, page.full)
    v.bwd_metrics = [metric_views(m, r, page.shared, page.full)[0] for m in c.bwd_metrics]
    v.timeline = compile_timeline(c.phases)
    return v


def payload_view(p: Payload, pl: BudgetItem, anchor: str, log: str, full: bool) -> PayloadView:
    """A payload with the text the plan gave it, and a note for whatever it could not show."""
    pv = PayloadView(p, anchor, log, _lang(p))
    where = f"line {p.line} of {log}"
    if pl.state == "reader":
        pv.note = (
            f"Not on this page: the reader kept no more text; it is at {where}. "
            "`--full` keeps every payload."
        )
    elif pl.state == "spent":
        pv.note = (
            f"Not on this page: the page budget was spent before it; it is at {where}. "
            "`--full` keeps every payload."
        )
    elif pl.state in ("whole", "cut"):
        pv.text = p.text if pl.state == "whole" else pl.text
        pv.shown = pl.shown
        if pl.shown < p.bytes and pv.text is not None:
            pv.note = (
                f"Cut: showing the first {pv.text.count(chr(10)) + 1:,} of {p.lines:,} lines "
                f"({nbytes(pv.shown)} of {nbytes(p.bytes)}); the rest is at {where}. "
                + (
                    "`--full` keeps every payload whole."
                    if not full
                    else "tlview keeps at most this much of this payload."
                )
            )
    return pv


def _reason(c: Compile) -> str:
    if c.fail_type:
        lines = [ln.strip() for ln in (c.fail_reason or "").splitlines() if ln.strip()]
        return f"{c.fail_type}: {' '.join(lines[:2])}" if lines else c.fail_type
    if c.status == "incomplete":
        return (
            "never finished: no compilation_metrics (the process stopped during this "
            f"compile{stopped_in(c)})"
        )
    if c.graph_breaks:
        return "graph break: " + break_title(c.graph_breaks[0].reason)
    if c.restart_reasons:
        return "restarted: " + break_title(c.restart_reasons[0])
    if c.recompile is not None and c.recompile.reasons:
        return "recompiled: " + c.recompile.reasons[0]
    if c.recompile_reasons:
        return "recompiled: " + c.recompile_reasons[0]
    return ""


_NOT_SPACE = re.compile(r"\S")


def _lang(p: Payload) -> str:
    m = _NOT_SPACE.search(p.text or "")
    if p.encoding == "json" or (m is not None and m.group() in ("{", "[")):
        return "json"
    if _PY_KINDS.search(p.kind):
        return "py"
    return "text"


def share_budget(report: Report, rows: list[Row], budget: Budget, full: bool) -> None:
    """Give payloads their share of the page budget: problems and dynamo's graphs first."""
    payloads = [(r, pl) for r in rows for pl in r.payloads]
    order = sorted(range(len(payloads)), key=lambda k: (payloads[k][1].priority, k))
    left = kept.PAGE_PAYLOAD_BYTES
    for k in order:
        r, pl = payloads[k]
        budget.payloads += 1
        budget.total_bytes += pl.bytes
        if pl.size is None:
            if pl.bytes:
                budget.left_out += 1
                pl.state = "reader"
            continue
        cap = pl.size if full else min(kept.PAYLOAD_BYTES, left)
        if cap <= 0 and pl.size:
            budget.left_out += 1
            pl.state = "spent"
            continue
        if pl.size > cap:
            pl.state = "cut"
            pl.text = _cut(_text_of(report, r, pl), cap)
            pl.shown = _utf8_len(pl.text)
        else:
            pl.state = "whole"
            pl.shown = pl.size
        left -= pl.shown
        budget.shown_bytes += pl.shown
        if pl.shown < pl.bytes:
            budget.cut += 1
    if full:
        return  # every metric value is shown whole
    seen: dict[tuple[str, bytes], str] = {}
    for r in rows:
        for name, d, n in r.long_metrics:
            if n > METRIC_BYTES and seen.setdefault((name, d), r.anchor) == r.anchor:
                budget.metrics_cut += 1


def first_shown(rows: list[Row]) -> dict[tuple[str, bytes], tuple[str, str]]:
    """Where each long metric value is first shown: later sections link there instead."""
    shared: dict[tuple[str, bytes], tuple[str, str]] = {}
    for r in rows:
        for name, d, _ in r.long_metrics:
            shared.setdefault((name, d), (r.anchor, r.label))
    return shared


def _text_of(report: Report, r: Row, pl: BudgetItem) -> str:
    """The kept text of a payload the page cuts: its compile is read once more, for it alone."""
    li, k = r.at
    p = _kinds(report.logs[li].compiles[k])[pl.pos][1]
    assert p.text is not None and p.kind == pl.kind
    return p.text


def _cut(text: str, cap: int) -> str:
    data = text.encode("utf-8", "replace")[:cap]
    head = data.decode("utf-8", "ignore")
    nl = head.rfind("\n")
    return head[:nl] if nl > len(head) // 2 else head


def long_metrics(c: Compile) -> list[tuple[str, bytes, int]]:
    """The metric values of SHARED_METRIC or more a detailed section shows, in its order: name,
    digest and length. Found in the first pass, so any part of the page can link repeats."""
    out = []
    for m in ([c.metrics] if c.metrics else []) + c.bwd_metrics:
        for k, val in m.items():
            if val is None or not _may_be_long(val):
                continue
            text = _metric_text(val)
            if len(text) >= SHARED_METRIC:
                out.append((str(k), digest(text), len(text)))
    return out


def digest(text: str) -> bytes:
    """A long metric value's fingerprint. The same values (configs) come back in every compile,
    each digested twice (first pass, then its section): a cache hit costs a dict lookup, where
    hashing kilobytes again cost 8% of a page of 500 detailed compiles."""
    got = _DIGESTS.get(text)
    if got is None:
        got = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()
        global _DIGESTED
        if _DIGESTED + len(text) > DIGESTS_CHARS:  # the cache holds the texts: keep it small
            _DIGESTS.clear()
            _DIGESTED = 0
        if len(text) <= DIGESTS_CHARS // 8:
            _DIGESTS[text] = got
            _DIGESTED += len(text)
    return got


DIGESTS_CHARS = 4 << 20  # characters of metric values the digest cache may hold
_DIGESTS: dict[str, bytes] = {}
_DIGESTED = 0


def _may_be_long(v: Any) -> bool:
    """Whether a metric value's text can be SHARED_METRIC long or more, from a cheap look."""
    if isinstance(v, bool | int | float):
        return False
    if isinstance(v, str):
        head = v[:1]
        if len(v) > 120 and (head == "{" or head.isspace()):
            return True  # _metric_text may indent it
        return len(v) >= SHARED_METRIC
    return True


def metric_views(
    m: dict[str, Any],
    r: Row,
    shared: dict[tuple[str, bytes], tuple[str, str]],
    full: bool,
) -> tuple[list[MetricView], list[str]]:
    """Every field of a metrics record; long values shown first by another compile are linked."""
    out, nulls = [], []
    for k, val in m.items():
        if val is None:
            nulls.append(str(k))
            continue
        text = _metric_text(val)
        mv = MetricView(str(k), text)
        if len(text) >= SHARED_METRIC:
            seen = shared.get((str(k), digest(text)))
            if seen is not None and seen[0] != r.anchor:
                mv.same_as = seen
                mv.value = ""
        if not full and len(mv.value) > METRIC_BYTES:
            mv.note = (
                f"Cut: {nbytes(METRIC_BYTES)} of {nbytes(len(text))} shown. "
                "`--full` shows every value whole."
            )
            mv.value = mv.value[:METRIC_BYTES]
        out.append(mv)
    return out, nulls


def _metric_text(v: Any) -> str:
    if isinstance(v, str):
        s = v.strip()
        if s[:1] == "{" and s[-1:] == "}" and len(s) > 120:
            return _indented(s) or v
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "\n".join(v)
    return dumps(v, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


@lru_cache(maxsize=64)
def _indented(s: str) -> str | None:
    """A JSON object logged as one line, indented; the configs repeat in every compile."""
    try:
        return orjson.dumps(orjson.loads(s), option=orjson.OPT_INDENT_2).decode()
    except (orjson.JSONDecodeError, TypeError):  # not JSON, or nested too deep to write back
        return None


# -- inputs and the aliasing picture --------------------------------------------------------------


def input_view(
    i: Input,
    mark: str,
    names: Mapping[tuple[int, int], str],
    dynamic: DynamicDims,
) -> InputView:
    t = i.tensor
    st = i.storage
    sources = i.sources
    return InputView(
        i.superseded,
        sources[0] + mark if sources else None,
        sources[1:],
        t.id,
        dims(t.size, input_symbols(i, dynamic) if dynamic else None),
        dims(t.stride),
        str(t.storage_offset),
        t.dtype.replace("torch.", ""),
        t.device,
        "" if st is None else nbytes(st.size),
        i.alias_group,
        input_flags(i, names),
        list(i.inner.items()),
        i.notes,
        i.source,
    )


def byte_range(t: TensorDesc) -> tuple[int | None, int | None]:
    """Bytes [start, end) of its storage a tensor covers, or (None, None) when symbolic."""
    size, stride, off = t.size, t.stride, t.storage_offset
    isz = itemsize(t.dtype)
    if isz is None or size is None or stride is None or len(size) != len(stride):
        return None, None
    if not isinstance(off, int):
        return None, None
    lo = hi = off
    empty = False
    for d, s in zip(size, stride, strict=True):
        if not isinstance(d, int) or not isinstance(s, int):
            return None, None
        if d == 0:
            empty = True
        step = (d - 1) * s
        if step < 0:
            lo += step
        else:
            hi += step
    if empty:
        return off * isz, off * isz
    return lo * isz, (hi + 1) * isz


def _span_text(t: TensorDesc, start: int | None, end: int | None) -> str:
    shape = f"{dims(t.size)} stride {dims(t.stride)} offset {t.storage_offset} {t.dtype.replace('torch.', '')}"
    if start is None or end is None:
        return f"{shape}: span not computable (symbolic or unknown dtype)"
    return f"{shape}: bytes {start:,} to {end:,}"


def storages(c: Compile) -> tuple[list[StorageView], int]:
    """The storages under the compile's inputs worth a picture, each with the span each tensor
    on it covers, and how many others there are (`_plain`: one input covering all of it)."""
    by_key: dict[tuple[int, int], StorageView] = {}
    seen: set[tuple[int, int, int]] = set()
    described: dict[tuple[int, int], StorageDesc] = {}
    for s in c.input_sets:
        for sid, sd in s.storages.items():
            described[(s.describer, sid)] = sd
    # Storages a base or an inner tensor also covers: never plain.
    shared = {
        (i.describer, t.storage)
        for i in c.inputs
        if i.base is not None or i.inner
        for t in (i.base, *i.inner.values())
        if t is not None
    }

    def add(t: TensorDesc, describer: int, label: str, is_input: bool, group: int | None) -> None:
        st = t.storage
        if st is None or (describer, st, t.id) in seen:
            return
        seen.add((describer, st, t.id))
        key = (describer, st)
        sv = by_key.get(key)
        if sv is None:
            sd = described.get(key)
            sv = by_key[key] = StorageView(
                label=f"storage {st}", size=None if sd is None else sd.size
            )
        if group:
            sv.alias_group = group
        start, end = byte_range(t)
        sv.spans.append(Span(label, t, start, end, input=is_input))

    plain = 0
    for i in c.inputs:
        t = i.tensor
        st = t.storage
        if st is not None and not i.alias_group and (i.describer, st) not in shared:
            # The common case, an input alone on its storage: counted without a picture when
            # it covers all of it (as `_plain` would find).
            desc = described.get((i.describer, st))
            size = None if desc is None else desc.size
            start, end = byte_range(t)
            if start == 0 and isinstance(size, int) and end == size:
                plain += 1
                continue
        add(t, i.describer, i.source, True, i.alias_group)
    for i in c.inputs:
        if i.base is not None:
            add(i.base, i.describer, f"base of {i.source}", False, None)
        for name, t in i.inner.items():
            add(t, i.describer, f"{i.source}.{name}", False, None)
    out = []
    for sv in by_key.values():
        if _plain(sv):
            plain += 1
        else:
            _scale(sv)
            out.append(sv)
    out.sort(key=lambda s: (s.alias_group is None, s.alias_group or 0))
    return out, plain


def _plain(sv: StorageView) -> bool:
    """A storage with one input covering all of it: nothing to see in a picture of aliasing."""
    if sv.alias_group or sv.note or len(sv.spans) != 1:
        return False
    sp = sv.spans[0]
    return sp.input and sp.start == 0 and isinstance(sv.size, int) and sp.end == sv.size


def _scale(sv: StorageView) -> None:
    ends = [s.end for s in sv.spans if s.end is not None]
    size = sv.size if isinstance(sv.size, int) and not isinstance(sv.size, bool) else None
    total = size or max(ends, default=0)
    if size is not None and ends and max(ends) > size:
        sv.note = f"tensors reach byte {max(ends):,} of a {size:,}-byte storage" + (
            " (resized to zero, as FSDP does)" if size == 0 else ""
        )
        total = max(ends)
    elif isinstance(sv.size, str):
        sv.note = f"symbolic storage size {sv.size}; drawn to the furthest tensor"
    for s in sv.spans:
        if s.start is None or s.end is None or total <= 0:
            s.x, s.w = "0", "0"
            continue
        s.x = pct(100 * s.start / total)
        s.w = pct(max(0.4, 100 * (s.end - s.start) / total))


# -- timelines -----------------------------------------------------------------------------------------
def compile_timeline(phases: list[Phase]) -> Timeline | None:
    """The phases of one compile as bars, one row per nesting depth."""
    if not phases:
        return None
    t0 = min(p.start_us for p in phases)
    ends = [p.start_us + p.dur_us for p in phases if p.dur_us is not None]
    t1 = max(ends + [p.start_us for p in phases])
    total = max(t1 - t0, 1.0)
    depths = sorted({p.depth for p in phases})
    row_of = {d: k for k, d in enumerate(depths)}
    bars = []
    for p in sorted(phases, key=lambda p: (p.depth, p.start_us)):
        dur = p.dur_us if p.dur_us is not None else t1 - p.start_us
        tip = f"{p.name}: {ms(dur)} at +{ms(p.start_us - t0)}"
        if p.dur_us is None:
            tip += " (began and never ended)"
        bars.append(
            TimeBar(
                name=p.name,
                x=pct(100 * (p.start_us - t0) / total),
                w=pct(max(0.2, 100 * dur / total)),
                row=row_of[p.depth],
                tip=tip,
                ts=p.start_us,
                dur=p.dur_us,
                status="" if p.dur_us is not None else "open",
            )
        )
    return Timeline(bars, len(depths), ms(total), ticks(total))


def ticks(total_us: float, n: int = 4) -> list[tuple[str, str]]:
    return [(pct(100 * k / n), ms(total_us * k / n)) for k in range(1, n)]


def page_timeline(rows: list[Row]) -> list[Timeline]:
    """One lane per log: each compile as a bar from its first phase to its last."""
    by_log: dict[tuple[str, int | None], list[tuple[float, float, Row]]] = {}
    for r in rows:
        if r.span is not None:
            by_log.setdefault((r.log, r.pid), []).append((*r.span, r))
    if not by_log:
        return []
    longest = max(
        max(e for _, e, _ in spans) - min(s for s, _, _ in spans) for spans in by_log.values()
    )
    longest = max(longest, 1.0)
    lanes = []
    for spans in by_log.values():
        t0 = min(s for s, _, _ in spans)
        ends: list[float] = []
        bars = []
        for start, end, r in sorted(spans, key=lambda x: x[0]):
            # Rows are packed by the bar as drawn: a short compile's bar is wider than its
            # time, and the next bar in its row would cover it (and take its clicks).
            drawn = max(end, start + MIN_BAR_PCT * longest / 100)
            row = next((k for k, e in enumerate(ends) if e <= start), None)
            if row is None:
                if len(ends) < MAX_LANE_ROWS:
                    ends.append(drawn)
                row = len(ends) - 1
            ends[row] = max(ends[row], drawn)
            bars.append(
                TimeBar(
                    name=r.key,
                    x=pct(100 * (start - t0) / longest),
                    w=pct(max(MIN_BAR_PCT, 100 * (end - start) / longest)),
                    row=row,
                    tip=f"{r.label} {r.function or ''} [{r.status}]: "
                    f"{ms(end - start)} at +{ms(start - t0)}",
                    ts=start,
                    dur=end - start,
                    status=r.status,
                    href=r.anchor,
                )
            )
        label = spans[0][2].log_label
        lanes.append(Timeline(bars, max(1, len(ends)), ms(longest), ticks(longest), label))
    return lanes


# -- the compile stack trie ----------------------------------------------------------------------------
def trie(rows: Iterable[Row]) -> list[TrieNode]:
    """The user stacks that triggered compiles, common prefixes merged, as tlparse shows them."""
    root = TrieNode([])
    index: dict[int, dict[tuple[str, int, str], TrieNode]] = {}
    nostack = TrieNode([])
    for r in rows:
        if r.key == "-/-":
            continue
        if not r.stack:
            nostack.compiles.append(r)
            continue
        node = root
        for f in r.stack:
            kids = index.setdefault(id(node), {})
            k = (f.file, f.line, f.name)
            nxt = kids.get(k)
            if nxt is None:
                nxt = kids[k] = TrieNode([f])
                node.children.append(nxt)
            node = nxt
        node.compiles.append(r)
    out = [_squash(n) for n in root.children]
    if nostack.compiles:
        out.append(nostack)
    return out


def _squash(node: TrieNode) -> TrieNode:
    """Merge chains of single-child frames into one node, so the tree branches only where stacks do."""
    while len(node.children) == 1 and not node.compiles:
        child = node.children[0]
        node.frames.extend(child.frames)
        node.compiles = child.compiles
        node.children = child.children
    node.children = [_squash(n) for n in node.children]
    return node
