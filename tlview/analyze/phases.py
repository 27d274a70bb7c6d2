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
from typing import Any, NamedTuple

from tlview.model import Compile, Phase

SLACK_US = 1.0  # a child may end this much after its parent (timestamps are rounded)
MAX_DEPTH = 32  # levels of nesting kept: a span deeper is added up under the 32nd (torch nests ~10)
INF = float("inf")

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


class MetricTime(NamedTuple):
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
    ns: list[int] = field(default_factory=lambda: [0, 0])  # a run's: inclusive, exclusive

    def child(self, name: str) -> _Agg:
        got = self.kids.get(name)
        if got is None:
            got = self.kids[name] = _Agg(SpanNode(name))
            self.node.children.append(got.node)
        return got


SCAN = 2 * MAX_DEPTH  # open spans looked through for one that holds a new span


def _ended(phases: Iterable[Phase]) -> list[Phase]:
    """The spans that ended, outermost first where two begin together."""
    # A span must begin before it ends: a damaged log's negative, infinite or NaN times are
    # dropped (NaN fails both comparisons).
    done = [
        p
        for p in phases
        if p.dur_us is not None and 0 <= p.dur_us < INF and -INF < p.start_us < INF
    ]
    done.sort(key=lambda p: (p.start_us, -(p.dur_us or 0.0)))
    return done


def span_tree(phases: Iterable[Phase]) -> tuple[list[SpanNode], dict[str, list[float]]]:
    """Spans nested by time, added up by path; and per name [count, inclusive us, exclusive us].

    A span's own (exclusive) time is the time it was the innermost span open (the one begun
    last), so every instant counts once, also where spans of two threads overlap: own times
    add up to the time the spans cover. A name's inclusive time is the time some span of it
    was open (one inside another of its name, or overlapping it, counted once)."""
    done = _ended(phases)
    root = SpanNode("")
    ends = [p.start_us + (p.dur_us or 0.0) for p in done]
    nodes = _nest(done, ends, root)
    names: dict[str, list[float]] = {}
    for p, node in zip(done, nodes, strict=True):
        node.count += 1
        node.inclusive_s += (p.dur_us or 0.0) / 1e6
        got = names.get(p.name)
        if got is None:
            got = names[p.name] = [0.0, 0.0, 0.0]
        got[0] += 1
    _sweep(done, ends, nodes, names)
    return root.children, names


# An open span on the nesting stack: where it ends, its node, how deep it is, and where spans
# inside it go past MAX_DEPTH (its parent's node; None: its own). A tuple, not a class: one is
# made for every span of every compile.
_Open = tuple[float, SpanNode, int, "SpanNode | None"]


def _nest(done: list[Phase], ends: list[float], root: SpanNode) -> list[SpanNode]:
    """Each span's place in the nesting: under the innermost open span that holds it by time."""
    stack: list[_Open] = []
    out: list[SpanNode] = []
    kids: dict[tuple[int, str], SpanNode] = {}  # (id of a node, a name): its child of that name
    for p, end in zip(done, ends, strict=True):
        start = p.start_us
        while stack and stack[-1][0] <= start:
            stack.pop()
        parent = _holder(stack, end)
        if parent is None:
            holder, depth, deep = root, 1, False
        else:
            _, node, depth, under = parent
            holder = under or node
            depth += 1
            deep = depth >= MAX_DEPTH
        key = (id(holder), p.name)
        got = kids.get(key)
        if got is None:
            got = kids[key] = SpanNode(p.name)
            holder.children.append(got)
        stack.append((end, got, depth, holder if deep else None))
        out.append(got)
    return out


def _holder(stack: list[_Open], end: float) -> _Open | None:
    """The innermost of the last SCAN open spans that ends after `end` (clock slack allowed)."""
    for k in range(len(stack) - 1, max(len(stack) - SCAN, 0) - 1, -1):
        if end <= stack[k][0] + SLACK_US:
            return stack[k]
    return None


def _sweep(
    done: list[Phase], ends: list[float], nodes: list[SpanNode], names: dict[str, list[float]]
) -> None:
    """Own time to the innermost open span at each instant; inclusive time per name."""
    # At one instant: ends first, then starts, then the ends of spans of no length (which
    # must follow their own start).
    events = [(p.start_us, 1, i) for i, p in enumerate(done)]
    events += [
        (t, 0 if p.dur_us else 2, i) for i, (p, t) in enumerate(zip(done, ends, strict=True))
    ]
    events.sort()
    span_names = [p.name for p in done]
    open_: list[int] = []  # spans begun, innermost last; those that ended dropped as met
    closed = [False] * len(done)
    own = [0.0] * len(done)  # us: added up per span first, so a node's figure is exact
    # Per name: how many of its spans are open, since when; the time any was goes to names.
    union: dict[str, tuple[int, float]] = {}
    last = events[0][0] if events else 0.0
    for t, starts, i in events:
        while open_ and closed[open_[-1]]:
            open_.pop()
        if open_:
            own[open_[-1]] += t - last
        last = t
        name = span_names[i]
        if starts == 1:
            open_.append(i)
            n, since = union.get(name, (0, t))
            union[name] = (n + 1, t if n == 0 else since)
            continue
        closed[i] = True
        n, since = union.get(name, (1, t))
        union[name] = (n - 1, since)
        if n == 1:
            names[name][1] += t - since
    for i, name in enumerate(span_names):
        nodes[i].exclusive_s += own[i] / 1e6
        names[name][2] += own[i]


