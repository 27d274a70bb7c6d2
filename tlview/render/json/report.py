"""The machine format `tlview.report/2`: written compile by compile, so memory stays flat.

`compiles` holds what torch counts as compiles (the headline's count), each with the attempts
before it that restarted (`attempts`); `outside` holds each log's records outside any compile."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

import orjson

from tlview.analyze.compiles import Analysis, Break
from tlview.analyze.context import counted_before
from tlview.analyze.names import picker
from tlview.analyze.summary import Overview, Tally
from tlview.dumps import dumps
from tlview.index.dims import DynamicDims, dynamic_dims, input_symbols
from tlview.index.recompiles import limit_text
from tlview.model import (
    TENSOR_DEFAULTS,
    Compile,
    CompileId,
    Event,
    ExportIssue,
    Input,
    Kernel,
    OutsideCompile,
    Payload,
    Report,
    StackFrame,
    Symbol,
    TensorDesc,
)
from tlview.render import InProcess, Options, Split, split_of
from tlview.render.json.facts import compile_facts, log_owners, stats_facts
from tlview.render.json.passes import compile_keys
from tlview.render.json.vllm import vllm_keys
from tlview.runtime.output import Output
from tlview.strings import TABLE, Table
from tlview.version import __version__

Ref = Callable[[str | None], Any]  # a string as written: itself, or a reference to the table


def _same(s: str | None) -> str | None:
    return s


FORMAT = "tlview.report/2"
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
        "md5_ok": p.ok if p.checked else None,  # None: not checked (docs/formats.md)
    }
    if p.encoding:
        d["encoding"] = p.encoding
    if p.meta:
        d["meta"] = p.meta
    if p.subgraph is not None:
        d["subgraph"] = p.subgraph
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


def collectives(a: Analysis) -> dict[str, Any] | None:
    """Collectives parity: what the schedule says, what the output code calls, and whether
    they match (None: the compile has neither)."""
    got = a.parity
    if got is None:
        return None
    return {
        "schedule": got.schedule,
        "code": got.code,
        "matched": got.matched,
        "problems": got.problems,
    }


def graph_break(b: Break, key: str, r: Ref) -> dict[str, Any]:
    """A graph break in words: its title, what torch says it is about, its hints, its debug
    context and the user calls that led to it (as the terminal shows them); `attempt`, the
    key of the attempt that logged it (one that restarted, or the compile's own)."""
    return {
        "attempt": b.attempt or key,
        "reason": b.reason,
        "title": b.title,
        "where": b.where,
        "log_line": b.line,
        "explanation": b.explanation,
        "hints": list(b.hints),
        "context": b.context,
        "callers": [frame(f, r) for f in b.callers],
    }


def _ids(cid: CompileId | None) -> tuple[str | None, int, int | None, int | None, int, int | None]:
    """(compile id as torch writes it, run, frame, frame compile, attempt, compiled-autograd id)."""
    if cid is None:
        return None, 1, None, None, 0, None
    return cid.torch_name, cid.run + 1, cid.frame, cid.frame_compile, cid.attempt, cid.autograd


def symbol(s: Symbol, r: Ref) -> dict[str, Any]:
    return {
        "kind": s.kind,
        "symbol": s.symbol,
        "value": s.value,
        "range": s.range,
        "source": s.source,
        "reason": s.reason,
        "where": frame(s.where, r),
    }


def kernel(k: Kernel, r: Ref) -> dict[str, Any]:
    code = [frame(f, r) for f in k.code]
    return {"graph": k.graph, "order": k.order, "kernel": k.name, "nodes": k.nodes, "code": code}


def export_issue(x: ExportIssue, r: Ref) -> dict[str, Any]:
    where = frame(x.where, r)
    return {
        "kind": x.kind,
        "log_line": x.line,
        "subject": x.subject,
        "detail": x.detail,
        "where": where,
    }


def outside(o: OutsideCompile) -> dict[str, Any]:
    return {
        "log_line": o.line,
        "seconds": o.seconds,
        "fail_type": o.fail_type,
        "fail_reason": o.fail_reason,
    }


def event(e: Event, r: Ref) -> dict[str, Any]:
    return {"kind": e.kind, "log_line": e.line, "summary": e.summary, "where": frame(e.where, r)}


def compile_dict(a: Analysis, table: Table | None = None) -> dict[str, Any]:
    """A compile as written; with `table`, a long file name after its first time as a reference
    (the one string a log holds once and a report as often as frames name it)."""
    c = a.compile
    r: Ref = _same if table is None else table.ref
    dynamic = dynamic_dims(c)
    compile_id, run, frame_id, frame_compile, attempt, autograd = _ids(c.id)
    d = {
        "compile_id": compile_id,
        "key": c.key,  # unique in a log: with the run, for a process that started ids over
        "run": run,
        "log": c.log,
        "pid": c.pid,
        "rank": c.rank,
        "status": c.status,
        "frame_id": frame_id,
        "frame_compile_id": frame_compile,
        "attempt": attempt,
        "compiled_autograd_id": autograd,
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
        "restarts": [x.text for x in a.restarts],
        "graph_breaks": [graph_break(b, c.key, r) for b in a.breaks],
        "stack": [frame(f, r) for f in c.stack],
        "inputs": [input_dict(i, dynamic) for i in c.inputs],
        "symbols": [symbol(s, r) for s in c.symbols],
        "cache": [
            {"cache": e.cache, "outcome": e.outcome, "key": e.key, "reason": e.reason}
            for e in c.cache
        ],
        "graphs": [payload(p) for p in c.graphs],
        "kernels": [kernel(k, r) for k in a.kernels],
        "guards": [payload(p) for p in c.guards],
        "artifacts": [payload(p) for p in c.artifacts],
        "collectives": collectives(a),
        "export_issues": [export_issue(x, r) for x in c.export_issues],
        "outside_compiles": [outside(o) for o in c.outside],
        "events": [event(e, r) for e in c.events],
        "events_dropped": c.events_dropped,
        "phases": [
            {"name": p.name, "start_us": p.start_us, "dur_us": p.dur_us, "depth": p.depth}
            for p in c.phases
        ],
        "metrics": c.metrics,
        "bwd_metrics": c.bwd_metrics,
        **compile_facts(a, r),  # where its time went, run time, CUDA graphs, origins, gaps
        # the attempts of this compile that restarted, in order, each as a compile is written
        "attempts": [compile_dict(e, table) for e in a.earlier],
    }
    d.update(compile_keys(a))  # regions, pass graphs and bytecode, where it has them
    return d


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
        **stats_facts(o.facts),  # where the run's compile time went, its CUDA graphs
    }


