"""Compilation metrics records: a compile's end, its failure, its code and why it recompiled."""

from __future__ import annotations

from typing import Any

from tlview.index.core import State, metrics_summary
from tlview.index.kinds import BWD_FIELDS, METRIC_FIELDS, TIME_FIELDS, is_int, wrong_fields
from tlview.index.recompiles import split_reasons
from tlview.model import PHASES, Compile, CompileId, OutsideCompile, seconds_of
from tlview.parse import Record
from tlview.reprs import class_name

# A compile's failure whose exception type was logged as "" (torch writes null for no failure)
NO_FAIL_TYPE = "(exception type not logged)"
MAX_SECONDS = 365 * 86400  # no compile takes a year: a longer time is damage
MAX_RESTARTS = 1000  # attempts of one compile marked ended with it (torch restarts a few)


def on_metrics(ix: State, rec: Record) -> None:
    """compilation_metrics: a compile's end, and what it says of the compile."""
    read_metrics(ix, rec, ix.compile_of(rec))


def read_metrics(ix: State, rec: Record, c: Compile) -> None:
    body = metrics_body(ix, rec)
    if body is None:
        return
    if c.id is None:
        c.outside.append(_outside(rec.line, body))
    if c.metrics is not None:
        # A second metrics record for one id (records outside any compile): keep both.
        ix.event(rec, c, "compilation_metrics", metrics_summary(body))
        return
    c.metrics = ix.small_dict(body)
    if c.id is not None:
        _ended(ix, c.id)
    if ix.part:
        ix.metrics_events[c.id] = ix.as_event(rec, "compilation_metrics", body)
    _failed(c, body)
    rr = body.get("restart_reasons")
    if isinstance(rr, list) and all(isinstance(r, str) for r in rr):
        c.restart_reasons = [str(r) for r in rr]
    _code(c, body)
    rec_reason = body.get("recompile_reason")
    if isinstance(rec_reason, str) and rec_reason and not c.recompile_reasons:
        c.recompile_reasons = split_reasons(rec_reason)


def _failed(c: Compile, body: dict[str, Any]) -> None:
    """The compile's failure, as its metrics say it: type, reason and the user's line."""
    fail_type, fail_reason = _failure(body)
    c.fail_type = fail_type or c.fail_type
    c.fail_reason = fail_reason or c.fail_reason
    ff, fl = body.get("fail_user_frame_filename"), body.get("fail_user_frame_lineno")
    if isinstance(ff, str):
        c.fail_where = f"{ff}:{fl}" if is_int(fl) else ff


def _ended(ix: State, i: CompileId) -> None:
    """A compile ended with its metrics; so did a restart's earlier attempts, which logged none
    of their own: their id starting again is a new run."""
    ix.ended.add(i)
    ix.ended.update(
        CompileId(i.frame, i.frame_compile, a, i.autograd, i.run)
        for a in range(min(i.attempt, MAX_RESTARTS))  # a log's attempt 2**62: no
    )


def _code(c: Compile, body: dict[str, Any]) -> None:
    """The compiled function's name, file and first line, as the metrics name them."""
    if isinstance(body.get("co_name"), str):
        c.function = body["co_name"]
    if isinstance(body.get("co_filename"), str):
        c.file = body["co_filename"]
    if is_int(body.get("co_firstlineno")):
        c.source_line = body["co_firstlineno"]


def metrics_body(ix: State, rec: Record) -> dict[str, Any] | None:
    """A metrics record's fields, without the times no clock gives; wrong ones said."""
    body = rec.body
    if not isinstance(body, dict):
        ix.bad(rec, "expected an object")
        return None
    body, wrong_time = durations(body)
    problem = wrong_fields(body, METRIC_FIELDS) or wrong_time
    if problem:
        ix.bad(rec, problem)
    version = body.get("pytorch_version")  # torch 2.10 and later
    if isinstance(version, str) and ix.log.torch_version is None:
        ix.saw_version(version)
    return body


def runtime_event(ix: State, rec: Record, c: Compile, body: dict[str, Any]) -> None:
    """Compile work a compiled function did when it ran (its first call): an event of its
    compile, with its times. It is not the compile's own time, so no total counts it."""
    times = [f"{name} {v:.3f} s" for name, metric in PHASES if (v := seconds_of(body, metric))]
    fwd = False if rec.kind.startswith("bwd_") else body.get("is_forward")
    said = "compile work at run time"
    if isinstance(fwd, bool):
        said += " (forward)" if fwd else " (backward)"
    ix.event(rec, c, rec.kind, ", ".join([said, *times]), caller=True)


def on_bwd_metrics(ix: State, rec: Record) -> None:
    """bwd_compilation_metrics: the times of a compile's backward, kept as they are."""
    c = ix.compile_of(rec)
    body = rec.body
    if isinstance(body, dict) and "is_forward" in body and body["is_forward"] is None:
        # torch 2.6 names a frame's metrics so when its compile stopped before saying it was
        # a forward one (recompile limit, error_on_recompile): they are its own.
        read_metrics(ix, rec, c)
    elif isinstance(body, dict):
        body, wrong_time = durations(body)
        problem = wrong_fields(body, BWD_FIELDS) or wrong_time
        if problem:
            ix.bad(rec, problem)
        c.bwd_metrics.append(ix.small_dict(body))
    else:
        ix.bad(rec, "expected an object")


def durations(body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Metrics without the times no clock gives (below zero, over a year, infinite, NaN), and
    what they were: added up, they would skew every total."""
    wrong = {
        k: v
        for k in TIME_FIELDS
        if isinstance(v := body.get(k), float | int)
        and not 0 <= v <= (MAX_SECONDS * 1e6 if k.endswith("_us") else MAX_SECONDS)
    }
    if not wrong:
        return body, None
    said = ", ".join(f"{k} {v!r}" for k, v in wrong.items())
    return {k: v for k, v in body.items() if k not in wrong}, f"not a duration: {said}"


def _outside(line: int, body: dict[str, Any]) -> OutsideCompile:
    """The compile that metrics outside any compile id stand for (AOTInductor, export)."""
    seconds = seconds_of(body, "entire_frame_compile_time_s")
    start, end = body.get("start_time_us"), body.get("end_time_us")
    if (
        seconds is None
        and type(start) is int
        and type(end) is int
        and 0 <= end - start <= MAX_SECONDS * 1e6
    ):
        seconds = (end - start) / 1e6
    fail_type, fail_reason = _failure(body)
    return OutsideCompile(line, seconds, fail_type, fail_reason)


def _failure(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The failure's exception type and reason that metrics give, as text (None: no failure)."""
    t, r = _text(body.get("fail_type")), _text(body.get("fail_reason"))
    if t is not None and (named := class_name(t)) is not None and named != t:
        t = named.rsplit(".", 1)[-1]  # torch 2.4 logs "<class 'torch._dynamo.exc.X'>", later "X"
    return (NO_FAIL_TYPE if t == "" else t), r


def _text(v: Any) -> str | None:
    return v if v is None or isinstance(v, str) else repr(v)
