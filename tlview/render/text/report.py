"""The terminal report: tables sized to the terminal, plain when piped, never markup from a log."""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rich.console import Console

from tlview import __version__
from tlview.analyze.changes import change_text
from tlview.analyze.divergence import rank_ranges
from tlview.analyze.names import Refs, compile_ref, describer_marks, is_named
from tlview.analyze.summary import (
    PHASE_NAMES,
    Overview,
    Tally,
    break_callers,
    break_context,
    break_explanation,
    break_hints,
    break_title,
    input_flags,
    input_names,
    kernels,
    overview,
    problem_order,
    stopped_in,
)
from tlview.index.core import is_torch_file
from tlview.index.dims import dynamic_dims, input_symbols
from tlview.index.recompiles import limit_text
from tlview.model import CacheEvent, Compile, ExportIssue, Input, Report, StackFrame
from tlview.render import Options
from tlview.render.text.console import T, on_console, table
from tlview.runtime.output import Output
from tlview.units import count, dims, nbytes, seconds

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


@dataclass(slots=True)
class TextOptions:
    compile_id: str | None = None  # show this compile in full
    verbosity: int = 0  # -1 brief, 0 default, 1+ everything
    max_detail: int = 20  # compiles whose inputs are shown by default
    max_rows: int = 50  # rows of the compile and recompile tables by default (-v: all of them)


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


def header(report: Report, o: Overview, console: Console) -> None:
    console.print(T(f"tlview {__version__}: {report.path}", "bold"))
    parts = [f"torch {report.torch_version or 'unknown'}"]
    ranks = report.ranks
    parts.append(f"{o.logs} log{'s' if o.logs != 1 else ''}")
    if ranks:
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


def table_row(c: Compile, refs: Refs) -> tuple[str, ...] | None:
    """A compile's row in the compile table, or None for records outside compiles with nothing."""
    if c.id is None and not c.inputs and not c.graphs and not c.outside:
        return None
    return (
        refs(c),
        c.status + (f" ({c.fail_type})" if c.fail_type else ""),
        c.function or "",
        f"{_short_path(c.file)}:{c.firstline}" if c.file else "",
        "" if c.graph_ops is None else str(c.graph_ops),
        seconds(c.compile_time_s) if c.compile_time_s is not None else "",
        _inputs_count(c),
    )


def _note(text: str | None, console: Console) -> None:
    if text is not None:
        console.print(T(text, "dim"))


def compiletable(rows: list[tuple[str, ...]], console: Console) -> None:
    t = table(
        "Compiles", "id", "status", "function", "where", "ops", "time", "inputs", console=console
    )
    for ref, status, *rest in rows:
        style = STATUS_STYLE.get(status.split(" ")[0], "")
        t.add_row(T(ref), T(status, style), *(T(x) for x in rest))
    console.print(t)


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
        _note(f"the {len(o.slowest)} slowest of {o.compiles} compiles", console)


def divergence(report: Report, console: Console) -> None:
    """How the ranks of a job differ; agreeing ranks are one group, so 1,000 read as one line."""
    ranks = report.ranks
    if len(ranks) < 2:
        return
    if not report.divergence:
        console.print(
            T(
                f"All {len(ranks)} ranks agree: the same compiles, "
                + ("graphs, " if report.graphs_compared else "")
                + "inputs, cache hits, recompiles, graph breaks and collectives",
                "green",
            )
        )
        return
    t = table(
        # Two ranks have no majority: the lowest is what the other is compared with.
        f"Divergence between {len(ranks)} ranks (compared with "
        + (f"rank {min(ranks)})" if len(ranks) == 2 else "the majority)"),
        "what",
        "ranks",
        "how they differ",
        console=console,
    )
    for d in report.divergence:
        t.add_row(T(d.kind.replace("_", " "), "yellow"), T(rank_ranges(d.ranks)), T(d.detail))
    console.print(t)


