"""The terminal report's tables over all compiles: compiles, times, breaks, recompiles, failures."""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rich.console import Console

from tlview.analyze.compiles import MAX_GUARDS, PHASE_NAMES, Analysis, Break
from tlview.analyze.facts import guard_origins, made_at
from tlview.analyze.names import compile_ref, names_text, rank_ranges
from tlview.analyze.summary import BreakSummary, Overview
from tlview.model import ExportIssue, Report
from tlview.render.text.console import T, table
from tlview.strings import Names
from tlview.units import count, seconds, short_path

STATUS_STYLE = {
    "ok": "green",
    "graph_break": "yellow",
    "restarted": "cyan",
    "failed": "bold red",
    "incomplete": "magenta",
    "empty": "dim",
    "traced": "blue",
    "outside": "dim",
}


RowT = TypeVar("RowT")


FrameRef = tuple[str, int | None, int | None, int]  # a frame across logs: log, pid, frame, run


@dataclass(slots=True)
class Capped(Generic[RowT]):
    """The rows a table shows: at most `cap` (None: all), the lowest ranks first (problems),
    in log order; the rest only counted, by kind. Holds no more than `cap` rows however long
    the log."""

    cap: int | None
    heap: list[tuple[int, int, str, RowT]] = field(default_factory=list)  # (-rank, -n, kind, row)
    n: int = 0
    left: Counter[str] = field(default_factory=Counter)  # kinds of the rows not shown

    def add(self, rank: int, kind: str, row: RowT) -> None:
        item = (-rank, -self.n, kind, row)
        self.n += 1
        if self.cap is None or len(self.heap) < self.cap:
            heapq.heappush(self.heap, item)
            return
        if self.cap > 0 and item[:2] > self.heap[0][:2]:
            item = heapq.heapreplace(self.heap, item)  # the worst row kept makes way
        self.left[item[2]] += 1

    def rows(self) -> list[RowT]:
        return [e[3] for e in sorted(self.heap, key=lambda e: -e[1])]

    def note(self, what: str, see: str = "-v lists them all") -> str | None:
        """The line under the table that says what it leaves out, if it does."""
        dropped = sum(self.left.values())
        if not dropped:
            return None
        kinds = ", ".join(f"{n} {k}" for k, n in self.left.most_common() if k)
        left = f"... {dropped} more {what} not listed" + (f" ({kinds})" if kinds else "")
        return f"{left}: {see}"


def table_row(a: Analysis, names: Names) -> tuple[str, ...] | None:
    """A compile's row in the compile table, or None for records outside compiles with nothing."""
    c = a.compile
    if c.id is None and not c.inputs and not c.graphs and not c.outside:
        return None
    return (
        a.ref,
        a.status_text,
        c.function or "",
        f"{names.shown(short_path(c.file))}:{c.source_line}" if c.file else "",
        "" if c.graph_ops is None else str(c.graph_ops),
        time_cell(a),
        a.inputs_text,
    )


def time_cell(a: Analysis) -> str:
    """A compile's time in the compile table; `~` when only its spans give it."""
    took, spans = a.took
    return ("~" if spans else "") + seconds(took) if took is not None else ""


def footnote(text: str | None, console: Console) -> None:
    if text is not None:
        console.print(T(text, "dim"))


def compile_table(rows: list[tuple[str, ...]], console: Console) -> None:
    t = table(
        "Compiles", "id", "status", "function", "where", "ops", "time", "inputs", console=console
    )
    for k in outside_last([row[0] for row in rows]):
        ref, status, *rest = rows[k]
        style = STATUS_STYLE.get(status.split(" ")[0], "")
        t.add_row(T(ref), T(status, style), *(T(x) for x in rest))
    console.print(t)


def outside_last(refs: list[str]) -> list[int]:
    """The order of the rows of compiles REFS: theirs, the records outside any compile (`-/-`)
    after the compiles."""
    return sorted(range(len(refs)), key=lambda k: refs[k].endswith("-/-"))


def _put_outside_last(
    rows: dict[str, list[tuple[str, ...]]], times: dict[str, list[float | None]]
) -> None:
    """Each process's rows, and their times, with the records outside any compile last."""
    for key, rs in rows.items():
        order = outside_last([row[0] for row in rs])
        rows[key], times[key] = [rs[k] for k in order], [times[key][k] for k in order]


