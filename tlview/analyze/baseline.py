"""A stored baseline: a `tlview.report/2` file (or `/1`, what tlview wrote before) (what an earlier CI run uploaded) read back as
a Report, so `tlview diff BASE NEW` needs BASE's JSON, not its log.

What the JSON does not hold stays empty: payload texts, the inputs' described tensors (so no
input changes are found against a stored BASE: `--fail-on input-changes` needs its log), and
symbols. Everything else `tlview diff` compares is there: frames, statuses, graph breaks,
failed guards, failures, metrics (times, graph ops), cache events, and each compile's spans (its
phases, for `--fail-on phase:NAME`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tlview.analyze.stored import Damaged, Fields, Strings
from tlview.errors import EXIT_NO_TRACE, TlviewError
from tlview.model import (
    STATUSES,
    CacheEvent,
    Compile,
    CompileId,
    ExportIssue,
    GraphBreak,
    Input,
    InputChange,
    LogIndex,
    OutsideCompile,
    Phase,
    Recompile,
    Report,
    StackFrame,
    Status,
    TensorDesc,
)
from tlview.strings import TABLE

FORMAT = "tlview.report/2"
FORMATS = ("tlview.report/1", FORMAT)  # /1: each attempt and `-/-` in `compiles`
# The start of a file `tlview report --format json` wrote: how `diff` tells one from a log.
_HEADS = tuple(b'{"format":"' + f.encode() + b'"' for f in FORMATS)
# The checks that need BASE's log, not its report (they compare what the JSON leaves out).
NEEDS_LOG = ("input-changes",)


def is_report(path: str | Path) -> bool:
    """Whether PATH is a file that starts as a `tlview.report/2` (or `/1`) document."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_HEADS[-1]) + 8).replace(b" ", b"").startswith(_HEADS)
    except OSError:
        return False


def read_report(path: str | Path) -> Report:
    """The one reader of a stored `tlview.report/2` (or `/1`) file: its JSON, each field tlview reads
    checked (`Fields`), as a Report. A file that is not one, holds a field tlview does not write
    there, or holds only some compiles, is one line naming it and the field (exit 1)."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise TlviewError(f"{path}: not a readable {FORMAT} file: {e}", EXIT_NO_TRACE) from None
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS:
        raise TlviewError(f"{path}: not a {FORMAT} file", EXIT_NO_TRACE)
    fmt = doc["format"]
    try:
        top = Fields(doc, "", Strings(doc.get(TABLE)))
        report = _report(top, str(path), fmt == FORMAT)
        stated = top.obj("stats").integer("compiles")
    except Damaged as e:
        raise TlviewError(f"{path}: a damaged {fmt} file: {e}", EXIT_NO_TRACE) from None
    # /2 counts no attempt that restarted and no graph export traced; /1 counted each
    got = sum(
        1 for c in report.attempts if c.id is not None and not (fmt == FORMAT and _uncounted(c))
    )
    if stated is not None and stated != got:
        raise TlviewError(
            f"{path}: holds {got} of its {stated} compiles (written with --compile-id?): "
            "store the whole report as a baseline",
            EXIT_NO_TRACE,
        )
    return report


def every_attempt(doc: dict[str, Any]) -> list[Any]:
    """Every compile and attempt of a `tlview.report/2` document, as `/1` listed them: each log's
    records outside any compile first, then each attempt in order (those that restarted just
    before the compile they restarted into). What is no object is left where it was, for the
    reader that checks each field to name it."""
    outside: dict[Any, list[Any]] = {}
    for o in _list(doc.get("outside")):
        outside.setdefault(o.get("log") if isinstance(o, dict) else None, []).append(o)
    flat: list[Any] = []
    for c in _list(doc.get("compiles")):
        if isinstance(c, dict):
            flat += outside.pop(c.get("log"), [])
            flat += _list(c.get("attempts"))
        flat.append(c)
    for rest in outside.values():
        flat += rest
    return flat


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _uncounted(c: Compile) -> bool:
    return c.status in ("restarted", "traced")


def _frame(f: Fields) -> StackFrame:
    return StackFrame(
        f.file("file") or "", f.integer("line") or 0, f.text("name") or "", f.text("loc")
    )


def _id(d: Fields) -> CompileId | None:
    if d.text("compile_id") is None:
        return None
    return CompileId(
        d.integer("frame_id"),
        d.integer("frame_compile_id"),
        d.integer("attempt") or 0,
        d.integer("compiled_autograd_id"),
        max((d.integer("run") or 1) - 1, 0),
    )


def _recompile(d: Fields | None) -> Recompile | None:
    if d is None:
        return None
    changes = [
        InputChange(
            x.need_text("source"), x.need_text("field"), x.value("before"), x.value("after")
        )
        for x in d.items("input_changes")
    ]
    return Recompile(
        d.text("previous"), d.strs("reasons"), changes, d.flag("limit_hit"),
        d.flag("inputs_compared"),
    )  # fmt: skip


def _input(d: Fields) -> Input:
    """An input as the JSON lists it: its tensor's logged fields (no storage, base or grad)."""
    tensor = TensorDesc(d.integer("tensor_id") or 0, d.raw("fields") or {})
    return Input(
        tensor, d.strs("sources"), None, d.text("storage"), d.integer("describer") or 0,
        d.integer("alias_group"), superseded=d.flag("superseded"),
    )  # fmt: skip


