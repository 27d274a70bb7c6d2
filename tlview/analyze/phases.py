"""Where compile time went: each compile's chromium spans as torch nested them (time inclusive
and exclusive of the spans inside), and the times its metrics give beside the four phases
(passes, triton, autotuning, gc, guards, logging), per compile and over the run.

torch logs a span for every `dynamo_timed` region (torch/_dynamo/utils.py), so the spans are the
finest account of compile time a log holds. A span is inside another when its time lies within
the other's (1 us of clock slack); spans that overlap without nesting (threads) are siblings.
The work logged without a compile id (`-/-`: AOTInductor's build, precompile's inductor) is a
compile of its own here, and counted in the run's totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tlview.model import Compile, Phase

SLACK_US = 1.0  # a child may end this much after its parent (timestamps are rounded)

# Times compilation_metrics gives beside the four phases (model.PHASES), in microseconds: the
# name tlview gives each, and the field. Read from torch 2.13's CompilationMetrics.
METRIC_TIMES = (
    ("pre_grad_passes", "pre_grad_pass_time_us"),
    ("joint_graph_passes", "joint_graph_pass_time_us"),
    ("post_grad_passes", "post_grad_pass_time_us"),
    ("triton_compile", "triton_compile_time_us"),
    ("autotune", "compile_time_autotune_time_us"),
    ("backward_compile", "backward_cumulative_compile_time_us"),
    ("gc", "gc_time_us"),
    ("structured_logging", "structured_logging_overhead_us"),
    ("dynamo_before_restart", "dynamo_compile_time_before_restart_us"),
    ("remote_fx_cache_get", "remote_fx_graph_cache_get_time_us"),
    ("remote_fx_cache_put", "remote_fx_graph_cache_put_time_us"),
    ("pgo_get_remote_code_state", "pgo_get_remote_code_state_time_us"),
    ("pgo_put_remote_code_state", "pgo_put_remote_code_state_time_us"),
    ("guard_check", "guard_latency_us"),  # one evaluation of the guards, not compile time
)
# Cache lookups compilation_metrics counts: tlview's name, and the field.
METRIC_CACHES = (
    ("fx_local_hit", "inductor_fx_local_cache_hit_count"),
    ("fx_local_miss", "inductor_fx_local_cache_miss_count"),
    ("fx_remote_hit", "inductor_fx_remote_cache_hit_count"),
    ("fx_remote_miss", "inductor_fx_remote_cache_miss_count"),
    ("aotautograd_local_hit", "aotautograd_local_cache_hit_count"),
    ("aotautograd_local_miss", "aotautograd_local_cache_miss_count"),
    ("aotautograd_remote_hit", "aotautograd_remote_cache_hit_count"),
    ("aotautograd_remote_miss", "aotautograd_remote_cache_miss_count"),
)
# A span's time as a metrics column, for compiles (or stored reports) without spans: torch's
# `dynamo_timed(..., phase_name=SPAN, dynamo_compile_column_us=FIELD)` pairs.
SPAN_METRICS = {
    "entire_frame_compile": "dynamo_cumulative_compile_time_us",
    "backend_compile": "aot_autograd_cumulative_compile_time_us",
    "inductor_compile": "inductor_cumulative_compile_time_us",
    "code_gen": "inductor_code_gen_cumulative_compile_time_us",
    "entire_backward_compile": "backward_cumulative_compile_time_us",
    "_recursive_pre_grad_passes": "pre_grad_pass_time_us",
    "_recursive_joint_graph_passes": "joint_graph_pass_time_us",
    "_recursive_post_grad_passes": "post_grad_pass_time_us",
    "gc": "gc_time_us",
}


@dataclass(frozen=True, slots=True)
class SpanTime:
    """All spans of one name in a compile (or a run): how many, and their time. Inclusive time
    counts a span inside another of its own name once (the outer one)."""

    name: str
    count: int
    inclusive_s: float
    exclusive_s: float


@dataclass(slots=True)
class SpanNode:
    """The spans of one name at one place of the nesting (the same path of names from a root),
    added up: torch's nesting, with counts and times."""

    name: str
    count: int = 0
    inclusive_s: float = 0.0
    exclusive_s: float = 0.0
    children: list[SpanNode] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MetricTime:
    """A time compilation_metrics gives beside the four phases (tlview's name, torch's field)."""

    name: str
    field: str
    seconds: float


@dataclass(slots=True)
class CompilePhases:
    """Where one compile's time went."""

    key: str
    tree: list[SpanNode]  # the outermost spans, in the order they began
    spans: list[SpanTime]  # by name, most exclusive time first
    spans_s: float  # the time the outermost spans cover (their inclusive times added)
    open: list[str]  # spans that began and never ended (the run stopped inside them)
    metrics: list[MetricTime]  # its metrics' (and its backward's) times beside the phases
    caches: dict[str, int]  # cache lookups its metrics count (METRIC_CACHES), those not 0
    outside: bool = False  # `-/-`: work logged without a compile id


