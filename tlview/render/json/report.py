"""The machine format `tlview.report/1`: written compile by compile, so memory stays flat."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO, Any

import orjson

from tlview import __version__
from tlview.analyze.collectives import parity
from tlview.analyze.names import picker
from tlview.analyze.summary import Overview, Tally, break_title, kernels
from tlview.dumps import dumps
from tlview.index.dims import DynamicDims, dynamic_dims, input_symbols
from tlview.index.recompiles import limit_text
from tlview.model import TENSOR_DEFAULTS, Compile, Input, Payload, Report, StackFrame, TensorDesc
from tlview.render import Options
from tlview.runtime import halves
from tlview.runtime.output import Output
from tlview.strings import TABLE, Table

Ref = Callable[[str | None], Any]  # a string as written: itself, or a reference to the table


def _same(s: str | None) -> str | None:
    return s


FORMAT = "tlview.report/1"
_OPTS = orjson.OPT_NON_STR_KEYS


def frame(f: StackFrame | None, r: Ref = _same) -> dict[str, Any] | None:
    if f is None:
        return None
    return {"file": r(f.file), "line": f.line, "name": f.name, "loc": f.loc}


def tensor(t: TensorDesc) -> dict[str, Any]:
    """A described tensor's fields as logged, with the defaults `as_json` left out put back."""
    return {
        "tensor_id": t.id,
        "size": t.size,
        "stride": t.stride,
        "storage_offset": t.storage_offset,
        "dtype": t.fields.get("dtype"),
        "device": t.device,
        "layout": t.get("layout"),
        "requires_grad": t.flag("requires_grad"),
        "is_leaf": t.flag("is_leaf"),
        "is_parameter": t.flag("is_parameter"),
        "is_view": t.flag("is_view"),
        "type": t.type_name,
        "fields": t.fields,
    }


def inner_tensor(t: TensorDesc, describer: int) -> dict[str, Any]:
    d = tensor(t)
    d["storage"] = None if t.storage is None else f"{describer}:{t.storage}"
    return d


def input_dict(i: Input, dynamic: DynamicDims) -> dict[str, Any]:
    t = i.tensor
    f = t.fields  # read directly (as TensorDesc.flag and .get do): this runs for every input
    symbols = input_symbols(i, dynamic) if dynamic else None
    return {
        "sources": i.sources,
        "describer": i.describer,  # the fake mode that described it (several: exports in -/-)
        "size": t.size,
        # per dim, the symbol the graph took it as (null: static); null when none was
        "size_symbols": [symbols.get(k) for k in range(len(t.size or []))] if symbols else None,
        "stride": t.stride,
        "storage_offset": t.storage_offset,
        "dtype": f.get("dtype"),
        "device": t.device,
        "storage": i.storage_key,
        "storage_bytes": None if i.storage is None else i.storage.size,
        "alias_group": i.alias_group,
        "requires_grad": bool(f.get("requires_grad")),
        "is_parameter": bool(f.get("is_parameter")),
        "is_leaf": bool(f.get("is_leaf")),
        "is_view": bool(f.get("is_view")),
        "layout": f.get("layout", TENSOR_DEFAULTS["layout"]),
        "type": t.type_name if "type" in f else None,
        "base": None if i.base is None else i.base.id,
        "grad": None if i.grad is None else i.grad.id,
        # each inner tensor's storage key, as `storage` names them: sharing through them shows
        "inner": {k: inner_tensor(v, i.describer) for k, v in i.inner.items()} if i.inner else {},
        "tensor_id": t.id,
        "describer_id": i.describer,
        "superseded": i.superseded,
        "notes": i.notes,
        "fields": f,
    }


def payload(p: Payload) -> dict[str, Any]:
    d: dict[str, Any] = {
        "kind": p.kind,
        "line": p.line,
        "bytes": p.bytes,
        "lines": p.lines,
        "md5": p.md5,
        "md5_ok": p.ok,
    }
    if p.encoding:
        d["encoding"] = p.encoding
    if p.meta:
        d["meta"] = p.meta
    if p.text is not None:
        d["text"] = p.text
        d["cut_bytes"] = p.cut
    return d


def recompile(c: Compile) -> dict[str, Any] | None:
    """Why this compile of a frame happened again (index/recompiles.py), or None for a first compile."""
    r = c.recompile
    if r is None:
        return None
    return {
        "previous": r.previous,
        "reasons": r.reasons,
        "input_changes": [
            {"source": x.source, "field": x.field, "before": x.before, "after": x.after}
            for x in r.input_changes
        ],
        "inputs_compared": r.compared,
        "limit_hit": r.limit_hit,
        "limit": limit_text(c),
        "retry": c.is_retry,  # nothing was cached before it: not counted as a recompile
    }


