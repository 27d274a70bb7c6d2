"""The terminal report: tables sized to the terminal, plain when piped, never markup from a log."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console

from tlview import __version__
from tlview.analyze.divergence import names_text
from tlview.analyze.names import Refs, is_named
from tlview.analyze.summary import (
    Overview,
    Tally,
    overview,
    problem_order,
)
from tlview.model import Compile, Report
from tlview.render import Options
from tlview.render.text.console import T, on_console
from tlview.render.text.detail import _outside_has, detail
from tlview.render.text.tables import (
    Capped,
    FrameRef,
    RecompileRow,
    breaks,
    compile_table,
    compile_time,
    divergence,
    export_issues,
    failure_row,
    failures,
    footnote,
    issue_row,
    rank_tables,
    recompile_row,
    recompiles,
    table_row,
)
from tlview.runtime.output import Output
from tlview.strings import numbering
from tlview.units import count


@dataclass(slots=True)
class TextOptions:
    compile_id: str | None = None  # show this compile in full
    verbosity: int = 0  # -1 brief, 0 default, 1+ everything
    max_detail: int = 20  # compiles whose inputs are shown by default
    max_rows: int = 50  # rows of the compile and recompile tables by default (-v: all of them)


def header(report: Report, o: Overview, console: Console) -> None:
    console.print(T(f"tlview {__version__}: {report.path}", "bold"))
    parts = [f"torch {report.torch_version or 'unknown'}"]
    ranks = report.ranks
    parts.append(f"{o.logs} log{'s' if o.logs != 1 else ''}")
    procs = [log.process for log in report.logs if log.process]
    if len(procs) > len(ranks):  # several logs claim one rank: each is a process of its own
        parts.append(
            "rank " + names_text(procs)
            if len(procs) < 9
            else f"{len(ranks)} ranks in {len(procs)} logs"
        )
    elif ranks:
        parts.append(
            "rank " + ", ".join(str(r) for r in ranks) if len(ranks) < 9 else f"{len(ranks)} ranks"
        )
    parts.append(f"{o.lines:,} lines, {o.records:,} records, {o.bad_lines:,} bad")
    if o.first_time and o.last_time:
        parts.append(f"{_time(o.first_time)} to {_time(o.last_time)}")
    for line in _fit(parts, console.width):
        console.print(T(line))
    fig = [
        count(o.compiles, "compile"),
        count(o.graph_breaks, "graph break"),
        count(o.recompiles, "recompile"),
        f"{o.failures} failed",
        count(o.restarts, "restart"),
    ]
    if o.incomplete:
        fig.append(f"{o.incomplete} never finished")
    if o.by_status.get("traced"):
        fig.append(f"{o.by_status['traced']} traced by export")
    fig.append(f"{o.compile_time_s:.2f} s compiling" if o.timed else "compile time not logged")
    if o.cache:
        fig.append("cache " + ", ".join(f"{v} {k}" for k, v in sorted(o.cache.items())))
    fig.append(count(o.inputs, "input"))
    if o.export_issues:
        fig.append(count(o.export_issues, "export issue"))
    if o.outside:
        fig.append(outside_text(o))
    for line in _fit(fig, console.width):
        console.print(T(line, "bold"))
    for note in report.notes:
        console.print(T(f"note: {note}", "yellow"))
    for log in report.logs:
        for note in log.notes:
            console.print(T(f"note: {log.name}: {note}", "yellow"))


def _fit(items: list[str], width: int) -> list[str]:
    """Items joined by " | ", in lines of at most `width` that break between items, not in one."""
    lines = [items[0]]
    for item in items[1:]:
        if len(lines[-1]) + 3 + len(item) > width:
            lines.append(item)
        else:
            lines[-1] += " | " + item
    return lines


def _time(t: str) -> str:
    # "MMDD HH:MM:SS.ffffff" -> "MM-DD HH:MM:SS"
    return f"{t[:2]}-{t[2:4]} {t[5:13]}" if len(t) >= 13 else t


def outside_text(o: Overview) -> str:
    """The headline of the compiles outside any compile id (AOTInductor, export)."""
    took = f"{o.outside_s:.2f} s" if o.outside_timed else "time not logged"
    failed = f", {o.outside_failed} failed" if o.outside_failed else ""
    return f"{o.outside} compiled outside dynamo ({took}{failed})"


def bad_lines(report: Report, console: Console, limit: int) -> None:
    total = sum(log.bad_count for log in report.logs)
    if not total:
        return
    console.print(T(f"Bad lines: {total}", "bold red"))
    shown = 0
    for log in report.logs:
        for b in log.bad_lines:
            if shown >= limit:
                break
            console.print(T(f"  {b}"))
            shown += 1
    if total > shown:
        console.print(T(f"  ... {total - shown} more (see --format json, or -v)"))


def draw(report: Report, console: Console, opts: TextOptions) -> Overview:
    """Draw the terminal report on CONSOLE; return its figures (for `--fail-on`)."""
    with numbering():
        return _draw(report, console, opts)


def _draw(report: Report, console: Console, opts: TextOptions) -> Overview:
    if opts.compile_id is not None:
        chosen = [c for c in report.compiles if is_named(c, opts.compile_id)]
        o = overview(report)
        header(report, o, console)
        for c in chosen:
            detail(c, report, console, full=True)
        return o
    # One pass over the compiles keeps what the tables need and the compiles shown in detail;
    # the compiles themselves may be on disk (store.py), so no list of all of them is made.
    refs = Refs.of(report)
    tally = Tally(report)
    cap = None if opts.verbosity > 0 else opts.max_rows
    rows: Capped[tuple[str, ...]] = Capped(cap)
    recompile_rows: Capped[RecompileRow] = Capped(cap)
    failure_rows: list[tuple[str, ...]] = []
    issue_rows: Capped[tuple[str, ...]] = Capped(cap)
    names: dict[FrameRef, str] = {}
    shown: list[Compile] = []
    more = 0  # compiles with inputs beyond those shown in detail
    for c in report.compiles:
        tally.add(c)
        if (row := table_row(c, refs)) is not None:
            rows.add(problem_order(c), c.status, row)
        if (rr := recompile_row(c, refs)) is not None:
            recompile_rows.add(0 if rr.limit is not None else 1, "", rr)
        if (fr := failure_row(c, refs)) is not None:
            failure_rows.append(fr)
        for x in c.export_issues:
            issue_rows.add(0, "", issue_row(refs(c), x))
        if c.id is not None and c.function:
            names[(c.log, c.pid, c.id.frame, c.id.run)] = c.function
        if opts.verbosity <= 0 and c.inputs:
            if len(shown) < opts.max_detail:
                shown.append(c)
            else:
                more += 1
    o = tally.done()
    header(report, o, console)
    divergence(report, console)
    if sum(1 for log in report.logs if log.process) > 1:
        rank_tables(report, console)
    else:
        compile_table(rows.rows(), console)
        footnote(rows.note("compiles"), console)
    if opts.verbosity < 0:
        bad_lines(report, console, 5)
        return o
    compile_time(o, console)
    breaks(o, console)
    recompiles(recompile_rows.rows(), names, console)
    footnote(recompile_rows.note("recompiles"), console)
    failures(failure_rows, console)
    export_issues(issue_rows.rows(), console)
    footnote(issue_rows.note("export issues"), console)
    # -v shows every compile in full: read them again, one at a time.
    for c in shown if opts.verbosity <= 0 else report.compiles:
        if c.id is None and not _outside_has(c):
            continue  # records outside any compile that this report shows nothing of
        detail(c, report, console, full=opts.verbosity > 0)
    if more:
        console.print(T(f"... inputs of {more} more compiles: use -v, or --compile-id ID", "dim"))
    if o.unknown_kinds:
        console.print(
            T(
                "Record kinds tlview does not know (counted, shown per compile as events): "
                + ", ".join(f"{k} x{n}" for k, n in o.unknown_kinds.items()),
                "dim",
            )
        )
    bad_lines(report, console, 1000 if opts.verbosity > 0 else 20)
    return o


def write(report: Report, out: Output, opts: Options) -> Overview:
    """The terminal report (the renderer of `--format text`)."""
    shown = TextOptions(compile_id=opts.compile_id, verbosity=opts.verbosity)
    return on_console(out, lambda console: draw(report, console, shown))