def compile_time(o: Overview, console: Console) -> None:
    """Where the compile time went: each phase summed over the compiles, then the slowest."""
    if not o.slowest:
        return
    names = [n for n in PHASE_NAMES if n in o.phases]
    t = table("Compile time", "compile", "function", *names, console=console)
    t.add_row(T(f"all {o.compiles}"), T(""), *(T(seconds(o.phases[n])) for n in names))
    for s in o.slowest:
        cells = (T(seconds(s.phases[n]) if n in s.phases else "") for n in names)
        t.add_row(T(s.ref), T(s.function or ""), *cells)
    console.print(t)
    if o.compiles > len(o.slowest):
        footnote(f"the {len(o.slowest)} slowest of {o.compiles} compiles", console)


def divergence(report: Report, console: Console) -> None:
    """How the processes of a job differ; agreeing ranks are one group, so 1,000 read as one
    line. Each log is a process: two logs that claim one rank are compared as two."""
    procs = [log.process for log in report.logs if log.process]
    if len(procs) < 2:
        return
    ranks = report.ranks
    who = (
        f"{len(ranks)} ranks"
        if len(procs) == len(ranks)
        else f"{len(procs)} logs of {count(len(ranks), 'rank')} ({names_text(procs)})"
    )
    if not report.divergence:
        console.print(
            T(
                f"All {who} agree: the same compiles, "
                + ("graphs, " if report.graphs_compared else "")
                + "inputs, cache hits, recompiles, graph breaks, collectives and runtime "
                "estimates",
                "green",
            )
        )
        return
    t = table(
        # Two processes have no majority: the lowest is what the other is compared with.
        f"Divergence between {who} (compared with "
        + (f"rank {names_text(procs[:1])})" if len(procs) == 2 else "the majority)"),
        "what",
        "ranks",
        "how they differ",
        console=console,
    )
    differ: set[str] = set()
    for d in report.divergence:
        differ.update(d.processes)
        who_d = names_text(d.processes) if d.processes else rank_ranges(d.ranks)
        t.add_row(T(d.kind.replace("_", " "), "yellow"), T(who_d), T(d.detail))
    console.print(t)
    agree = [p for p in procs if p not in differ]
    odd = [p for p in procs if p in differ]  # in the job's order, as every list of them is
    if len(procs) > 2 and agree and odd:
        footnote(
            f"{'rank' if len(agree) == 1 else 'ranks'} {names_text(agree)} agree in every check; "
            f"{'rank' if len(odd) == 1 else 'ranks'} {names_text(odd)} "
            + ("differs" if len(differ) == 1 else "differ"),
            console,
        )


@dataclass(slots=True)
class RankRows:
    """Each process's compile rows and times, for the per-process tables of a job."""

    rows: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    times: dict[str, list[float | None]] = field(default_factory=dict)

    def add(self, a: Analysis, process: str, names: Names) -> None:
        """`process` is "" for the logs with no rank: one list, each compile by its log."""
        c = a.compile
        if c.id is None and not c.inputs and not c.graphs:
            return
        self.rows.setdefault(process, []).append(
            (
                compile_ref(c, not process),
                a.status_text,
                c.function or "",
                f"{names.shown(short_path(c.file))}:{c.source_line}" if c.file else "",
                "" if c.graph_ops is None else str(c.graph_ops),
                a.inputs_text,
            )
        )
        self.times.setdefault(process, []).append(c.compile_time_s)


def rank_tables(got: RankRows, console: Console) -> None:
    """Each process's compile list; processes with the same list share one table. Two logs that
    claim one rank are two processes (`rank1`, `rank1#2`): their compiles are never merged."""
    rows, times = got.rows, got.times
    _put_outside_last(rows, times)
    groups: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for key, rs in rows.items():
        groups.setdefault(tuple(rs), []).append(key)
    for sig, members in groups.items():
        known = [r for r in members if r]
        who = (
            ("rank " if len(known) == 1 else "ranks ") + names_text(known)
            if known
            else "logs with no rank"
        )
        title = f"Compiles of {who}"
        if len(known) > 1:
            title += f" ({len(known)} ranks, the same compiles)"
        t = table(
            title,
            "id",
            "status",
            "function",
            "where",
            "ops",
            "time" if len(members) == 1 else "max time",
            "inputs",
            console=console,
        )
        for n, row in enumerate(sig):
            ts = [x for r in members if (x := times[r][n]) is not None]
            t.add_row(
                T(row[0]),
                T(row[1], STATUS_STYLE.get(row[1].split(" ")[0], "")),
                T(row[2]),
                T(row[3]),
                T(row[4]),
                T(seconds(max(ts)) if ts else ""),
                T(row[5]),
            )
        console.print(t)