def collectives(c: Compile) -> dict[str, Any] | None:
    """Collectives parity: what the schedule says, what the output code calls, and whether
    they match (None: the compile has neither)."""
    got = parity(c)
    if got is None:
        return None
    return {
        "schedule": got.schedule,
        "code": got.code,
        "matched": got.matched,
        "problems": got.problems,
    }


def compile_dict(c: Compile, table: Table | None = None) -> dict[str, Any]:
    """A compile as written; with `table`, a long file name after its first time as a reference
    (the one string a log holds once and a report as often as frames name it)."""
    r: Ref = _same if table is None else table.ref
    dynamic = dynamic_dims(c)
    cid = c.id
    return {
        "compile_id": None if cid is None else cid.torch_name,
        "key": c.key,  # unique in a log: with the run, for a process that started ids over
        "run": 1 if cid is None else cid.run + 1,
        "log": c.log,
        "pid": c.pid,
        "rank": c.rank,
        "status": c.status,
        "frame_id": None if cid is None else cid.frame,
        "frame_compile_id": None if cid is None else cid.frame_compile,
        "attempt": 0 if cid is None else cid.attempt,
        "compiled_autograd_id": None if cid is None else cid.autograd,
        "function": c.function,
        "file": r(c.file),
        "line": c.source_line,
        "first_log_line": c.first_log_line,
        "last_log_line": c.last_log_line,
        "start": c.start,
        "end": c.end,
        "compile_time_s": c.compile_time_s,
        "graph_ops": c.graph_ops,
        "fail_type": c.fail_type,
        "fail_reason": c.fail_reason,
        "fail_where": c.fail_where,
        "restart_reasons": c.restart_reasons,
        "recompile_reasons": c.recompile_reasons,
        "recompile": recompile(c),
        "graph_breaks": [
            {
                "reason": g.reason,
                "title": break_title(g.reason),
                "where": g.where,
                "log_line": g.line,
            }
            for g in c.graph_breaks
        ],
        "stack": [frame(f, r) for f in c.stack],
        "inputs": [input_dict(i, dynamic) for i in c.inputs],
        "symbols": [
            {
                "kind": s.kind,
                "symbol": s.symbol,
                "value": s.value,
                "range": s.range,
                "source": s.source,
                "reason": s.reason,
                "where": frame(s.where, r),
            }
            for s in c.symbols
        ],
        "cache": [
            {"cache": e.cache, "outcome": e.outcome, "key": e.key, "reason": e.reason}
            for e in c.cache
        ],
        "graphs": [payload(p) for p in c.graphs],
        "kernels": [
            {
                "graph": k.graph,
                "order": k.order,
                "kernel": k.name,
                "nodes": k.nodes,
                "code": [frame(f, r) for f in k.code],
            }
            for k in kernels(c)
        ],
        "guards": [payload(p) for p in c.guards],
        "artifacts": [payload(p) for p in c.artifacts],
        "collectives": collectives(c),
        "export_issues": [
            {
                "kind": x.kind,
                "log_line": x.line,
                "subject": x.subject,
                "detail": x.detail,
                "where": frame(x.where, r),
            }
            for x in c.export_issues
        ],
        "outside_compiles": [
            {
                "log_line": o.line,
                "seconds": o.seconds,
                "fail_type": o.fail_type,
                "fail_reason": o.fail_reason,
            }
            for o in c.outside
        ],
        "events": [
            {
                "kind": e.kind,
                "log_line": e.line,
                "summary": e.summary,
                "where": frame(e.where, r),
            }
            for e in c.events
        ],
        "events_dropped": c.events_dropped,
        "phases": [
            {"name": p.name, "start_us": p.start_us, "dur_us": p.dur_us, "depth": p.depth}
            for p in c.phases
        ],
        "metrics": c.metrics,
        "bwd_metrics": c.bwd_metrics,
    }