def _status(d: Fields) -> Status:
    got = d.text("status") or "incomplete"
    for s in STATUSES:
        if s == got:
            return s
    raise Damaged(f"{d.where}.status is {got!r}, no status tlview writes")


def compile_of(d: Fields) -> Compile:
    """One compile of the JSON, with what `diff` and the gate read of it."""
    return Compile(
        id=_id(d),
        log=d.text("log") or "",
        pid=d.integer("pid"),
        rank=d.integer("rank"),
        status=_status(d),
        first_log_line=d.integer("first_log_line") or 0,
        last_log_line=d.integer("last_log_line") or 0,
        stack=[_frame(f) for f in d.items("stack")],
        function=d.text("function"),
        file=d.file("file"),
        source_line=d.integer("line"),
        fail_type=d.text("fail_type"),
        fail_reason=d.text("fail_reason"),
        fail_where=d.text("fail_where"),
        restart_reasons=d.strs("restart_reasons"),
        recompile_reasons=d.strs("recompile_reasons"),
        graph_breaks=[b for g in d.items("graph_breaks") if (b := _break(g, d)) is not None],
        metrics=d.raw("metrics"),
        bwd_metrics=[m.d for m in d.items("bwd_metrics")],
        cache=[
            CacheEvent(
                e.need_text("cache"), e.need_text("outcome"), e.text("key"), e.text("reason")
            )
            for e in d.items("cache")
        ],
        export_issues=[
            ExportIssue(x.text("kind") or "", 0, x.text("subject") or "", x.text("detail") or "")
            for x in d.items("export_issues")
        ],
        outside=[
            OutsideCompile(
                o.integer("log_line") or 0,
                o.number("seconds"),
                o.text("fail_type"),
                o.text("fail_reason"),
            )  # fmt: skip
            for o in d.items("outside_compiles")
        ],
        recompile=_recompile(d.maybe("recompile")),
        inputs=[_input(i) for i in d.items("inputs")],
        phases=[_phase(x) for x in d.items("phases")],
    )


def _log(x: Fields) -> LogIndex:
    return LogIndex(
        path=x.text("path") or "",
        name=x.text("name") or "",
        pid=x.integer("pid"),
        rank=x.integer("rank"),
        torch_version=x.text("torch_version"),
        lines=x.integer("lines") or 0,
        records=x.integer("records") or 0,
        bad_count=x.integer("bad_lines") or 0,
        first_time=x.text("first_time"),
        last_time=x.text("last_time"),
        rank_from=x.text("rank_from"),
        process=x.text("process") or "",
        compiles=[],
    )


def _entries(doc: Fields, attempts: bool) -> Iterator[Fields]:
    """Each compile as `/1` lists them; with `attempts` (`/2`), each log's records outside any
    compile first, then each compile's attempts that restarted, then the compile."""
    if not attempts:
        yield from doc.items("compiles")
        return
    outside: dict[str | None, list[Fields]] = {}
    for o in doc.items("outside"):
        outside.setdefault(o.text("log"), []).append(o)
    for c in doc.items("compiles"):
        yield from outside.pop(c.text("log"), [])
        yield from c.items("attempts")
        yield c
    for rest in outside.values():
        yield from rest


def _break(g: Fields, c: Fields) -> GraphBreak | None:
    """A compile's graph break, each field checked; None for one `/2` lists with a compile but
    an attempt of it that restarted logged (the attempt lists it as its own)."""
    b = GraphBreak(g.need_text("reason"), g.text("where"), g.integer("log_line") or 0)
    return b if (g.text("attempt") or c.text("key")) == c.text("key") else None


def _phase(d: Fields) -> Phase:
    """A compile's span as the JSON lists it (for `--fail-on phase:NAME`)."""
    return Phase(
        d.need_text("name"),
        d.number("start_us") or 0.0,
        d.number("dur_us"),
        d.integer("depth") or 0,
    )


def _report(doc: Fields, path: str, attempts: bool) -> Report:
    logs: dict[str, LogIndex] = {}
    for x in doc.items("logs"):
        log = _log(x)
        logs[log.name] = log
    for d in _entries(doc, attempts):
        c = compile_of(d)
        if c.log not in logs:  # a compile of a log the file does not list: a log of its own
            logs[c.log] = LogIndex(path=c.log, name=c.log, compiles=[])
        kept = logs[c.log].compiles
        assert isinstance(kept, list)
        kept.append(c)
    stats = doc.obj("stats")
    first = next(iter(logs.values()), None)
    if first is not None:  # the record kinds are in the run's figures only, not per log
        first.kinds = stats.counts("kinds")
        first.unknown_kinds = stats.counts("unknown_kinds")
    return Report(path=path, logs=list(logs.values()), notes=doc.strs("notes"))
