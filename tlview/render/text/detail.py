"""One compile in full on the terminal: its stack, breaks, recompile, inputs, kernels, events."""

from __future__ import annotations

from rich.console import Console

from tlview.analyze.compiles import Analysis
from tlview.analyze.names import describer_marks
from tlview.analyze.summary import input_flags, input_names
from tlview.index.dims import dynamic_dims, input_symbols
from tlview.index.recompiles import limit_text
from tlview.inert import command, one_line
from tlview.model import CacheEvent, Compile, Input, StackFrame
from tlview.render.text.console import T, table
from tlview.render.text.facts import compile_lines
from tlview.render.text.passes import compile_facts
from tlview.render.text.tables import Capped, footnote
from tlview.strings import Names
from tlview.units import dims, nbytes, short_path

INPUT_ROWS = 40  # inputs listed per compile by default (-v and --compile-id: all of them)


def inputs_table(c: Compile, console: Console, title: str, ref: str, cap: int | None) -> None:
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
        src = "\n".join(map(one_line, i.sources)) if i.sources else f"<tensor {tt.id}>"
        src += marks.get(id(i), "")
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
                T(f"  .{one_line(name)}"),
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
            console.print(T(f"  {one_line(i.source)}: {n}", "dim"))
    footnote(chosen.note("inputs", f"{command('--compile-id', ref)} or -v lists them all"), console)


def _cache_text(e: CacheEvent) -> str:
    why = f" ({e.reason})" if e.reason and e.outcome in ("bypass", "disabled") else ""
    return f"{e.cache} {e.outcome}{why}"


def kernels_table(a: Analysis, console: Console, names: Names) -> None:
    """Each kernel inductor wrote, with its FX nodes and the user code they came from."""
    found = a.kernels
    if not found:
        return
    t = table("Kernels", "graph", "#", "kernel", "FX nodes", "user code", console=console)
    for k in found:
        code = "\n".join(
            f"{names.shown(short_path(f.file))}:{f.line} in {f.name}"
            + (f": {f.loc}" if f.loc else "")
            for f in k.code
        )
        t.add_row(T(k.graph), T(k.order), T(k.name), T(", ".join(k.nodes)), T(code))
    console.print(t)


def _frame_line(f: StackFrame, names: Names) -> str:
    """A frame as the terminal lists it: `file:line in name: code`."""
    return f"{names.shown(f.file)}:{f.line} in {f.name}" + (f": {f.loc}" if f.loc else "")


def _later(reason: str | None, indent: int) -> str:
    """A failure's reason, its later lines (`RuntimeError: ...` under `backend=... raised:`)
    indented under its first."""
    first, *rest = (reason or "").strip().split("\n")
    return "\n".join([first, *(" " * indent + x if x.strip() else "" for x in rest)])


def _outside_has(c: Compile) -> bool:
    """Whether the records outside any compile hold anything a section shows."""
    return bool(
        c.outside or c.export_issues or c.inputs or c.graphs or c.guards or c.graph_breaks
    ) or bool(c.symbols or c.cache or c.metrics or c.provenance)


def _say(console: Console, text: str, style: str = "") -> None:
    console.print(T(text, style))


def _stack(a: Analysis, console: Console, names: Names, full: bool) -> None:
    """Frames outside torch, innermost last: the outermost (the user's script, when a library
    such as transformers made the call) and the two innermost; -v or --compile-id shows them
    all, torch's too."""
    if not a.compile.stack:
        return
    if full:
        frames, hidden = [f.frame for f in a.stack], 0
    else:
        frames, hidden = a.user_stack(3)
    lines = [f"  {_frame_line(f, names)}" for f in frames]
    if hidden:
        lines.insert(
            1, f"  ... {hidden} more frame(s): {command('--compile-id', a.ref)} shows them"
        )
    # One print for the whole stack: rich's cost is per call, and a stack can be long.
    _say(console, "\n".join(lines), "dim")


def _problems(a: Analysis, console: Console) -> None:
    """What went wrong: compiles outside dynamo, the failure, restarts."""
    c = a.compile
    for o in c.outside:
        took = "time not logged" if o.seconds is None else f"{o.seconds:.2f} s"
        _say(console, f"  compiled outside dynamo (log line {o.line}): {took}")
        if o.fail_type:
            _say(console, f"    failed: {o.fail_type}: {_later(o.fail_reason, 6)}", "red")
    if c.fail_type and not c.outside:
        _say(console, f"  failed: {c.fail_type}: {_later(c.fail_reason, 4)}", "red")
    for r in a.restarts:
        if r.before is None:
            _say(console, f"  restart: {r.text}", "cyan")
        else:  # the attempt that restarted holds where it broke: say which one that is
            _say(
                console,
                f"  restarted before this attempt: {r.text} "
                f"({command('--compile-id', r.before)} shows where)",
                "cyan",
            )


