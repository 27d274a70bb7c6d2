"""The page-wide figures and tables: head figures, graph breaks, where compile time went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tlview.analyze.breaks import break_title
from tlview.analyze.compiles import PHASE_NAMES
from tlview.analyze.summary import Overview
from tlview.model import Status
from tlview.render.html.fmt import clock
from tlview.render.html.rows import Row
from tlview.units import seconds, short_path


@dataclass(slots=True)
class HeadFigure:
    label: str
    value: str
    status: str | None = None  # the table filter a click sets: a status, or * for all rows
    tone: str = ""


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
        HeadFigure("restarts", f"{o.restarts:,}"),
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


@dataclass(slots=True)
class BreakView:
    anchor: str
    title: str
    reason: str
    count: int
    where: list[tuple[str, str, int]]  # (short place, full place, count)
    compiles: list[tuple[str, str]]  # (label, anchor; "" when the compile is not on the page)


def break_views(o: Overview, by_ref: dict[str, Row]) -> list[BreakView]:
    out = []
    for n, s in enumerate(o.breaks, 1):
        out.append(
            BreakView(
                anchor=f"gb-{n}",
                title=break_title(s.reason),
                reason=s.reason,
                count=s.count,
                where=[(short_path(w), w, k) for w, k in s.where.items()],
                compiles=[
                    (by_ref[ref].label, by_ref[ref].anchor) if ref in by_ref else (ref, "")
                    for ref in s.compiles
                ],
            )
        )
    return out


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


class Totals(NamedTuple):
    """The report's figures the page's words quote, beside its head figures."""

    compiles: int
    graph_breaks: int
    export_issues: int
    compile_time: str  # in all, or that it was not logged
    when: str  # from the first record's time to the last's
    read: str  # the lines and records read
    by_status: list[tuple[str, int]] | None  # compiles of each status in the table (None: none)
    kinds: list[tuple[str, int, bool]]  # each record kind, its records, unknown to tlview
    unknown: int  # record kinds unknown to tlview


def totals(o: Overview, statuses: list[str]) -> Totals:
    """The figures the page quotes; `statuses`: those of its table's rows, in the table's order."""
    return Totals(
        o.compiles,
        o.graph_breaks,
        o.export_issues,
        f"{o.compile_time_s:.2f} s" if o.timed else "not logged",
        f"{clock(o.first_time)} to {clock(o.last_time)}",
        f"{o.lines:,} lines, {o.records:,} records",
        [(s, o.by_status[s]) for s in statuses if o.by_status.get(s)] if o.by_status else None,
        [(k, n, k in o.unknown_kinds) for k, n in o.kinds.items()],
        len(o.unknown_kinds),
    )