def _break_text(b: Break | BreakSummary) -> str:
    """A break's title and, under it, what torch says it was about (which call, which op) and
    its hints (what to change)."""
    hints = "".join(f"\nhint: {h}" for h in b.hints)
    return b.title + (f"\n{b.explanation}" if b.explanation else "") + hints


def breaks(o: Overview, console: Console, names: Names) -> None:
    if not o.breaks:
        return
    t = table(
        "Graph breaks (deduplicated)", "count", "reason", "where", "compiles", console=console
    )
    for s in o.breaks:
        where = ", ".join(
            names.shown(short_path(w)) + (f" x{n}" if n > 1 else "") for w, n in s.where.items()
        )
        t.add_row(T(s.count), T(_break_text(s)), T(where), T(", ".join(s.compiles[:8])))
    console.print(t)


@dataclass(slots=True)
class RecompileRow:
    """What the Recompiles table says of one recompile (kept instead of the compile)."""

    ref: str
    frame: FrameRef  # its function may come later
    function: str | None
    reasons: list[str]
    changed: list[str]
    limit: str | None
    made: list[str] = field(default_factory=list)  # where each failed guard was made


def recompile_row(a: Analysis) -> RecompileRow | None:
    r, c = a.recompile, a.compile
    if r is None or not r.listed or c.id is None:
        return None
    made = guard_origins(a.origins)[:MAX_GUARDS]
    return RecompileRow(
        a.ref,
        (c.log, c.pid, c.id.frame, c.id.run),
        c.function,
        [o.subject for o in made] or list(r.guards[:MAX_GUARDS]),
        r.changed(),
        r.limit,
        [made_at(o) for o in made],
    )


def recompiles(
    rows: list[RecompileRow],
    names: dict[FrameRef, str],
    console: Console,
) -> None:
    if not rows:
        return
    t = table("Recompiles", "id", "function", "failed guard", "made at", "what changed",
              console=console)  # fmt: skip
    for r in rows:
        t.add_row(
            T(r.ref),
            T(r.function or names.get(r.frame) or ""),
            T("\n".join(r.reasons) or "(no reason logged)"),
            T("\n".join(r.made)),
            T("\n".join(r.changed)),
        )
    console.print(t)
    for r in rows:
        if r.limit is not None:
            fn = r.function or names.get(r.frame) or "?"
            console.print(
                T(
                    f"{r.ref}: frame {r.frame[2]} ({fn}) hit {r.limit}: "
                    "dynamo stopped compiling it; later calls run its compiled code or eager",
                    "bold red",
                )
            )


def failure_row(a: Analysis, names: Names) -> tuple[str, ...] | None:
    f = a.failure
    if f is None:
        return None
    where = names.shown(short_path(f.where)) if f.where else ""
    return (a.ref, a.status, f.type or "", _indented(list(f.lines)), where)


def _indented(lines: list[str]) -> str:
    """A reason's lines, the later ones indented under its first."""
    return "\n".join([lines[0], *(f"  {x}" if x.strip() else "" for x in lines[1:])])


def failures(rows: list[tuple[str, ...]], console: Console) -> None:
    if not rows:
        return
    t = table(
        "Failures and unfinished compiles",
        "id",
        "status",
        "type",
        "reason",
        "where",
        console=console,
    )
    for ref, status, kind, reason, where in rows:
        t.add_row(T(ref), T(status, STATUS_STYLE.get(status, "")), T(kind), T(reason), T(where))
    console.print(t)


def issue_row(ref: str, x: ExportIssue, names: Names) -> tuple[str, ...]:
    where = f"{names.shown(short_path(x.where.file))}:{x.where.line}" if x.where is not None else ""
    return (ref, x.kind, x.subject, x.detail, where)


def export_issues(rows: list[tuple[str, ...]], console: Console) -> None:
    """What torch.export could not do soundly (draft export's report), one row each."""
    if not rows:
        return
    t = table(
        "Export issues", "compile", "kind", "expression or op", "what", "where", console=console
    )
    for row in rows:
        t.add_row(*(T(v) for v in row))
    console.print(t)