def _breaks(a: Analysis, console: Console, names: Names, full: bool) -> None:
    for b in a.breaks:
        _say(console, f"  graph break at {names.shown(b.where or '?')}: {b.title}", "yellow")
        if b.explanation:
            _say(console, f"    {b.explanation}", "yellow")
        for hint in b.hints:
            _say(console, f"    hint: {hint}")
        if b.context:
            cut = b.context if full or len(b.context) <= 300 else b.context[:300] + "..."
            _say(console, f"    debug context: {cut}", "dim")
        if b.callers:
            _say(console, "    reached from:", "dim")
            for f in b.callers:
                _say(console, f"      {_frame_line(f, names)}", "dim")


def _recompiled(a: Analysis, console: Console, names: Names) -> None:
    c = a.compile
    for r in c.recompile_reasons:
        # A reason's later lines (torch's "User stack trace:") stay under the compile.
        _say(console, "  recompiled because: " + r.rstrip().replace("\n", "\n    "))
    rc = a.recompile
    if rc is not None:
        for x in rc.changes:
            _say(console, f"  changed since {rc.previous}: {x}")
        if c.recompile is not None and c.recompile.limit_hit:
            _say(console, f"  hit {limit_text(c)}: dynamo stopped compiling this frame", "red")
    for issue in c.export_issues:
        w = issue.where
        where = f" at {names.shown(w.file)}:{w.line}" if w is not None else ""
        _say(
            console,
            f"  export issue, {issue.kind}{where}: {issue.subject}: {issue.detail}",
            "yellow",
        )
    if c.non_compliant_ops:
        ops = ", ".join(c.non_compliant_ops)
        _say(console, f"  custom ops not tagged pt2_compliant_tag: {ops}", "yellow")
    got = a.parity
    if got is not None:
        _say(console, f"  collectives: {got.text()}", "green" if got.matched else "red")


def _symbols(c: Compile, console: Console) -> None:
    if not c.symbols:
        return
    t = table("Symbols", "kind", "symbol", "value", "range", "source", "where", console=console)
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


def _payloads(c: Compile, console: Console, regions: bool) -> None:
    """Its payloads; with `regions`, each beside the region of regional inductor it is of."""
    if not (c.graphs or c.guards):
        return
    cols = ("kind", "log line", "lines", "bytes", *(("subgraph",) if regions else ()))
    t = table("Graphs and code", *cols, console=console)
    for p in c.payloads():
        cells = [
            T(p.kind),
            T(p.line),
            T(p.lines),
            T(nbytes(p.bytes) + ("" if p.ok else " (md5 mismatch)")),
        ]
        t.add_row(*cells, *((T(p.subgraph or ""),) if regions else ()))
    console.print(t)


_METRICS = (
    "entire_frame_compile_time_s",
    "backend_compile_time_s",
    "inductor_compile_time_s",
    "code_gen_time_s",
    "guard_count",
    "graph_op_count",
    "graph_node_count",
    "graph_input_count",
    "shape_env_guard_count",
)


def _full(a: Analysis, console: Console, names: Names) -> None:
    """What only a compile shown in full lists: symbols, payloads, kernels, cache, metrics."""
    c = a.compile
    _symbols(c, console)
    _payloads(c, console, bool(a.subgraphs))
    kernels_table(a, console, names)
    if c.cache:
        _say(console, "  cache: " + ", ".join(map(_cache_text, c.cache)))
    m = c.metrics
    if m:
        shown = ", ".join(f"{k}={m[k]}" for k in _METRICS if m.get(k) is not None)
        if shown:  # an export's metrics (no compile id) have none of these
            _say(console, f"  metrics: {shown}", "dim")
    for e in c.events[:50]:
        _say(console, f"  {e.kind} (line {e.line}): {e.summary}", "dim")


def detail(a: Analysis, console: Console, names: Names, full: bool) -> None:
    """One compile in full: its stack, problems, breaks, recompile, inputs; with `full`, all."""
    c = a.compile
    console.rule(T(f"{a.ref}  {c.function or ''}  [{c.status}]"), align="left")
    _stack(a, console, names, full)
    _problems(a, console)
    _breaks(a, console, names, full)
    _recompiled(a, console, names)
    compile_lines(a, console, full)
    compile_facts(a, console)
    inputs_table(c, console, "Inputs", a.ref, None if full else INPUT_ROWS)
    if full:
        _full(a, console, names)
