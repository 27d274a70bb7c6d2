"""One compile in full on the terminal: its stack, breaks, recompile, inputs, kernels, events."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from tlview.analyze.changes import change_text
from tlview.analyze.collectives import parity
from tlview.analyze.names import Refs, describer_marks
from tlview.analyze.summary import (
    break_callers,
    break_context,
    break_explanation,
    break_hints,
    break_title,
    input_flags,
    input_names,
    kernels,
)
from tlview.index.core import is_torch_file
from tlview.index.dims import dynamic_dims, input_symbols
from tlview.index.recompiles import limit_text
from tlview.inert import command
from tlview.model import CacheEvent, Compile, Input, Report, StackFrame
from tlview.render.text.console import T, table
from tlview.render.text.tables import (
    Capped,
    footnote,
)
from tlview.strings import shown as named
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
    footnote(chosen.note("inputs", f"{command('--compile-id', ref)} or -v lists them all"), console)


def _cache_text(e: CacheEvent) -> str:
    why = f" ({e.reason})" if e.reason and e.outcome in ("bypass", "disabled") else ""
    return f"{e.cache} {e.outcome}{why}"


def kernels_table(c: Compile, console: Console) -> None:
    """Each kernel inductor wrote, with its FX nodes and the user code they came from."""
    found = kernels(c)
    if not found:
        return
    t = table("Kernels", "graph", "#", "kernel", "FX nodes", "user code", console=console)
    for k in found:
        code = "\n".join(
            f"{named(short_path(f.file))}:{f.line} in {f.name}" + (f": {f.loc}" if f.loc else "")
            for f in k.code
        )
        t.add_row(T(k.graph), T(k.order), T(k.name), T(", ".join(k.nodes)), T(code))
    console.print(t)


def _frame_line(f: StackFrame) -> str:
    """A frame as the terminal lists it: `file:line in name: code`."""
    return f"{named(f.file)}:{f.line} in {f.name}" + (f": {f.loc}" if f.loc else "")


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
        lines = [f"  {_frame_line(f)}" for f in user]
        if hidden:
            lines.insert(
                1, f"  ... {hidden} more frame(s): {command('--compile-id', ref)} shows them"
            )
        # One print for the whole stack: rich's cost is per call, and a stack can be long.
        console.print(T("\n".join(lines), "dim"))
    for o in c.outside:
        took = "time not logged" if o.seconds is None else f"{o.seconds:.2f} s"
        console.print(T(f"  compiled outside dynamo (log line {o.line}): {took}"))
        if o.fail_type:
            console.print(T(f"    failed: {o.fail_type}: {_later(o.fail_reason, 6)}", "red"))
    if c.fail_type and not c.outside:
        console.print(T(f"  failed: {c.fail_type}: {_later(c.fail_reason, 4)}", "red"))
    for i, r in enumerate(c.restart_reasons):
        if c.status == "restarted" or c.id is None or i >= c.id.attempt:
            console.print(T(f"  restart: {break_title(r)}", "cyan"))
            continue
        # The attempt that restarted holds where it broke: say which one that is.
        before = ref[: len(ref) - len(c.key)] + str(dataclasses.replace(c.id, attempt=i))
        console.print(
            T(
                f"  restarted before this attempt: {break_title(r)} "
                f"({command('--compile-id', before)} shows where)",
                "cyan",
            )
        )
    for g in c.graph_breaks:
        at = named(g.where or "?")
        console.print(T(f"  graph break at {at}: {break_title(g.reason)}", "yellow"))
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
        w = issue.where
        where = f" at {named(w.file)}:{w.line}" if w is not None else ""
        console.print(
            T(f"  export issue, {issue.kind}{where}: {issue.subject}: {issue.detail}", "yellow")
        )
    if c.non_compliant_ops:
        ops = ", ".join(c.non_compliant_ops)
        console.print(T(f"  custom ops not tagged pt2_compliant_tag: {ops}", "yellow"))
    got = parity(c)
    if got is not None:
        console.print(T(f"  collectives: {got.text()}", "green" if got.matched else "red"))
    inputs_table(c, console, "Inputs", ref, None if full else INPUT_ROWS)
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
        kernels_table(c, console)
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
