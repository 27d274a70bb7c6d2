"""One compile's section: built as the compile is read again, dropped once written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tlview.analyze.compiles import Analysis, Break, analysed
from tlview.analyze.names import describer_marks
from tlview.analyze.summary import input_names
from tlview.index.dims import dynamic_dims
from tlview.model import Compile, Event, Kernel, OutsideCompile, Payload, Symbol
from tlview.render.html.fmt import (
    STACK_FRAMES,
    STACK_HEAD,
    FrameView,
    clock,
    frame_view,
    short_frame,
)
from tlview.render.html.inputs import InputView, StorageView, input_view, storages
from tlview.render.html.metrics import MetricView, metric_views
from tlview.render.html.page import Page
from tlview.render.html.payloads import PayloadView, payload_view, section_payloads
from tlview.render.html.phases import FactsView, facts_view
from tlview.render.html.rows import IssueView, RecompileView, Row, issue_view, recompile_view
from tlview.render.html.timeline import Timeline, compile_timeline
from tlview.units import short_path

if TYPE_CHECKING:  # imported for a compile that has what they show
    from tlview.render.html.passes import PassesView
    from tlview.render.html.provenance import ProvenanceView


class OutsideView(NamedTuple):
    """A compile outside dynamo (AOTInductor, export: no compile id), in the section of `-/-`."""

    line: int
    time: str  # its seconds, or that they were not logged
    fail_type: str | None
    fail_reason: str


class BreakNote(NamedTuple):
    """A graph break in its compile's section, linked to its kind in the page's table."""

    where: str | None  # "file:line" in the user's code
    short: str  # that place, shortened
    headline: str  # the line of its reason that names it
    anchor: str  # its kind's row in the graph-break table ("" when none)
    line: int  # log line of the record
    text: str  # the whole message
    explanation: str | None  # what torch says it is about
    hints: tuple[str, ...]  # what to change
    callers: list[FrameView]  # the user calls that led to it, from the compiled function on


class AttemptView(NamedTuple):
    """An attempt of the compile that restarted (torch counts it in the compile, not apart):
    its inputs, breaks and artifacts, named; their texts are one `tlview show` away."""

    key: str
    ref: str
    anchor: str
    restarts: list[str]  # why it restarted, in words
    inputs: list[InputView]
    alias_groups: int
    breaks: list[BreakNote]
    artifacts: list[tuple[str, int, int]]  # (kind, log line, bytes)
    timeline: Timeline | None  # its phases (the page's trace download takes them too)


class SymbolView(NamedTuple):
    kind: str
    symbol: str
    value: str
    range: str
    source: str
    reason: str | None
    file: str  # of the frame that made it ("" when none was logged)
    where: str  # that frame, short


class KernelView(NamedTuple):
    graph: str
    order: int
    name: str
    nodes: str  # the FX nodes it computes, joined
    code: list[FrameView]  # the innermost user frame of each of their stacks


class EventView(NamedTuple):
    kind: str
    line: int
    summary: str
    where: str  # the frame it names, short ("" when none)


class CacheView(NamedTuple):
    cache: str
    outcome: str
    key: str
    reason: str


@dataclass(slots=True)
class CompileView:
    """One compile's section: built from the compile as it is read again, dropped once written."""

    row: Row
    facts: str = ""  # the line under its title: log, pid, rank, log lines, times, graph ops
    fail_type: str | None = None
    fail_where: str | None = None
    fail_reason: str = ""
    outside: list[OutsideView] = field(default_factory=list)
    outside_failed: bool = False
    phases: int = 0  # phases logged (a section without details draws no timeline of them)
    export_issues: list[IssueView] = field(default_factory=list)
    non_compliant_ops: list[str] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)  # each restart, in words
    recompile: RecompileView | None = None
    recompile_reasons: list[str] = field(default_factory=list)
    stack: list[FrameView] = field(default_factory=list)
    stack_frames: int = 0  # frames in the stack; past STACK_FRAMES its middle is left out
    stack_cut: int = 0  # where the frames left out were: after the first `stack_cut` shown
    cache: list[CacheView] = field(default_factory=list)
    events_dropped: int = 0
    inputs: list[InputView] = field(default_factory=list)
    storages: list[StorageView] = field(default_factory=list)
    plain_storages: int = 0  # storages holding exactly one input, whole: counted, not drawn
    graphs: list[PayloadView] = field(default_factory=list)
    guards: list[PayloadView] = field(default_factory=list)
    artifacts: list[PayloadView] = field(default_factory=list)
    errors: list[PayloadView] = field(default_factory=list)
    metrics: list[MetricView] = field(default_factory=list)
    null_metrics: list[str] = field(default_factory=list)
    bwd_metrics: list[list[MetricView]] = field(default_factory=list)
    timeline: Timeline | None = None
    breaks: list[BreakNote] = field(default_factory=list)
    attempts: list[AttemptView] = field(default_factory=list)  # attempts that restarted first
    symbols: list[SymbolView] = field(default_factory=list)
    kernels: list[KernelView] = field(default_factory=list)
    provenance: list[ProvenanceView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)
    more: FactsView | None = None  # where its time went, run time, CUDA graphs, origins, gaps
    passes: PassesView | None = None  # its regions, pass graphs and bytecode

    anchor = property(lambda self: self.row.anchor)
    ref = property(lambda self: self.row.ref)
    key = property(lambda self: self.row.key)
    label = property(lambda self: self.row.label)
    log_label = property(lambda self: self.row.log_label)
    log_short = property(lambda self: self.row.log_short)
    status = property(lambda self: self.row.status)
    pid = property(lambda self: self.row.pid)
    function = property(lambda self: self.row.function)
    file = property(lambda self: self.row.file)
    where = property(lambda self: self.row.where)
    time = property(lambda self: self.row.time)
    reason = property(lambda self: self.row.reason)
    detail = property(lambda self: self.row.detail)
    problem = property(lambda self: self.row.problem)
    alias_groups = property(lambda self: self.row.alias_groups)
    previous = property(lambda self: self.row.previous)


