"""A stored baseline: a `tlview.report/1` file (what an earlier CI run uploaded) read back as
a Report, so `tlview diff BASE NEW` needs BASE's JSON, not its log.

What the JSON does not hold stays empty: payload texts, the inputs' described tensors (so no
input changes are found against a stored BASE: `--fail-on input-changes` needs its log), and
symbols. Everything else `tlview diff` compares is there: frames, statuses, graph breaks,
failed guards, failures, metrics (times, graph ops), cache events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tlview.errors import EXIT_NO_TRACE, TlviewError
from tlview.model import (
    CacheEvent,
    Compile,
    CompileId,
    ExportIssue,
    GraphBreak,
    Input,
    InputChange,
    LogIndex,
    OutsideCompile,
    Recompile,
    Report,
    StackFrame,
    TensorDesc,
)
from tlview.strings import expand

FORMAT = "tlview.report/1"
# The start of a file `tlview report --format json` wrote: how `diff` tells one from a log.
_HEAD = b'{"format":"tlview.report/1"'
# The checks that need BASE's log, not its report (they compare what the JSON leaves out).
NEEDS_LOG = ("input-changes",)


def is_report(path: str | Path) -> bool:
    """Whether PATH is a file that starts as a `tlview.report/1` document."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_HEAD) + 8).replace(b" ", b"").startswith(_HEAD)
    except OSError:
        return False


def read_report(path: str | Path) -> Report:
    """The one reader of a stored `tlview.report/1` file: its JSON, expanded, as a Report.
    A file that is not one, or holds only some compiles, is one line naming it."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise TlviewError(f"{path}: not a readable {FORMAT} file: {e}", EXIT_NO_TRACE) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise TlviewError(f"{path}: not a {FORMAT} file", EXIT_NO_TRACE)
    try:
        doc = expand(doc)  # long strings written once, put back where they were referred to
    except TlviewError as e:
        raise TlviewError(f"{path}: {e.message}", EXIT_NO_TRACE) from None
    try:
        report = _report(doc, str(path))
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise TlviewError(f"{path}: a damaged {FORMAT} file: {e!r}", EXIT_NO_TRACE) from None
    stated = (doc.get("stats") or {}).get("compiles")
    got = sum(1 for c in report.compiles if c.id is not None)
    if isinstance(stated, int) and stated != got:
        raise TlviewError(
            f"{path}: holds {got} of its {stated} compiles (written with --compile-id?): "
            "store the whole report as a baseline",
            EXIT_NO_TRACE,
        )
    return report


def _frame(d: Any) -> StackFrame | None:
    if not isinstance(d, dict):
        return None
    return StackFrame(str(d.get("file") or ""), int(d.get("line") or 0), str(d.get("name") or ""))


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _id(d: dict[str, Any]) -> CompileId | None:
    if d.get("compile_id") is None:
        return None
    return CompileId(
        _opt_int(d.get("frame_id")),
        _opt_int(d.get("frame_compile_id")),
        _opt_int(d.get("attempt")) or 0,
        _opt_int(d.get("compiled_autograd_id")),
        max((_opt_int(d.get("run")) or 1) - 1, 0),
    )


def _recompile(d: Any) -> Recompile | None:
    if not isinstance(d, dict):
        return None
    changes = [
        InputChange(str(x["source"]), str(x["field"]), x.get("before"), x.get("after"))
        for x in d.get("input_changes") or []
    ]
    return Recompile(
        d.get("previous"), _strs(d.get("reasons")), changes, bool(d.get("limit_hit")),
        bool(d.get("inputs_compared")),
    )  # fmt: skip


def _input(d: dict[str, Any]) -> Input:
    """An input as the JSON lists it: its tensor's logged fields (no storage, base or grad)."""
    fields = d.get("fields")
    tensor = TensorDesc(
        _opt_int(d.get("tensor_id")) or 0, fields if isinstance(fields, dict) else {}
    )
    return Input(
        tensor, _strs(d.get("sources")), None, d.get("storage"),
        _opt_int(d.get("describer")) or 0, _opt_int(d.get("alias_group")),
        superseded=bool(d.get("superseded")),
    )  # fmt: skip