def stats(o: Overview) -> dict[str, Any]:
    return {
        "logs": o.logs,
        "lines": o.lines,
        "records": o.records,
        "bad_lines": o.bad_lines,
        "unknown_kinds": o.unknown_kinds,
        "kinds": o.kinds,
        "compiles": o.compiles,
        "by_status": o.by_status,
        "graph_breaks": o.graph_breaks,
        "recompiles": o.recompiles,
        "failures": o.failures,
        "restarts": o.restarts,
        "incomplete": o.incomplete,
        "export_issues": o.export_issues,
        # compiles dynamo did not start (AOTInductor, export), with no compile id: not counted
        # in "compiles" and their time not in "compile_time_s"
        "outside_compiles": o.outside,
        "outside_compile_time_s": round(o.outside_s, 6) if o.outside_timed else None,
        # null when no compile logged its time (never finished, or a torch that logs none)
        "compile_time_s": round(o.compile_time_s, 6) if "total" in o.phases else None,
        "compile_time_by_phase_s": {k: round(v, 6) for k, v in o.phases.items()},
        "slowest_compiles": [
            {
                "compile": s.ref,
                "function": s.function,
                "phases_s": {k: round(v, 6) for k, v in s.phases.items()},
            }
            for s in o.slowest
        ],
        "cache": o.cache,
        "inputs": o.inputs,
        "first_time": o.first_time,
        "last_time": o.last_time,
    }


def head(report: Report, o: Overview) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "tlview_version": __version__,
        "path": report.path,
        "torch_version": report.torch_version,
        "ranks": report.ranks,
        "divergence": [
            {"kind": d.kind, "ranks": d.ranks, "processes": d.processes, "detail": d.detail}
            for d in report.divergence
        ],
        "logs": [
            {
                "name": log.name,
                "path": log.path,
                "pid": log.pid,
                "rank": log.rank,
                "rank_from": log.rank_from,
                "process": log.process or None,
                "torch_version": log.torch_version,
                "size": log.size,
                "lines": log.lines,
                "records": log.records,
                "bad_lines": log.bad_count,
                "first_time": log.first_time,
                "last_time": log.last_time,
                "notes": log.notes,
            }
            for log in report.logs
        ],
        "stats": stats(o),
        "graph_breaks": [
            {
                "reason": s.reason,
                "title": break_title(s.reason),
                "count": s.count,
                "where": s.where,
                "compiles": s.compiles,
            }
            for s in o.breaks
        ],
        "bad_lines": [
            {"log": b.log, "line": b.line, "reason": b.reason}
            for log in report.logs
            for b in log.bad_lines
        ],
        "notes": report.notes,
    }


def _compiles(
    compiles: Iterable[Compile],
    out: IO[bytes],
    tally: Tally,
    after: bool,
    table: Table,
    only: Callable[[Compile], bool] | None = None,
) -> Tally:
    """Write compiles as array items (`after`: some were written before them); count them.
    With `only`, write just the compiles it picks (every one is still counted)."""
    for c in compiles:
        tally.add(c)
        if only is not None and not only(c):
            continue
        if after:
            out.write(b",")
        after = True
        out.write(dumps(compile_dict(c, table), option=_OPTS, default=str))
    return tally


def stream(
    report: Report,
    out: IO[bytes],
    extra: dict[str, Any] | None = None,
    only: Callable[[Compile], bool] | None = None,
) -> Overview:
    """Write the report in one pass: compiles go out one at a time, the figures after them.
    `only`: list just the compiles it picks (`--compile-id`); the figures count them all.

    Returns the figures, so a gate (`--fail-on`) needs no second pass."""
    tally = Tally(report)
    table = Table()
    out.write(b'{"format":' + orjson.dumps(FORMAT) + b',"compiles":[')
    cut = None if only is not None else halves.middle(halves.costs(report))
    if cut is None:
        _compiles(report.compiles, out, tally, False, table, only)
    else:
        rest = cut

        def job(f: IO[bytes]) -> tuple[Tally, dict[str, str]]:
            mine = Table("b")  # its own keys: the two halves' tables are joined below
            return _compiles(halves.compiles(report, rest), f, Tally(report), True, mine), (
                mine.entries
            )

        later = halves.Later(job)
        _compiles(halves.compiles(report, 0, cut), out, tally, False, table)
        ok, value = later.result()
        if ok:
            later.copy_to(out)
            tally.merge(value[0])
            table.merge(value[1])
        else:
            _compiles(halves.compiles(report, cut), out, tally, True, table)
    o = tally.done()
    top = head(report, o)
    del top["format"]
    if extra:
        top.update(extra)
    top.setdefault("divergence", [])
    if table.entries:  # only then: a report of no long repeated string is as it always was
        top[TABLE] = table.entries
    out.write(b"]," + dumps(top, option=_OPTS)[1:] + b"\n")
    return o


def write(report: Report, out: Output, opts: Options) -> Overview:
    """The report as `tlview.report/1` (the renderer of `--format json`)."""
    with out.open() as f:
        return stream(report, f, only=picker(opts.compile_id))