_NUMBER = (int, float)  # a metric's time (`_us`), bool aside


def _us(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def metric_times(metrics: Sequence[dict[str, Any]]) -> list[MetricTime]:
    """The times beside the four phases, added up over the given metrics records."""
    out = []
    for name, key in METRIC_TIMES:
        got = []
        for m in metrics:  # a loop, not a comprehension each: this runs for every compile
            v = m.get(key)
            if isinstance(v, _NUMBER) and not isinstance(v, bool):
                got.append(float(v))
        if got:
            out.append(MetricTime(name, key, sum(got) / 1e6))
    return out


def cache_counts(metrics: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The cache lookups the metrics records count, those not 0."""
    out: dict[str, int] = {}
    for name, key in METRIC_CACHES:
        n = 0
        for m in metrics:
            v = m.get(key)
            if type(v) is int:
                n += v
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
        spans_s=sum(t[2] for t in names.values()) / 1e6,
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


def _ns(seconds: float) -> int:
    """A time in whole nanoseconds: the run's sums are of integers, so the same however a pass
    over the compiles was split (floats added in another order round otherwise)."""
    return round(seconds * 1e9)


class PhaseTally:
    """Adds up CompilePhases one compile at a time (and tallies of later compiles), linear."""

    def __init__(self) -> None:
        self.root = _Agg(SpanNode(""))
        self.names: dict[str, list[int]] = {}  # count, inclusive ns, exclusive ns
        self.metrics: dict[tuple[str, str], int] = {}  # ns
        self.caches: dict[str, int] = {}
        self.spans_ns = self.outside_ns = 0
        self.compiles = self.open = 0

    def add(self, cp: CompilePhases) -> None:
        for node in cp.tree:
            _fold(self.root, node)
        names = self.names
        for s in cp.spans:
            mine = names.get(s.name)
            if mine is None:
                mine = names[s.name] = [0, 0, 0]
            mine[0] += s.count
            mine[1] += _ns(s.inclusive_s)
            mine[2] += _ns(s.exclusive_s)
        for m in cp.metrics:
            key = (m.name, m.field)
            self.metrics[key] = self.metrics.get(key, 0) + _ns(m.seconds)
        for cache, n in cp.caches.items():
            self.caches[cache] = self.caches.get(cache, 0) + n
        self.spans_ns += _ns(cp.spans_s)
        self.outside_ns += _ns(cp.spans_s) if cp.outside else 0
        self.compiles += bool(cp.tree or cp.metrics)
        self.open += len(cp.open)

    def merge(self, later: PhaseTally) -> None:
        """Take in a tally of the compiles after these, as if this one had counted them."""
        for agg in later.root.kids.values():
            _merge(self.root, agg)
        for name, t in later.names.items():
            _add(self.names, name, t)
        for key, v in later.metrics.items():
            self.metrics[key] = self.metrics.get(key, 0) + v
        for cache, n in later.caches.items():
            self.caches[cache] = self.caches.get(cache, 0) + n
        self.spans_ns += later.spans_ns
        self.outside_ns += later.outside_ns
        self.compiles += later.compiles
        self.open += later.open

    def done(self) -> RunPhases:
        spans = [SpanTime(n, t[0], t[1] / 1e9, t[2] / 1e9) for n, t in self.names.items()]
        spans.sort(key=lambda s: (-s.exclusive_s, s.name))
        order = {name: i for i, (name, _) in enumerate(METRIC_TIMES)}
        metrics = [MetricTime(n, f, v / 1e9) for (n, f), v in self.metrics.items()]
        metrics.sort(key=lambda m: order.get(m.name, len(order)))
        _settle(self.root)
        return RunPhases(
            self.root.node.children,
            spans,
            metrics,
            dict(self.caches),
            self.spans_ns / 1e9,
            self.outside_ns / 1e9,
            self.compiles,
            self.open,
        )


def _add(into: dict[str, list[int]], name: str, t: list[int]) -> None:
    mine = into.setdefault(name, [0, 0, 0])
    for i in range(3):
        mine[i] += t[i]


def _fold(into: _Agg, node: SpanNode) -> None:
    """Add a compile's span node (and its children) into the run's tree at the same path."""
    agg = into.kids.get(node.name) or into.child(node.name)
    agg.node.count += node.count
    ns = agg.ns
    ns[0] += round(node.inclusive_s * 1e9)  # _ns, inline: this runs for every span node
    ns[1] += round(node.exclusive_s * 1e9)
    for kid in node.children:
        _fold(agg, kid)


def _merge(into: _Agg, other: _Agg) -> None:
    """Add another tally's node (and its children) into this tree at the same path."""
    agg = into.child(other.node.name)
    agg.node.count += other.node.count
    agg.ns[0] += other.ns[0]
    agg.ns[1] += other.ns[1]
    for kid in other.kids.values():
        _merge(agg, kid)


def _settle(agg: _Agg) -> None:
    """The run's tree's times, from the integer sums."""
    agg.node.inclusive_s = agg.ns[0] / 1e9
    agg.node.exclusive_s = agg.ns[1] / 1e9
    for kid in agg.kids.values():
        _settle(kid)


def run_phases(compiles: Iterable[Compile]) -> RunPhases:
    """Where the run's compile time went, over the given compiles (`-/-` ones included)."""
    tally = PhaseTally()
    for c in compiles:
        tally.add(compile_phases(c))
    return tally.done()