def section(r: Row, a: Analysis, page: Page) -> CompileView:
    """Everything one compile's section shows."""
    c = a.compile
    v = CompileView(row=r, facts=_facts(r, c))
    _notes(v, a, page.full)
    v.inputs = _inputs(c)
    v.breaks = [_break(b, page.break_anchor.get(b.key, "")) for b in a.breaks]
    v.more = facts_view(a, r.detail)
    v.attempts = [_attempt(e, f"{r.anchor}-a{k}", page) for k, e in enumerate(a.earlier)]
    kinds = section_payloads(c)
    on_page: dict[int, tuple[str, str | None]] = {}  # payload -> its anchor, the text it shows
    for pl in r.payloads:
        where, p = kinds[pl.pos]
        pv = payload_view(p, pl, f"{r.anchor}-p{pl.pos}", c.log, page.full, r.ref)
        text = p.text if pl.state == "whole" else pl.text if pl.state == "cut" else None
        on_page[id(p)] = (pv.anchor, text)
        if where == "guards":
            v.guards.append(pv)
        elif p.kind == "dynamo_error":
            v.errors.append(pv)
        elif where == "graph":
            v.graphs.append(pv)
        else:
            v.artifacts.append(pv)
    if a.subgraphs or a.bytecode or (r.detail and a.passes):  # else it shows none of them
        from tlview.render.html.passes import passes_view

        v.passes = passes_view(a, _by_line(kinds, on_page), r.detail)
    if not r.detail:
        return v
    v.storages, v.plain_storages = storages(c)
    v.symbols = [_symbol(s) for s in c.symbols]
    v.kernels = [_kernel(k) for k in a.kernels]
    if c.provenance:  # INDUCTOR_PROVENANCE=1's records
        from tlview.render.html.provenance import provenance_views

        v.provenance = provenance_views(c, r.anchor, lambda p: on_page.get(id(p)))
    v.events = [_event(e) for e in c.events]
    if c.metrics:
        v.metrics, v.null_metrics = metric_views(c.metrics, r, page.shared, page.full)
    v.bwd_metrics = [metric_views(m, r, page.shared, page.full)[0] for m in c.bwd_metrics]
    v.timeline = compile_timeline(c.phases)
    return v


def _inputs(c: Compile) -> list[InputView]:
    """A compile's inputs as its inputs table shows them (a section's, or an attempt's in it)."""
    marks = describer_marks(c.inputs)
    names = input_names(c.inputs)
    dynamic = dynamic_dims(c)
    return [input_view(i, marks.get(id(i), ""), names, dynamic) for i in c.inputs]


def _attempt(e: Analysis, anchor: str, page: Page) -> AttemptView:
    c = e.compile
    return AttemptView(
        key=c.key,
        ref=e.ref,
        anchor=anchor,
        restarts=[x.text for x in e.restarts],
        inputs=_inputs(c),
        alias_groups=e.alias_groups,
        breaks=[_break(b, page.break_anchor.get(b.key, "")) for b in e.breaks],
        artifacts=[(p.kind, p.line, p.bytes) for p in c.payloads()],
        timeline=compile_timeline(c.phases),
    )


