"""The terminal report: tables sized to the terminal, plain when piped, never markup from a log."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from rich.console import Console

from tlview.analyze.compiles import Analysis, analysed
from tlview.analyze.names import is_named, names_text
from tlview.analyze.summary import Overview, Tally
from tlview.model import Report
from tlview.render import Options, Split
from tlview.render.text.console import T, on_console
from tlview.render.text.detail import _outside_has, detail
from tlview.render.text.facts import (
    compile_time_text,
    owners_section,
    phase_table,
    skips_text,
    spans_note,
)
from tlview.render.text.tables import (
    Capped,
    FrameRef,
    RankRows,
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
from tlview.render.text.vllm import vllm
from tlview.runtime.output import Output
from tlview.strings import Names
from tlview.units import count
from tlview.version import __version__


@dataclass(slots=True)
class TextOptions:
    compile_id: str | None = None  # show this compile in full
    verbosity: int = 0  # -1 brief, 0 default, 1+ everything
    max_detail: int = 20  # compiles whose inputs are shown by default
    max_rows: int = 50  # rows of the compile and recompile tables by default (-v: all of them)


def _ranks(report: Report) -> str | None:
    """The ranks or processes of a job, in a few words (None: one process)."""
    ranks = report.ranks
    procs = [log.process for log in report.logs if log.process]
    if len(procs) > len(ranks):  # several logs claim one rank: each is a process of its own
        if len(procs) < 9:
            return "rank " + names_text(procs)
        return f"{len(ranks)} ranks in {len(procs)} logs"
    if not ranks:
        return None
    return "rank " + ", ".join(str(r) for r in ranks) if len(ranks) < 9 else f"{len(ranks)} ranks"


def _about(report: Report, o: Overview) -> list[str]:
    """What was read: torch, logs, ranks, lines, when."""
    parts = [
        f"torch {report.torch_version or 'unknown'}",
        f"{o.logs} log{'s' if o.logs != 1 else ''}",
    ]
    ranks = _ranks(report)
    if ranks:
        parts.append(ranks)
    parts.append(f"{o.lines:,} lines, {o.records:,} records, {o.bad_lines:,} bad")
    if o.first_time and o.last_time:
        parts.append(f"{_time(o.first_time)} to {_time(o.last_time)}")
    return parts


def _figures(o: Overview) -> list[str]:
    """The headline's figures, those that are 0 and rare left out."""
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
    fig.append(compile_time_text(o))
    if (skips := skips_text(o.facts)) is not None:
        fig.append(skips)
    if o.cache:
        fig.append("cache " + ", ".join(f"{v} {k}" for k, v in sorted(o.cache.items())))
    fig.append(count(o.inputs, "input"))
    if o.export_issues:
        fig.append(count(o.export_issues, "export issue"))
    if o.outside:
        fig.append(outside_text(o))
    return fig


def header(report: Report, o: Overview, console: Console) -> None:
    console.print(T(f"tlview {__version__}: {report.path}", "bold"))
    for line in _fit(_about(report, o), console.width):
        console.print(T(line))
    for line in _fit(_figures(o), console.width):
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
    names = Names()  # a long name is written whole once, then referred to (tlview/strings.py)
    if opts.compile_id is not None:
        return _one(report, console, opts.compile_id, names)
    return _draw(report, analysed(report), console, opts, names)


def _one(report: Report, console: Console, ref: str, names: Names) -> Overview:
    """The header, then the compiles --compile-id names, in full."""
    tally = Tally(report)
    chosen = []
    for a in analysed(report):
        tally.add(a)
        if is_named(a.compile, ref):
            chosen.append(a)
    o = tally.done()
    header(report, o, console)
    for a in chosen:
        detail(a, console, names, full=True)
    return o