@dataclass(slots=True)
class _Agg:
    """A SpanNode while it is added up, its children by name."""

    node: SpanNode
    kids: dict[str, _Agg] = field(default_factory=dict)

    def child(self, name: str) -> _Agg:
        got = self.kids.get(name)
        if got is None:
            got = self.kids[name] = _Agg(SpanNode(name))
            self.node.children.append(got.node)
        return got


@dataclass(slots=True)
class _Open:
    """A span on the nesting stack: where it ends, its aggregate, and its children's time."""

    end: float
    agg: _Agg
    name: str
    dur: float
    inner_us: float = 0.0


def _ended(phases: Iterable[Phase]) -> list[Phase]:
    """The spans that ended, outermost first where two begin together."""
    done = [p for p in phases if p.dur_us is not None]
    done.sort(key=lambda p: (p.start_us, -(p.dur_us or 0.0)))
    return done


def span_tree(phases: Iterable[Phase]) -> tuple[list[SpanNode], dict[str, list[float]]]:
    """Spans nested by time, added up by path; and per name [count, inclusive us, exclusive us]."""
    root = _Agg(SpanNode(""))
    names: dict[str, list[float]] = {}
    stack: list[_Open] = []
    active: dict[str, int] = {}
    for p in _ended(phases):
        dur = p.dur_us or 0.0
        _close(stack, p.start_us, names, active)
        end = p.start_us + dur
        parent = next((o for o in reversed(stack) if end <= o.end + SLACK_US), None)
        agg = (parent.agg if parent else root).child(p.name)
        if parent is not None:
            parent.inner_us += dur
        totals = names.setdefault(p.name, [0.0, 0.0, 0.0])
        totals[0] += 1
        if not active.get(p.name):
            totals[1] += dur
        active[p.name] = active.get(p.name, 0) + 1
        stack.append(_Open(p.start_us + dur, agg, p.name, dur))
    _close(stack, float("inf"), names, active)
    return root.node.children, names


def _close(
    stack: list[_Open], until: float, names: dict[str, list[float]], active: dict[str, int]
) -> None:
    """End the spans on the stack that end by `until`, adding up their times."""
    while stack and stack[-1].end <= until:
        done = stack.pop()
        own = max(0.0, done.dur - done.inner_us)
        node = done.agg.node
        node.count += 1
        node.inclusive_s += done.dur / 1e6
        node.exclusive_s += own / 1e6
        names[done.name][2] += own
        active[done.name] -= 1


