"""Where compile time went, guard origins and missing artifacts (issue 48), per compile for
`Analysis`, and the words every format writes them in: each worked out once here, from the
functions of phases, origins and missing (`runfacts.py` adds them up over the run).

A compile's facts read its log's context (`analyze/context.py`); without one (an analysis made
outside a report) they read the compile alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tlview.analyze.context import LogContext, span_key
from tlview.analyze.missing import Missing, missing
from tlview.analyze.origins import Origin, OriginContext, origins, short_place
from tlview.analyze.phases import (
    CompilePhases,
    MetricTime,
    compile_phases,
    top,
)
from tlview.model import Compile, Phase
from tlview.units import seconds

GUARD_KINDS = ("guard", "scalar", "autograd")  # origins of failed guards, one per reason


def phases_of(c: Compile, ctx: LogContext | None, earlier: Sequence[Compile] = ()) -> CompilePhases:
    """Where a compile's time went: its spans, its restarted attempts' (`earlier`: torch's
    compile time counts them, and their spans hold its own) and the spans without an id they
    own; for `-/-`, without the spans a compile owns (they count once, in that compile)."""
    if ctx is not None and c.id is None and ctx.owned_keys:
        kept = [p for p in c.phases if span_key(p) not in ctx.owned_keys]
        return compile_phases(replace(c, phases=kept))
    extra: list[Phase] = []
    for x in (*earlier, c):
        if x is not c:
            extra += x.phases
        if ctx is not None:
            extra += ctx.owned.get(x.key, ())
    return compile_phases(c, extra)


def made_at(o: Origin) -> str:
    """Where a failed guard was made, for a recompile's row: `1/0 at train.py:12`, or a
    specialised scalar in one line."""
    if o.kind == "scalar":
        return o.said
    if o.kind != "guard":
        return ""
    w = o.where
    return o.compile + (f" at {short_place(f'{w.file}:{w.line}')}" if w is not None else "")


def guard_origins(a_origins: Sequence[Origin]) -> list[Origin]:
    """The origins of a recompile's failed guards (not of its symbols), in its reasons' order."""
    return [o for o in a_origins if o.kind in GUARD_KINDS]


def origins_of(c: Compile, ctx: LogContext | None) -> list[Origin]:
    """Where each failed guard, specialisation and symbol of a compile came from."""
    if ctx is not None:
        return origins(c, ctx.origins)
    alone = OriginContext()
    alone.add(c)
    return origins(c, alone)


def missing_of(c: Compile, ctx: LogContext | None) -> list[Missing]:
    """What a compile lacks, and why."""
    return missing(c, ctx.captures if ctx is not None else ())


def share(part: float, whole: float) -> str:
    """A part of a whole in percent, as every format writes it: `87%`, `<1%`."""
    if whole <= 0:
        return ""
    p = 100 * part / whole
    return "<1%" if 0 < p < 1 else f"{p:.0f}%"


def phases_line(cp: CompilePhases, most: int = 3) -> str | None:
    """Where a compile's time went, in one line: the time its spans cover, and the spans that
    took the most of their own: `171.6 s in spans; own time: compile_file 150.1 s (87%), ...`."""
    if not cp.spans:
        return None
    shown = ", ".join(
        f"{s.name} {seconds(s.exclusive_s)} ({share(s.exclusive_s, cp.spans_s)})"
        for s in top(cp.spans, most)
    )
    more = f", {len(cp.spans) - most} more" if len(cp.spans) > most else ""
    return f"{seconds(cp.spans_s)} in spans; own time: {shown}{more}"


def metrics_line(metrics: list[MetricTime], caches: dict[str, int]) -> str | None:
    """The times compilation_metrics gives beside the phases (those of a millisecond or more),
    and its cache lookups, in one line."""
    parts = [f"{m.name} {seconds(m.seconds)}" for m in metrics if m.seconds >= 0.0005]
    if caches:
        parts.append("cache lookups: " + ", ".join(f"{name} {n}" for name, n in caches.items()))
    return ", ".join(parts) or None