def head(report: Report, o: Overview) -> dict[str, Any]:
    owners = log_owners(o.facts)
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
                "owners": owners.get(li),  # who its records without a compile id belong to
            }
            for li, log in enumerate(report.logs)
        ],
        "stats": stats(o),
        "graph_breaks": [
            {
                "reason": s.reason,
                "title": s.title,
                "explanation": s.explanation,
                "hints": list(s.hints),
                "context": s.context,
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


@dataclass(slots=True)
class Part:
    """What writing a run of compiles counted and referred to, and the records outside any
    compile it met (written after the compiles, as `outside`)."""

    tally: Tally
    table: Table
    after: bool | None  # an item was written before this run's first (None: not known yet)
    outside: list[bytes] = field(default_factory=list)


class Items(NamedTuple):
    """The `compiles` array's items, written a compile at a time (a `render.Pass`). With
    `only`, just the compiles it picks are written; every one is counted."""

    report: Report
    table: Table
    only: Callable[[Compile], bool] | None = None

    def start(self, later: bool) -> Part:
        if later:  # its own keys: the two parts' tables are joined by `merge`
            return Part(Tally(self.report), Table("b"), None)
        return Part(Tally(self.report), self.table, False)

    def run(self, part: Part, compiles: Iterator[Analysis]) -> Iterator[bytes]:
        for a in compiles:
            if part.after is None:  # a later part: did the part before it write an item?
                part.after = counted_before(self.report, a.n)
            part.tally.add(a)
            c = a.compile
            if c.id is not None and not a.counted:
                continue  # an attempt that restarted: written in its compile's `attempts`
            if self.only is not None and not any(self.only(x.compile) for x in (a, *a.earlier)):
                continue
            d = compile_dict(a, part.table)
            item = dumps(d, option=_OPTS, default=str)
            if c.id is None:
                part.outside.append(item)
                continue
            yield b"," + item if part.after else item
            part.after = True

    def merge(self, part: Part, later: Part) -> None:
        part.tally.merge(later.tally)
        part.table.merge(later.table.entries)
        part.outside += later.outside


def stream(
    report: Report,
    out: IO[bytes],
    extra: dict[str, Any] | None = None,
    only: Callable[[Compile], bool] | None = None,
    split: Split | None = None,
) -> Overview:
    """Write the report in one pass: compiles go out one at a time, the figures after them.
    `only`: list just the compiles it picks (`--compile-id`); the figures count them all.

    Returns the figures, so a gate (`--fail-on`) needs no second pass."""
    table = Table()
    out.write(b'{"format":' + orjson.dumps(FORMAT) + b',"compiles":[')
    split = InProcess(report) if only is not None else split_of(report, split)
    part = split.write(Items(report, table, only), out)
    o = part.tally.done()
    top = head(report, o)
    del top["format"]
    if extra:
        top.update(extra)
    top.setdefault("divergence", [])
    top.update(vllm_keys(o.vllm))
    if table.entries:  # only then: a report of no long repeated string is as it always was
        top[TABLE] = table.entries
    outside = b'"outside":[' + b",".join(part.outside) + b"],"
    out.write(b"]," + outside + dumps(top, option=_OPTS)[1:] + b"\n")
    return o


def write(report: Report, out: Output, opts: Options, split: Split | None = None) -> Overview:
    """The report as `tlview.report/2` (the renderer of `--format json`)."""
    with out.open() as f:
        return stream(report, f, only=picker(opts.compile_id), split=split)
