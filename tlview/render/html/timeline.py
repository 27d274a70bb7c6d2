"""The timelines: one compile's phases, and each log's compiles, all logs to one scale."""

from __future__ import annotations

from dataclasses import dataclass, field

from tlview.model import Phase
from tlview.render.html.fmt import ms, pct
from tlview.render.html.rows import Row

MAX_LANE_ROWS = 8  # rows of the compile timeline per log; further overlaps share the last row
MIN_BAR_PCT = 0.3  # a compile's bar is at least this wide (% of the lane), to see and to click


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


Spans = list[tuple[float, float, Row]]  # (first phase's start, last phase's end, its row)


def page_timeline(rows: list[Row]) -> list[Timeline]:
    """One lane per log: each compile as a bar from its first phase to its last."""
    by_log: dict[tuple[str, int | None], Spans] = {}
    for r in rows:
        if r.span is not None:
            by_log.setdefault((r.log, r.pid), []).append((*r.span, r))
    if not by_log:
        return []
    longest = max(
        max(e for _, e, _ in spans) - min(s for s, _, _ in spans) for spans in by_log.values()
    )
    longest = max(longest, 1.0)
    return [_lane(spans, longest) for spans in by_log.values()]


def _lane(spans: Spans, longest: float) -> Timeline:
    """One log's compiles as bars, packed into rows by the bar as drawn: a short compile's bar
    is wider than its time, and the next bar in its row would cover it (and take its clicks)."""
    t0 = min(s for s, _, _ in spans)
    ends: list[float] = []
    bars = []
    for start, end, r in sorted(spans, key=lambda x: x[0]):
        drawn = max(end, start + MIN_BAR_PCT * longest / 100)
        row = next((k for k, e in enumerate(ends) if e <= start), None)
        if row is None:
            if len(ends) < MAX_LANE_ROWS:
                ends.append(drawn)
            row = len(ends) - 1
        ends[row] = max(ends[row], drawn)
        bars.append(_bar(r, start, end, t0, longest, row))
    label = spans[0][2].log_label
    return Timeline(bars, max(1, len(ends)), ms(longest), ticks(longest), label)


def _bar(r: Row, start: float, end: float, t0: float, longest: float, row: int) -> TimeBar:
    return TimeBar(
        name=r.key,
        x=pct(100 * (start - t0) / longest),
        w=pct(max(MIN_BAR_PCT, 100 * (end - start) / longest)),
        row=row,
        tip=f"{r.label} {r.function or ''} [{r.status}]: {ms(end - start)} at +{ms(start - t0)}",
        ts=start,
        dur=end - start,
        status=r.status,
        href=r.anchor,
    )