def rank_tables(report: Report, console: Console) -> None:
    """Each rank's compile list; ranks with the same list share one table."""
    logs_of: dict[int | None, int] = {}
    for log in report.logs:
        logs_of[log.rank] = logs_of.get(log.rank, 0) + 1
    rows: dict[int | None, list[tuple[str, ...]]] = {}
    times: dict[int | None, list[float | None]] = {}
    for log in report.logs:
        for c in log.compiles:
            if c.id is None and not c.inputs and not c.graphs:
                continue
            status = c.status + (f" ({c.fail_type})" if c.fail_type else "")
            rows.setdefault(log.rank, []).append(
                (
                    compile_ref(c, logs_of[log.rank] > 1),
                    status,
                    c.function or "",
                    f"{_short_path(c.file)}:{c.firstline}" if c.file else "",
                    "" if c.graph_ops is None else str(c.graph_ops),
                    _inputs_count(c),
                )
            )
            times.setdefault(log.rank, []).append(c.compile_time_s)
    groups: dict[tuple[tuple[str, ...], ...], list[int | None]] = {}
    for rank, rs in rows.items():
        groups.setdefault(tuple(rs), []).append(rank)
    for sig, members in groups.items():
        known = [r for r in members if r is not None]
        who = (
            ("rank " if len(known) == 1 else "ranks ") + rank_ranges(known)
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


def _inputs_count(c: Compile) -> str:
    n = len(c.inputs)
    groups = {i.alias_group for i in c.inputs if i.alias_group}
    return f"{n}" + (
        f" ({len(groups)} alias group{'s' if len(groups) > 1 else ''})" if groups else ""
    )


def _short_path(p: str | None, keep: int = 2) -> str:
    if not p:
        return ""
    parts = p.replace("\\", "/").split("/")
    return "/".join(parts[-keep:])


def _break_text(reason: str) -> str:
    """A break's title and, under it, what torch says it was about (which call, which op) and
    its hints (what to change)."""
    why = break_explanation(reason)
    hints = "".join(f"\nhint: {h}" for h in break_hints(reason))
    return break_title(reason) + (f"\n{why}" if why else "") + hints


def breaks(o: Overview, console: Console) -> None:
    if not o.breaks:
        return
    t = table(
        "Graph breaks (deduplicated)", "count", "reason", "where", "compiles", console=console
    )
    for s in o.breaks:
        where = ", ".join(
            f"{_short_path(w)}" + (f" x{n}" if n > 1 else "") for w, n in s.where.items()
        )
        t.add_row(T(s.count), T(_break_text(s.reason)), T(where), T(", ".join(s.compiles[:8])))
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


def recompile_row(c: Compile, refs: Refs) -> RecompileRow | None:
    r = c.recompile
    if r is None or c.id is None or c.is_retry:
        return None
    changed = [change_text(x) for x in r.input_changes[:8]]
    if len(r.input_changes) > 8:
        changed.append(f"... {len(r.input_changes) - 8} more")
    if not changed:
        changed.append(
            f"no tensor input changed since {r.previous}" if r.compared else "inputs not logged"
        )
    return RecompileRow(
        refs(c),
        (c.log, c.pid, c.id.frame, c.id.run),
        c.function,
        r.reasons[:5],
        changed,
        limit_text(c) if r.limit_hit else None,
    )


def recompiles(
    rows: list[RecompileRow],
    names: dict[FrameRef, str],
    console: Console,
) -> None:
    if not rows:
        return
    t = table("Recompiles", "id", "function", "failed guard", "what changed", console=console)
    for r in rows:
        t.add_row(
            T(r.ref),
            T(r.function or names.get(r.frame) or ""),
            T("\n".join(r.reasons) or "(no reason logged)"),
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


REASON_LINES = 4  # lines of a failure's reason in the table; --compile-id shows all


def failure_row(c: Compile, refs: Refs) -> tuple[str, ...] | None:
    if c.status not in ("failed", "incomplete"):
        return None
    reason = (c.fail_reason or "").strip().splitlines()
    ref = refs(c)
    shown = reason[:REASON_LINES]
    if len(reason) > REASON_LINES:
        while shown and (not shown[-1].strip() or shown[-1].endswith(":")):
            shown.pop()  # a heading ("User stack:") or a gap whose lines are cut
        shown.append(f"... {len(reason) - len(shown)} more lines: --compile-id {ref} shows them")
    return (
        ref,
        c.status,
        c.fail_type or "",
        "\n".join(shown)
        if reason
        else (
            f"no compilation_metrics: the run stopped during this compile{stopped_in(c)}"
            if c.status == "incomplete"
            else ""
        ),
        _short_path(c.fail_where, 3) if c.fail_where else "",
    )


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


def issue_row(ref: str, x: ExportIssue) -> tuple[str, ...]:
    where = f"{_short_path(x.where.file, 3)}:{x.where.line}" if x.where is not None else ""
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


INPUT_ROWS = 40  # inputs listed per compile by default (-v and --compile-id: all of them)


def inputstable(c: Compile, console: Console, title: str, ref: str, cap: int | None) -> None:
    """A compile's inputs; with a cap, the ones that tell most first: a deep model's hundreds of
    parameters come after its own inputs, buffers, views, shared storages and notes."""
    if not c.inputs:
        return
    chosen: Capped[Input] = Capped(cap)
    for i in c.inputs:
        param = i.tensor.flag("is_parameter")
        plain = param and not i.alias_group and not i.notes and not i.inner
        chosen.add(1 if plain else 0, "param" if param else "other", i)
    t = table(
        title,
        "source",
        "size",
        "stride",
        "offset",
        "dtype",
        "device",
        "storage",
        "alias",
        "flags",
        console=console,
    )
    shown = chosen.rows()
    marks = describer_marks(c.inputs)
    names = input_names(c.inputs)
    dynamic = dynamic_dims(c)
    for i in shown:
        tt = i.tensor
        storage = "" if i.storage is None else nbytes(i.storage.size)
        src = ("\n".join(i.sources) if i.sources else f"<tensor {tt.id}>") + marks.get(id(i), "")
        t.add_row(
            T(src),
            T(dims(tt.size, input_symbols(i, dynamic))),
            T(dims(tt.stride)),
            T(tt.storage_offset),
            T(str(tt.fields.get("dtype", "?")).replace("torch.", "")),
            T(tt.device),
            T(storage),
            T("" if i.alias_group is None else f"#{i.alias_group}"),
            T(input_flags(i, names)),
        )
        for name, inner in i.inner.items():
            t.add_row(
                T(f"  .{name}"),
                T(dims(inner.size)),
                T(dims(inner.stride)),
                T(inner.storage_offset),
                T(str(inner.fields.get("dtype", "?")).replace("torch.", "")),
                T(inner.device),
                T(""),
                T(""),
                T("inner"),
            )
    console.print(t)
    for i in shown:
        for n in i.notes:
            console.print(T(f"  {i.source}: {n}", "dim"))
    _note(chosen.note("inputs", f"--compile-id {ref} or -v lists them all"), console)


def _cache_text(e: CacheEvent) -> str:
    why = f" ({e.reason})" if e.reason and e.outcome in ("bypass", "disabled") else ""
    return f"{e.cache} {e.outcome}{why}"


def kernelstable(c: Compile, console: Console) -> None:
    """Each kernel inductor wrote, with its FX nodes and the user code they came from."""
    found = kernels(c)
    if not found:
        return
    t = table("Kernels", "graph", "#", "kernel", "FX nodes", "user code", console=console)
    for k in found:
        code = "\n".join(
            f"{_short_path(f.file)}:{f.line} in {f.name}" + (f": {f.loc}" if f.loc else "")
            for f in k.code
        )
        t.add_row(T(k.graph), T(k.order), T(k.name), T(", ".join(k.nodes)), T(code))
    console.print(t)


def outside_text(o: Overview) -> str:
    """The headline of the compiles outside any compile id (AOTInductor, export)."""
    took = f"{o.outside_s:.2f} s" if o.outside_timed else "time not logged"
    failed = f", {o.outside_failed} failed" if o.outside_failed else ""
    return f"{o.outside} compiled outside dynamo ({took}{failed})"


def _frame_line(f: StackFrame) -> str:
    """A frame as the terminal lists it: `file:line in name: code`."""
    return str(f) + (f": {f.loc}" if f.loc else "")


def _outside_has(c: Compile) -> bool:
    """Whether the records outside any compile hold anything a section shows."""
    return bool(
        c.outside or c.export_issues or c.inputs or c.graphs or c.guards or c.graph_breaks
    ) or bool(c.symbols or c.cache or c.metrics or c.provenance)


def detail(c: Compile, report: Report, console: Console, full: bool) -> None:
    ref = Refs.of(report)(c)
    title = f"{ref}  {c.function or ''}  [{c.status}]"
    console.rule(T(title), align="left")
    if c.stack:
        # Frames outside torch, innermost last: the outermost (the user's script, when a
        # library such as transformers made the call) and the two innermost; -v or
        # --compile-id shows them all, torch's too.
        user = c.stack if full else [f for f in c.stack if not is_torch_file(f.file)]
        hidden = 0
        if len(user) > 3 and not full:
            hidden, user = len(user) - 3, [user[0], *user[-2:]]
        for i, f in enumerate(user):
            if hidden and i == 1:
                console.print(
                    T(f"  ... {hidden} more frame(s): --compile-id {ref} shows them", "dim")
                )
            console.print(T(f"  {_frame_line(f)}", "dim"))
    for o in c.outside:
        took = "time not logged" if o.seconds is None else f"{o.seconds:.2f} s"
        console.print(T(f"  compiled outside dynamo (log line {o.line}): {took}"))
        if o.fail_type:
            console.print(T(f"    failed: {o.fail_type}: {(o.fail_reason or '').strip()}", "red"))
    if c.fail_type and not c.outside:
        console.print(T(f"  failed: {c.fail_type}: {(c.fail_reason or '').strip()}", "red"))
    for i, r in enumerate(c.restart_reasons):
        if c.status == "restarted" or c.id is None or i >= c.id.attempt:
            console.print(T(f"  restart: {break_title(r)}", "cyan"))
            continue
        # The attempt that restarted holds where it broke: say which one that is.
        before = ref[: len(ref) - len(c.key)] + str(dataclasses.replace(c.id, attempt=i))
        console.print(
            T(
                f"  restarted before this attempt: {break_title(r)} "
                f"(--compile-id {before} shows where)",
                "cyan",
            )
        )
    for g in c.graph_breaks:
        console.print(T(f"  graph break at {g.where or '?'}: {break_title(g.reason)}", "yellow"))
        why = break_explanation(g.reason)
        if why:
            console.print(T(f"    {why}", "yellow"))
        for hint in break_hints(g.reason):
            console.print(T(f"    hint: {hint}"))
        context = break_context(g.reason)
        if context:
            cut = context if full or len(context) <= 300 else context[:300] + "..."
            console.print(T(f"    debug context: {cut}", "dim"))
        # The calls that led to the break, when it was deeper than the compiled function (in a
        # helper or a library's code): from the compiled function on (the compile's stack has
        # the frames above it), outside torch.
        calls = break_callers(g.text)
        own = next(
            (i for i, f in enumerate(calls) if f.name == c.function and f.file == c.file), None
        )
        inner = [] if own is None else [f for f in calls[own:] if not is_torch_file(f.file)]
        if len(inner) > 1:
            console.print(T("    reached from:", "dim"))
            for f in inner:
                console.print(T(f"      {_frame_line(f)}", "dim"))
    for r in c.recompile_reasons:
        # A reason's later lines (torch's "User stack trace:") stay under the compile.
        console.print(T("  recompiled because: " + r.rstrip().replace("\n", "\n    ")))
    if c.recompile is not None:
        for x in c.recompile.input_changes:
            console.print(T(f"  changed since {c.recompile.previous}: {change_text(x)}"))
        if c.recompile.limit_hit:
            console.print(T(f"  hit {limit_text(c)}: dynamo stopped compiling this frame", "red"))
    for issue in c.export_issues:
        where = f" at {issue.where.file}:{issue.where.line}" if issue.where is not None else ""
        console.print(
            T(f"  export issue, {issue.kind}{where}: {issue.subject}: {issue.detail}", "yellow")
        )
    if c.non_compliant_ops:
        ops = ", ".join(c.non_compliant_ops)
        console.print(T(f"  custom ops not tagged pt2_compliant_tag: {ops}", "yellow"))
    inputstable(c, console, "Inputs", ref, None if full else INPUT_ROWS)
    if full:
        if c.symbols:
            t = table(
                "Symbols", "kind", "symbol", "value", "range", "source", "where", console=console
            )
            for s in c.symbols:
                t.add_row(
                    T(s.kind),
                    T(s.symbol),
                    T(s.value or ""),
                    T(s.range or ""),
                    T(s.source or s.reason or ""),
                    T(str(s.where) if s.where else ""),
                )
            console.print(t)
        if c.graphs or c.guards:
            t = table("Graphs and code", "kind", "log line", "lines", "bytes", console=console)
            for p in c.payloads():
                t.add_row(
                    T(p.kind),
                    T(p.line),
                    T(p.lines),
                    T(nbytes(p.bytes) + ("" if p.ok else " (md5 mismatch)")),
                )
            console.print(t)
        kernelstable(c, console)
        if c.cache:
            console.print(T("  cache: " + ", ".join(map(_cache_text, c.cache))))
        if c.metrics:
            m = c.metrics
            keys = [
                "entire_frame_compile_time_s",
                "backend_compile_time_s",
                "inductor_compile_time_s",
                "code_gen_time_s",
                "guard_count",
                "graph_op_count",
                "graph_node_count",
                "graph_input_count",
                "shape_env_guard_count",
            ]
            shown = ", ".join(f"{k}={m[k]}" for k in keys if m.get(k) is not None)
            if shown:  # an export's metrics (no compile id) have none of these
                console.print(T(f"  metrics: {shown}", "dim"))
        for e in c.events[:50]:
            console.print(T(f"  {e.kind} (line {e.line}): {e.summary}", "dim"))


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
    if len(report.ranks) > 1:
        rank_tables(report, console)
    else:
        compiletable(rows.rows(), console)
        _note(rows.note("compiles"), console)
    if opts.verbosity < 0:
        bad_lines(report, console, 5)
        return o
    compile_time(o, console)
    breaks(o, console)
    recompiles(recompile_rows.rows(), names, console)
    _note(recompile_rows.note("recompiles"), console)
    failures(failure_rows, console)
    export_issues(issue_rows.rows(), console)
    _note(issue_rows.note("export issues"), console)
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
