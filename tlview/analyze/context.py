"""What a compile's facts need from the rest of its log, worked out once per log: the spans its
`-/-` compile holds (the `fullgraph_capture` an aot_compile traced in, spans that lie inside one
compile's), the owners of the records without a compile id, and what guard origins need
(graph breaks by place, the code states the process read).

Built from each compile's marks (`runtime.store.Marks`, kept in memory wherever the compile is),
so no compile is read back from disk but the log's `-/-` one; kept for as long as the log's
compile list lives, so every pass, and a forked copy's, finds it made.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from tlview.analyze.missing import capture_spans
from tlview.analyze.origins import OriginContext, short_place
from tlview.analyze.owners import OUTSIDE, Owners, log_marks, owners_of
from tlview.model import Compile, LogIndex, Phase, Report
from tlview.runtime.store import CompileList, Marks

SpanKey = tuple[str, float, float | None]  # a span by name, start and duration


def span_key(p: Phase) -> SpanKey:
    return (p.name, p.start_us, p.dur_us)


@dataclass(slots=True)
class LogContext:
    """What the compiles of one log (one process) need from each other."""

    captures: list[Phase] = field(default_factory=list)  # `-/-`'s fullgraph_capture spans
    owned: dict[str, list[Phase]] = field(default_factory=dict)  # key -> spans without an id
    owned_keys: set[SpanKey] = field(default_factory=set)  # those spans, left out of `-/-`
    owners: Owners | None = None  # of the records without an id (None: the log has none)
    origins: OriginContext = field(default_factory=OriginContext)


def context_of(log: LogIndex, outside: Compile | None, marked: Sequence[Marks]) -> LogContext:
    """A log's context from its `-/-` compile and every compile's marks."""
    ctx = LogContext()
    for m in marked:
        for where, reason in m.breaks:
            ctx.origins.breaks.setdefault(short_place(where), reason)
        if m.states:
            ctx.origins.code_states.setdefault(log.name, []).extend(m.states)
    if outside is None:
        return ctx
    ctx.captures = capture_spans(outside)
    ctx.owners = owners_of(outside, marked, log.unknown_kinds)
    for p, key in ctx.owners.spans:
        ctx.owned.setdefault(key, []).append(p)
        ctx.owned_keys.add(span_key(p))
    return ctx


# Each compile list's context, for as long as the list lives (a report read once, written in
# several passes and formats, works it out once).
_MADE: weakref.WeakKeyDictionary[CompileList, LogContext] = weakref.WeakKeyDictionary()


def log_context(log: LogIndex) -> LogContext:
    """A log's context, worked out on first use."""
    cl = log.compiles
    got = _MADE.get(cl) if isinstance(cl, CompileList) else None
    if got is not None:
        return got
    marked = log_marks(log)
    outside = cl[0] if marked and marked[0].key == OUTSIDE else None
    got = context_of(log, outside, marked)
    if isinstance(cl, CompileList):
        _MADE[cl] = got
    return got


def counted_before(report: Report, n: int) -> bool:
    """Whether any of the report's first n compiles is one torch counts (a later part of a
    split pass asks: did the part before it write one?), from their marks alone."""
    seen = 0
    for log in report.logs:
        for m in log_marks(log):
            if seen >= n:
                return False
            if m.counted:
                return True
            seen += 1
    return False
