"""One compile's section: built as the compile is read again, dropped once written."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tlview.analyze.names import describer_marks
from tlview.analyze.summary import break_key, input_names, kernels
from tlview.index.dims import dynamic_dims
from tlview.model import Compile, Event, GraphBreak, Kernel, Recompile, Symbol
from tlview.render.html.inputs import InputView, StorageView, input_view, storages
from tlview.render.html.metrics import MetricView, metric_views
from tlview.render.html.page import Page
from tlview.render.html.payloads import PayloadView, payload_view, section_payloads
from tlview.render.html.rows import Row
from tlview.render.html.timeline import Timeline, compile_timeline
from tlview.runtime import halves


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


def section(r: Row, c: Compile, page: Page) -> CompileView:
    """Everything one compile's section shows."""
    v = CompileView(c=c, row=r)
    marks = describer_marks(c.inputs)
    names = input_names(c.inputs)
    dynamic = dynamic_dims(c)
    v.inputs = [input_view(i, marks.get(id(i), ""), names, dynamic) for i in c.inputs]
    v.breaks = [(g, page.break_anchor.get(break_key(g.reason), "")) for g in c.graph_breaks]
    kinds = section_payloads(c)
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


def compile_views(page: Page, start: int = 0, stop: int | None = None) -> Iterator[CompileView]:
    """The section of each compile the page shows, in log order, one compile read at a time:
    of all of them, or of the report's compiles [start, stop)."""
    want = {r.n: r for r in page.compiles if r.n >= start and (stop is None or r.n < stop)}
    if not want:
        return
    first = min(want)
    for n, c in enumerate(halves.compiles(page.report, first, max(want) + 1), first):
        r = want.get(n)
        if r is not None:
            yield section(r, c, page)