def compile_of(d: dict[str, Any]) -> Compile:
    """One compile of the JSON, with what `diff` and the gate read of it."""
    metrics = d.get("metrics")
    return Compile(
        id=_id(d),
        log=str(d.get("log") or ""),
        pid=_opt_int(d.get("pid")),
        rank=_opt_int(d.get("rank")),
        status=d.get("status") or "incomplete",
        first_log_line=_opt_int(d.get("first_log_line")) or 0,
        last_log_line=_opt_int(d.get("last_log_line")) or 0,
        stack=[f for x in d.get("stack") or [] if (f := _frame(x)) is not None],
        function=d.get("function"),
        file=d.get("file"),
        source_line=_opt_int(d.get("line")),
        fail_type=d.get("fail_type"),
        fail_reason=d.get("fail_reason"),
        fail_where=d.get("fail_where"),
        restart_reasons=_strs(d.get("restart_reasons")),
        recompile_reasons=_strs(d.get("recompile_reasons")),
        graph_breaks=[
            GraphBreak(str(g["reason"]), g.get("where"), _opt_int(g.get("log_line")) or 0)
            for g in d.get("graph_breaks") or []
        ],
        metrics=metrics if isinstance(metrics, dict) else None,
        bwd_metrics=[m for m in d.get("bwd_metrics") or [] if isinstance(m, dict)],
        cache=[
            CacheEvent(str(e["cache"]), str(e["outcome"]), e.get("key"), e.get("reason"))
            for e in d.get("cache") or []
        ],
        export_issues=[
            ExportIssue(str(x.get("kind")), 0, str(x.get("subject")), str(x.get("detail")))
            for x in d.get("export_issues") or []
        ],
        outside=[
            OutsideCompile(
                _opt_int(o.get("log_line")) or 0,
                o.get("seconds"),
                o.get("fail_type"),
                o.get("fail_reason"),
            )  # fmt: skip
            for o in d.get("outside_compiles") or []
        ],
        recompile=_recompile(d.get("recompile")),
        inputs=[_input(i) for i in d.get("inputs") or [] if isinstance(i, dict)],
    )


def _report(doc: dict[str, Any], path: str) -> Report:
    logs: dict[str, LogIndex] = {}
    for x in doc.get("logs") or []:
        log = LogIndex(
            path=str(x.get("path") or ""),
            name=str(x.get("name") or ""),
            pid=_opt_int(x.get("pid")),
            rank=_opt_int(x.get("rank")),
            torch_version=x.get("torch_version"),
            lines=_opt_int(x.get("lines")) or 0,
            records=_opt_int(x.get("records")) or 0,
            bad_count=_opt_int(x.get("bad_lines")) or 0,
            first_time=x.get("first_time"),
            last_time=x.get("last_time"),
            rank_from=x.get("rank_from"),
            process=x.get("process") or "",
            compiles=[],
        )
        logs[log.name] = log
    for d in doc.get("compiles") or []:
        c = compile_of(d)
        if c.log not in logs:  # a compile of a log the file does not list: a log of its own
            logs[c.log] = LogIndex(path=c.log, name=c.log, compiles=[])
        kept = logs[c.log].compiles
        assert isinstance(kept, list)
        kept.append(c)
    stats = doc.get("stats") or {}
    first = next(iter(logs.values()), None)
    if first is not None:  # the record kinds are in the run's figures only, not per log
        first.kinds = dict(stats.get("kinds") or {})
        first.unknown_kinds = dict(stats.get("unknown_kinds") or {})
    return Report(path=path, logs=list(logs.values()), notes=_strs(doc.get("notes")))