def _us(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def metric_times(metrics: Sequence[dict[str, Any]]) -> list[MetricTime]:
    """The times beside the four phases, added up over the given metrics records."""
    out = []
    for name, key in METRIC_TIMES:
        got = [v for m in metrics if (v := _us(m.get(key))) is not None]
        if got:
            out.append(MetricTime(name, key, sum(got) / 1e6))
    return out


def cache_counts(metrics: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The cache lookups the metrics records count, those not 0."""
    out: dict[str, int] = {}
    for name, key in METRIC_CACHES:
        n = sum(v for m in metrics if type(v := m.get(key)) is int)
        if n:
            out[name] = n
    return out


def _records(c: Compile) -> list[dict[str, Any]]:
    return [m for m in (c.metrics, *c.bwd_metrics) if m is not None]


def compile_phases(c: Compile, extra: Sequence[Phase] = ()) -> CompilePhases:
    """Where one compile's time went; `extra`: spans logged without its id that it owns
    (analyze.owners.span_owners)."""
    phases = [*c.phases, *extra]
    tree, names = span_tree(phases)
    spans = [SpanTime(n, int(t[0]), t[1] / 1e6, t[2] / 1e6) for n, t in names.items()]
    spans.sort(key=lambda s: (-s.exclusive_s, s.name))
    records = _records(c)
    return CompilePhases(
        key=c.key,
        tree=tree,
        spans=spans,
        spans_s=sum(n.inclusive_s for n in tree),
        open=[p.name for p in phases if p.dur_us is None],
        metrics=metric_times(records),
        caches=cache_counts(records),
        outside=c.id is None,
    )


def top(spans: Sequence[SpanTime], n: int = 8) -> list[SpanTime]:
    """The spans that took the most time of their own: a short table's rows."""
    return sorted(spans, key=lambda s: (-s.exclusive_s, s.name))[:n]


def compile_span_seconds(c: Compile) -> dict[str, float]:
    """Each phase's inclusive time in a compile, by name: its spans', else (a compile without
    spans: older torch, a stored report) its metrics' column for the span (SPAN_METRICS); and
    tlview's metric times (METRIC_TIMES) under their own names where no span has the name."""
    out: dict[str, float] = {}
    if c.phases:
        out = {n: t[1] / 1e6 for n, t in span_tree(c.phases)[1].items()}
    else:
        records = _records(c)
        for name, key in SPAN_METRICS.items():
            vs = [v for m in records if (v := _us(m.get(key))) is not None]
            if vs:
                out[name] = sum(vs) / 1e6
    for m in metric_times(_records(c)):
        out.setdefault(m.name, m.seconds)
    return out


def span_seconds(c: Compile, name: str) -> float | None:
    """One phase's inclusive time in a compile (compile_span_seconds); None: not logged."""
    return compile_span_seconds(c).get(name)


def span_totals(
    compiles: Iterable[Compile], names: Iterable[str] | None = None
) -> dict[str, float]:
    """Each phase's time over the run (`phase:NAME` of --fail-on and diff), `-/-` included:
    one pass; only `names` when given (each 0.0 when no compile logs it)."""
    wanted = set(names) if names is not None else None
    out: dict[str, float] = dict.fromkeys(wanted, 0.0) if wanted is not None else {}
    for c in compiles:
        for name, v in compile_span_seconds(c).items():
            if wanted is None or name in wanted:
                out[name] = out.get(name, 0.0) + v
    return out


@dataclass(slots=True)
class RunPhases:
    """Where the run's compile time went: every compile's spans and metric times added up."""

    tree: list[SpanNode]
    spans: list[SpanTime]
    metrics: list[MetricTime]
    caches: dict[str, int]
    spans_s: float  # the outermost spans of every compile, added up
    outside_s: float  # of those, the spans logged without a compile id
    compiles: int  # compiles with spans or metric times
    open: int  # spans that never ended


class PhaseTally:
    """Adds up CompilePhases one compile at a time (and tallies of later compiles), linear."""

    def __init__(self) -> None:
        self.root = _Agg(SpanNode(""))
        self.names: dict[str, list[float]] = {}
        self.metrics: dict[tuple[str, str], float] = {}
        self.caches: dict[str, int] = {}
        self.spans_s = self.outside_s = 0.0
        self.compiles = self.open = 0

    def add(self, cp: CompilePhases) -> None:
        for node in cp.tree:
            _fold(self.root, node)
        for s in cp.spans:
            t = self.names.setdefault(s.name, [0.0, 0.0, 0.0])
            t[0] += s.count
            t[1] += s.inclusive_s
            t[2] += s.exclusive_s
        for m in cp.metrics:
            key = (m.name, m.field)
            self.metrics[key] = self.metrics.get(key, 0.0) + m.seconds
        for cache, n in cp.caches.items():
            self.caches[cache] = self.caches.get(cache, 0) + n
        self.spans_s += cp.spans_s
        self.outside_s += cp.spans_s if cp.outside else 0.0
        self.compiles += bool(cp.tree or cp.metrics)
        self.open += len(cp.open)

    def merge(self, later: PhaseTally) -> None:
        """Take in a tally of the compiles after these, as if this one had counted them."""
        for node in later.root.node.children:
            _fold(self.root, node)
        for name, t in later.names.items():
            mine = self.names.setdefault(name, [0.0, 0.0, 0.0])
            for i in range(3):
                mine[i] += t[i]
        for key, v in later.metrics.items():
            self.metrics[key] = self.metrics.get(key, 0.0) + v
        for cache, n in later.caches.items():
            self.caches[cache] = self.caches.get(cache, 0) + n
        self.spans_s += later.spans_s
        self.outside_s += later.outside_s
        self.compiles += later.compiles
        self.open += later.open

    def done(self) -> RunPhases:
        spans = [SpanTime(n, int(t[0]), t[1], t[2]) for n, t in self.names.items()]
        spans.sort(key=lambda s: (-s.exclusive_s, s.name))
        order = {name: i for i, (name, _) in enumerate(METRIC_TIMES)}
        metrics = [MetricTime(n, f, v) for (n, f), v in self.metrics.items()]
        metrics.sort(key=lambda m: order.get(m.name, len(order)))
        return RunPhases(
            self.root.node.children,
            spans,
            metrics,
            dict(self.caches),
            self.spans_s,
            self.outside_s,
            self.compiles,
            self.open,
        )


def _fold(into: _Agg, node: SpanNode) -> None:
    """Add a compile's span node (and its children) into the run's tree at the same path."""
    agg = into.child(node.name)
    agg.node.count += node.count
    agg.node.inclusive_s += node.inclusive_s
    agg.node.exclusive_s += node.exclusive_s
    for kid in node.children:
        _fold(agg, kid)


def run_phases(compiles: Iterable[Compile]) -> RunPhases:
    """Where the run's compile time went, over the given compiles (`-/-` ones included)."""
    tally = PhaseTally()
    for c in compiles:
        tally.add(compile_phases(c))
    return tally.done()