@dataclass(slots=True)
class Tables:
    """What the report's tables show, kept as the compiles go by: at most `cap` rows of each
    (the compiles themselves may be on disk, so no list of all of them is made)."""

    cap: int | None
    max_detail: int | None  # compiles shown with their inputs (None: every one, later)
    processes: dict[tuple[str, int | None], str] | None  # a job's: each log's process
    rows: Capped[tuple[str, ...]] = field(init=False)
    recompiles: Capped[RecompileRow] = field(init=False)
    failures: list[tuple[str, ...]] = field(default_factory=list)
    issues: Capped[tuple[str, ...]] = field(init=False)
    names: dict[FrameRef, str] = field(default_factory=dict)
    shown: list[Analysis] = field(default_factory=list)
    by_process: RankRows = field(default_factory=RankRows)
    more: int = 0  # compiles with inputs beyond those shown in detail

    def __post_init__(self) -> None:
        self.rows = Capped(self.cap)
        self.recompiles = Capped(self.cap)
        self.issues = Capped(self.cap)

    def add(self, a: Analysis, names: Names) -> None:
        c = a.compile
        if c.id is not None and not a.counted:
            return  # an attempt that restarted: the compile after it has its row and breaks
        if self.processes is not None:
            self.by_process.add(a, self.processes.get((c.log, c.pid), ""), names)
        if (row := table_row(a, names)) is not None:
            self.rows.add(a.problem, c.status, row)
        if (rr := recompile_row(a)) is not None:
            self.recompiles.add(0 if rr.limit is not None else 1, "", rr)
        if (fr := failure_row(a, names)) is not None:
            self.failures.append(fr)
        for x in c.export_issues:
            self.issues.add(0, "", issue_row(a.ref, x, names))
        if c.id is not None and c.function:
            self.names[(c.log, c.pid, c.id.frame, c.id.run)] = c.function
        if c.inputs and self.max_detail is not None:
            if len(self.shown) < self.max_detail:
                self.shown.append(a)
            else:
                self.more += 1


def _draw(
    report: Report, compiles: Iterator[Analysis], console: Console, opts: TextOptions, names: Names
) -> Overview:
    tally = Tally(report)
    many = sum(1 for log in report.logs if log.process) > 1
    kept = Tables(
        None if opts.verbosity > 0 else opts.max_rows,
        opts.max_detail if opts.verbosity <= 0 else None,
        {(log.name, log.pid): log.process for log in report.logs} if many else None,
    )
    for a in compiles:
        tally.add(a)
        kept.add(a, names)
    o = tally.done()
    header(report, o, console)
    divergence(report, console)
    if many:
        rank_tables(kept.by_process, console)
    else:
        compile_table(kept.rows.rows(), console)
        footnote(kept.rows.note("compiles"), console)
        footnote(spans_note(o), console)
    if opts.verbosity < 0:
        bad_lines(report, console, 5)
        return o
    compile_time(o, console)
    phase_table(o, console, opts.verbosity > 0)
    breaks(o, console, names)
    recompiles(kept.recompiles.rows(), kept.names, console)
    footnote(kept.recompiles.note("recompiles"), console)
    failures(kept.failures, console)
    export_issues(kept.issues.rows(), console)
    footnote(kept.issues.note("export issues"), console)
    owners_section(o, console, opts.verbosity > 0)
    vllm(o.vllm, console)
    # -v shows every compile in full: read them again, one at a time.
    for a in kept.shown if opts.verbosity <= 0 else analysed(report):
        if a.compile.id is None and not _outside_has(a.compile):
            continue  # records outside any compile that this report shows nothing of
        detail(a, console, names, full=opts.verbosity > 0)
    if kept.more:
        more = kept.more
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


def write(report: Report, out: Output, opts: Options, split: Split | None = None) -> Overview:
    """The terminal report (the renderer of `--format text`): one pass, here; the compiles a
    terminal shows in full are few, so it is not split."""
    shown = TextOptions(compile_id=opts.compile_id, verbosity=opts.verbosity)
    return on_console(out, lambda console: draw(report, console, shown))
