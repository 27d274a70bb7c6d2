"""The page's views of where compile time went, CUDA graph skips, guard origins, missing
artifacts and the records without a compile id: the run's tables, and each compile's callout
(analyze/facts.py works every fact out; these only format it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tlview.analyze.compiles import Analysis
from tlview.analyze.facts import metrics_line, phases_line, share
from tlview.analyze.origins import Origin
from tlview.analyze.owners import Owners
from tlview.analyze.phases import RunPhases, SpanNode, SpanTime, top
from tlview.analyze.runfacts import RunFacts
from tlview.analyze.summary import Overview
from tlview.units import seconds

TOP_PHASES = 15  # rows of the run's phase table
COMPILE_PHASES = 8  # rows of a compile's
TREE_KIDS = 30  # spans shown under one in a nesting (then "... N more")
TREE_DEPTH = 8
MAX_ORIGINS = 50  # origins in a compile's callout
MAX_GROUPS = 20  # writers of records without an id per log
MAX_OWNER_LOGS = 16  # logs whose records without an id the page lists
KIND_WORDS = {
    "guard": "failed guard",
    "scalar": "specialised scalar",
    "symbol": "dynamic size",
    "specialization": "specialised",
    "unbacked": "data-dependent",
    "autograd": "compiled autograd",
}


class SpanRow(NamedTuple):
    own: str
    share: str
    inclusive: str
    times: int  # how many spans of the name
    name: str


class NodeView(NamedTuple):
    """A span of a nesting, with the spans inside it."""

    name: str
    inclusive: str
    own: str
    times: int
    children: list[NodeView]
    more: int  # spans under it not shown


def span_rows(spans: list[SpanTime], whole: float, most: int) -> list[SpanRow]:
    return [
        SpanRow(seconds(s.exclusive_s), share(s.exclusive_s, whole), seconds(s.inclusive_s),
                s.count, s.name)
        for s in top(spans, most)
    ]  # fmt: skip


def tree(nodes: list[SpanNode], depth: int = TREE_DEPTH) -> list[NodeView]:
    """A nesting of spans, at most TREE_KIDS under one and TREE_DEPTH deep."""
    out = []
    for n in nodes[:TREE_KIDS]:
        kids = tree(n.children, depth - 1) if depth > 1 else []
        more = len(n.children) - len(kids)
        out.append(
            NodeView(n.name, seconds(n.inclusive_s), seconds(n.exclusive_s), n.count, kids, more)
        )
    return out


class OwnerGroup(NamedTuple):
    records: int
    writer: str
    names: str
    user: str


@dataclass(slots=True)
class OwnersView:
    """A log's records without a compile id: the compile each belongs to, or what wrote them."""

    ref: str
    attached: list[tuple[str, str]]  # (compile, its records' names with counts)
    groups: list[OwnerGroup]
    more_groups: int
    unknown: str  # names tlview does not read, with counts


@dataclass(slots=True)
class RunView:
    """The page's section on where the run's compile time went, and its CUDA graph skips."""

    rows: list[SpanRow]
    spans: int  # span names in all
    total: str
    outside: str  # of it, without a compile id ("" when none)
    metrics: str | None
    tree: list[NodeView]
    more: int  # root spans not shown
    open: int
    skips: list[tuple[str, int]] = field(default_factory=list)  # CUDA graph skips, by reason
    graphs: str = ""  # CUDA graphs used / skipped / asked, in words ("" when none)
    owners: list[OwnersView] = field(default_factory=list)
    more_owners: int = 0


def _names(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} ×{k}" for n, k in counts.items())


def owners_view(ref: str, o: Owners) -> OwnersView:
    by: dict[str, dict[str, int]] = {}
    for x in o.attached:
        got = by.setdefault(x.compile, {})
        got[x.name] = got.get(x.name, 0) + x.count
    groups = [
        OwnerGroup(g.count, g.writer, _names(g.names), g.user or "") for g in o.groups[:MAX_GROUPS]
    ]
    return OwnersView(
        ref,
        [(k, _names(v)) for k, v in by.items()],
        groups,
        len(o.groups) - len(groups),
        _names(o.unknown),
    )


def _graphs(f: RunFacts) -> str:
    words = [
        f"{n} {state}" for state in ("used", "skipped", "asked") if (n := f.cudagraphs.get(state))
    ]
    return ", ".join(words)


def run_view(o: Overview) -> RunView | None:
    """The run's phases, CUDA graphs and owners, or None when the log has none of them."""
    f = o.facts
    shown = [(ref, ow) for _, ref, ow in f.owners if ow.unexplained]
    if f.time is None and not f.cudagraphs and not shown:
        return None
    view = _time_view(f.time)
    view.skips = list(f.skips.items())
    view.graphs = _graphs(f)
    view.owners = [owners_view(ref, ow) for ref, ow in shown[:MAX_OWNER_LOGS]]
    view.more_owners = max(0, len(shown) - MAX_OWNER_LOGS)
    return view


def _time_view(run: RunPhases | None) -> RunView:
    if run is None:
        return RunView([], 0, "", "", None, [], 0, 0)
    return RunView(
        rows=span_rows(run.spans, run.spans_s, TOP_PHASES),
        spans=len(run.spans),
        total=seconds(run.spans_s),
        outside=seconds(run.outside_s) if run.outside_s else "",
        metrics=metrics_line(run.metrics, run.caches),
        tree=tree(run.tree),
        more=max(0, len(run.tree) - TREE_KIDS),
        open=run.open,
    )


class OriginView(NamedTuple):
    kind: str  # in words
    said: str
    file: str  # of the user line ("" when none)


@dataclass(slots=True)
class FactsView:
    """A compile's callout: where its time went, its run-time work and CUDA graphs, where its
    guards and symbols came from, what it lacks and its failure artifacts."""

    phases: str | None
    rows: list[SpanRow]
    tree: list[NodeView]
    open: list[str]
    metrics: str | None
    runtime: list[str]
    cudagraphs: str | None
    skipped: bool
    origins: list[OriginView]
    more_origins: int
    missing: str | None
    troubles: list[tuple[str, int, str, bool]]  # (what, log line, text, fatal)

    @property
    def empty(self) -> bool:
        return not (self.phases or self.runtime or self.cudagraphs or self.origins) and not (
            self.missing or self.troubles or self.open
        )


def _origin(o: Origin) -> OriginView:
    return OriginView(KIND_WORDS.get(o.kind, o.kind), o.said, o.where.file if o.where else "")


def facts_view(a: Analysis, detail: bool) -> FactsView:
    """A compile's facts as its section shows them; without `detail`, no tables of spans."""
    cp = a.phases
    g = a.cudagraphs
    own = a.counted or a.compile.id is None  # an attempt that restarted: in its compile's
    detail = detail and own
    return FactsView(
        phases=phases_line(cp) if own else None,
        rows=span_rows(cp.spans, cp.spans_s, COMPILE_PHASES) if detail else [],
        tree=tree(cp.tree) if detail else [],
        open=cp.open,
        metrics=metrics_line(cp.metrics, cp.caches) if detail else None,
        runtime=[w.words for w in a.runtime],
        cudagraphs=g.words if g.state != "not asked" else None,
        skipped=g.state == "skipped",
        origins=[_origin(o) for o in a.origins[:MAX_ORIGINS]],
        more_origins=max(0, len(a.origins) - MAX_ORIGINS),
        missing=a.missing_line,
        troubles=[(t.what, t.line, t.text, t.fatal) for t in a.troubles],
    )