def _by_line(
    kinds: list[tuple[str, Payload]], on_page: dict[int, tuple[str, str | None]]
) -> dict[int, str]:
    """Each payload's anchor in the section, by its log line."""
    return {p.line: on_page[id(p)][0] for _, p in kinds if id(p) in on_page}


def _facts(r: Row, c: Compile) -> str:
    facts = [r.log_label]
    if c.pid:
        facts.append(f"pid {c.pid}")
    if c.rank is not None:
        facts.append(f"rank {c.rank}")
    facts.append(f"log lines {c.first_log_line} to {c.last_log_line}")
    facts.append(f"{clock(c.start)} to {clock(c.end)}")
    if c.graph_ops is not None:
        facts.append(f"{c.graph_ops} graph ops")
    return " · ".join(facts)


def _notes(v: CompileView, a: Analysis, full: bool = False) -> None:
    """What every section shows, with every detail or not: its callouts, stack and cache."""
    c = a.compile
    v.fail_type, v.fail_where = c.fail_type, c.fail_where
    v.fail_reason = (c.fail_reason or "").strip()
    v.outside = [_outside(x) for x in c.outside]
    v.outside_failed = any(x.fail_type for x in c.outside)
    v.phases = len(c.phases)
    v.export_issues = [issue_view(x) for x in c.export_issues]
    v.non_compliant_ops = c.non_compliant_ops
    v.restarts = [x.text for x in a.restarts]
    v.recompile = None if c.recompile is None else recompile_view(c.recompile)
    v.recompile_reasons = c.recompile_reasons
    frames = c.stack
    v.stack_frames = len(frames)
    # A section shown with every detail lists STACK_FRAMES, another the outermost frame and the
    # two innermost, as the terminal does: the outermost ones and those where it started.
    keep, head = (STACK_FRAMES, STACK_HEAD) if v.detail else (3, 1)
    if len(frames) > keep and not full:
        v.stack_cut = head
        frames = [*frames[:head], *frames[-(keep - head) :]]
    v.stack = [frame_view(f) for f in frames]
    v.cache = [CacheView(e.cache, e.outcome, e.key or "", e.reason or "") for e in c.cache]
    v.events_dropped = c.events_dropped


def _outside(x: OutsideCompile) -> OutsideView:
    time = "time not logged" if x.seconds is None else f"{x.seconds:.2f} s"
    return OutsideView(x.line, time, x.fail_type, (x.fail_reason or "").strip())


def _break(b: Break, anchor: str) -> BreakNote:
    short = short_path(b.where) if b.where else ""
    callers = [frame_view(f) for f in b.callers]
    return BreakNote(
        b.where, short, b.title, anchor, b.line, b.text, b.explanation, b.hints, callers
    )


def _symbol(s: Symbol) -> SymbolView:
    w = s.where
    return SymbolView(
        s.kind,
        s.symbol,
        s.value or "",
        s.range or "",
        s.source or "",
        s.reason,
        "" if w is None else w.file,
        "" if w is None else short_frame(w),
    )


def _kernel(k: Kernel) -> KernelView:
    return KernelView(k.graph, k.order, k.name, ", ".join(k.nodes), [frame_view(f) for f in k.code])


def _event(e: Event) -> EventView:
    return EventView(e.kind, e.line, e.summary, "" if e.where is None else short_frame(e.where))


class Sections(NamedTuple):
    """Each shown compile's section, written as the compiles are read again (a `render.Pass`)."""

    page: Page
    render: Callable[[CompileView], str]

    def start(self, later: bool) -> None:
        if later:  # a copy drawing a later part: its new long names are numbered apart
            self.page.names.prefix = "b"

    def run(self, _: None, compiles: Iterator[Analysis]) -> Iterator[str]:
        want = {r.n: r for r in self.page.compiles}
        for a in compiles:
            r = want.get(a.n)
            if r is not None:
                yield self.render(section(r, a, self.page))

    def merge(self, state: None, later: None) -> None:
        pass


def compile_views(page: Page) -> Iterator[CompileView]:
    """The section of each compile the page shows, in log order, drawn here (for a caller that
    wants the views, not the page)."""
    want = {r.n: r for r in page.compiles}
    for a in analysed(page.report):
        r = want.get(a.n)
        if r is not None:
            yield section(r, a, page)
