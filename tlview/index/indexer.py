"""Group a stream of records into compiles: status, stacks, graphs, breaks, symbols, inputs."""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tlview.index import inputs as inputs_mod
from tlview.index.digests import artifact_meta, graph_md5
from tlview.index.keep import Keep as Keep  # its old home, until replay/ imports index.keep
from tlview.index.kinds import (
    BWD_FIELDS,
    CHROMIUM_FIELDS,
    CONTEXT_INTS,
    EVENT_KINDS,
    FRAME_FIELDS,
    GRAPH_KINDS,
    GUARD_KINDS,
    IN_FRAME,
    ISSUE_FIELDS,
    ISSUE_KINDS,
    MAX_EVENTS,
    METRIC_FIELDS,
    METRICS_KINDS,
    SYMBOL_FIELDS,
    SYMBOL_KINDS,
    TIME_FIELDS,
    count_kind,
    is_int,
    json_of,
    parse_id,
    peek,
    wrong_fields,
)
from tlview.index.recompiles import explain_frame
from tlview.model import (
    ID_TEXT,
    PHASES,
    BadLine,
    CacheEvent,
    Compile,
    CompileId,
    Event,
    ExportIssue,
    GraphBreak,
    InputSet,
    LogIndex,
    OutsideCompile,
    Payload,
    Phase,
    Provenance,
    StackFrame,
    StorageDesc,
    Symbol,
    TensorDesc,
    class_name,
    seconds_of,
)
from tlview.parse import MAX_BAD_KEPT, Record
from tlview.runtime.store import SHARED_MIN, CompileList, Facts, OpenCompiles, Spilled, Strings

_CACHE_ARTIFACT = re.compile(r"(?P<cache>.+)_cache_(?P<outcome>hit|miss|bypass)")
_BREAK_AT = re.compile(r"Graph break in user code at (\S+:\d+)")
# Where older torch (2.6 and before) starts a graph break's own words, under the line above.
_OLD_REASON = re.compile(r"^Reason: ", re.M)
_RANK_IN_NAME = re.compile(r"rank_(\d+)")
_RUNNABLE_VERSION = re.compile(rb"^# torch version: ([\w.+-]{1,64})$", re.M)
# A compile's failure whose exception type was logged as "" (torch writes null for no failure)
NO_FAIL_TYPE = "(exception type not logged)"
CLOSED_SHIFT = 20  # a later part's phase depth carries its count of earlier ends above this
MAX_DESCRIBED = 100_000  # describe_tensor records kept per describer and compile
KEEP_DESCRIBERS = 4  # describers whose tensors stay at hand for cross-compile references


@dataclass(slots=True)
class OpenState:
    """Per-compile state needed only while reading."""

    chromium: list[tuple[str, float, int]] = field(default_factory=list)  # open B events


class Indexer:
    """Builds the compile index of one process's records, as they stream past."""

    def __init__(self, log: LogIndex, keep: Keep | None = None) -> None:
        self.log = log
        self.keep = keep or Keep()
        self.strings: dict[int, str] = {}
        self.shared = Strings()  # long strings kept once and pickled by reference
        self.compiles = OpenCompiles()
        self.open: dict[CompileId | None, OpenState] = {}
        # The last few describers' tensors and storages, for sources and links that name a
        # tensor described under another compile id (describers are process-wide).
        self.tensors: OrderedDict[int, dict[int, TensorDesc]] = OrderedDict()
        self.storages: OrderedDict[int, dict[int, StorageDesc]] = OrderedDict()
        self.started: set[CompileId | None] = set()  # compiles with a dynamo_start record
        # torch._dynamo.reset() starts compile ids over: a dynamo_start for an id already
        # started begins the process's next run, and ids from there on carry its number.
        self.run = 0
        self.in_run: dict[CompileId, CompileId] = {}  # id as logged -> id in the current run
        self.ended: set[CompileId] = set()  # compiles with compilation_metrics, this run
        self.fallback_strings: Callable[[int], str | None] | None = None
        self.interned: dict[str, str] = {}
        # One copy of each stack frame: every compile of a frame, and every recompile, logs the
        # same stack, and the final pass keeps each compile's (store.Facts).
        self.frames: dict[StackFrame, StackFrame] = {}
        # Reading a later part of a split log: events that end here began in the part before.
        self.part = False
        self.unmatched: list[tuple[CompileId | None, str, float]] = []
        self.closed: dict[CompileId | None, int] = {}  # unmatched ends so far, per compile
        # Reading a later part: each compile's first metrics as the event it is to one reader
        # when the part before has metrics for the compile too (see merge_compile).
        self.metrics_events: dict[CompileId | None, Event] = {}
        self.bad_at = 0  # the line of the last bad line

    # -- helpers --------------------------------------------------------------------------
    def bad(self, rec: Record, reason: str) -> None:
        kept = self.log.bad_lines
        if rec.line == self.bad_at:  # one line is one bad line, whatever is wrong in it
            if kept and kept[-1].line == rec.line:
                kept[-1] = BadLine(self.log.name, rec.line, f"{kept[-1].reason}; {reason}")
            return
        self.bad_at = rec.line
        add_bad(self.log, BadLine(self.log.name, rec.line, f"{rec.kind}: {reason}"))

    def intern(self, s: str) -> str:
        """One copy of each repeated string (configs, versions, reprs) across compiles."""
        if len(s) > SHARED_MIN:
            return self.shared.intern(s)
        return self.interned.setdefault(s, s)

    def compile_for(self, rec: Record, cid: CompileId | None) -> Compile:
        c = self.compiles.get(cid)
        if c is None:
            c = Compile(id=cid, log=self.log.name, pid=self.log.pid, first_line=rec.line)
            c.start = rec.time
            if cid is None:
                c.status = "outside"
            self.compiles.put(cid, c)
        c.last_line = rec.line
        c.end = rec.time
        if rec.rank is not None and c.rank is None:
            c.rank = rec.rank
        return c

    def filename(self, v: Any) -> str:
        if isinstance(v, str):
            return v
        if is_int(v):
            name = self.strings.get(v)
            if name is None and self.fallback_strings is not None:
                name = self.fallback_strings(v)
            return name if name is not None else f"<file {v}>"
        return "?"

    def stack(self, v: Any, rec: Record | None = None, field: str = "stack") -> list[StackFrame]:
        """The frames of a logged stack; with `rec`, a frame of the wrong shape is a bad line."""
        if not isinstance(v, list):
            if v is not None and rec is not None:
                self.bad(rec, f"{field} is not a list of frames: {peek(v)}")
            return []
        out = []
        problem = None
        for k, fr in enumerate(v):
            if not isinstance(fr, dict):
                problem = problem or f"{field}[{k}] is not a frame object: {peek(fr)}"
                continue
            line, loc, name = fr.get("line"), fr.get("loc"), fr.get("name", "?")
            problem = problem or wrong_fields(fr, FRAME_FIELDS, f"{field}[{k}].", IN_FRAME)
            sf = StackFrame(
                self.filename(fr.get("filename")),
                line if isinstance(line, int) and not isinstance(line, bool) else 0,
                name if isinstance(name, str) else "?",
                loc if isinstance(loc, str) else None,
            )
            out.append(self.frames.setdefault(sf, sf))
        if problem is not None and rec is not None:
            self.bad(rec, problem)
        return out

    def user_frame(self, v: Any, rec: Record | None = None) -> StackFrame | None:
        """The innermost frame of a stack that is not torch's own code."""
        frames = self.stack(v, rec)
        return innermost_user(frames) or (frames[0] if frames else None)

    def payload(
        self,
        rec: Record,
        kind: str,
        c: Compile,
        meta: dict[str, Any] | None = None,
        keep: bool = True,
    ) -> Payload:
        size = len(rec.payload or b"")
        limit = (
            self.keep.take(kind, c.key, size, rec.line) if keep and rec.payload is not None else 0
        )
        text = rec.text(limit) if limit else None
        enc = rec.body.get("encoding") if isinstance(rec.body, dict) else None
        return Payload(
            kind=kind,
            line=rec.line,
            bytes=size,
            lines=rec.payload_lines,
            md5=rec.meta.get("has_payload")
            if isinstance(rec.meta.get("has_payload"), str)
            else None,
            ok=rec.payload_ok,
            encoding=enc if isinstance(enc, str) else None,
            text=text,
            cut=max(0, size - limit) if text is not None else 0,
            meta=meta,
            masked_md5=graph_md5(kind, rec.payload) if self.keep.ranks else None,
        )

    # -- records --------------------------------------------------------------------------
    def add(self, rec: Record) -> None:
        log = self.log
        log.records += 1
        kind = rec.kind
        kinds = log.kinds
        if kind in kinds:
            kinds[kind] += 1
        else:
            count_kind(kinds, kind)
        if log.first_time is None:
            log.first_time = rec.time
        log.last_time = rec.time
        if rec.rank is not None and log.rank is None:
            log.rank = rec.rank
        ctx = rec.meta
        for key in CONTEXT_INTS:
            v = ctx.get(key)
            if v is not None and (type(v) is not int or v < 0):
                self.bad(rec, f"{key} is not a non-negative integer: {peek(v)}")
                break
        if kind == "str":
            self.on_str(rec)
            return
        cid = rec.compile_id
        if cid is None and ("frame_id" in ctx) != ("frame_compile_id" in ctx):
            # torch writes both or neither: with one, the record is read as outside a compile.
            self.bad(rec, "frame_id and frame_compile_id come together: one is missing")
        body = rec.body
        if kind in METRICS_KINDS and cid is None and isinstance(body, dict):
            cid = parse_id(body.get("compile_id"))
        if cid is not None:
            if self.run:
                cid = self.ran(cid)
            if kind == "dynamo_start" and cid in self.ended and cid in self.started:
                cid = self.next_run(cid)  # not a copy of the record: its compile had ended
        if kind == "chromium_event":
            self.on_chromium(rec, cid)
            return
        c = self.compile_for(rec, cid)
        if kind.startswith("describe_"):
            self.on_describe(rec, c)
        elif kind == "dynamo_start":
            self.started.add(cid)
            if isinstance(body, dict):
                c.stack = self.stack(body.get("stack"), rec)
            else:
                self.bad(rec, "expected an object with a stack")
        elif kind == "compilation_metrics":
            self.on_metrics(rec, c)
        elif kind == "compilation_metrics_runtime":
            self.on_runtime_metrics(rec, c)
        elif kind == "bwd_compilation_metrics":
            if isinstance(body, dict) and "is_forward" in body and body["is_forward"] is None:
                # torch 2.6 names a frame's metrics so when its compile stopped before saying
                # it was a forward one (recompile limit, error_on_recompile): they are its own.
                self.on_metrics(rec, c)
            elif isinstance(body, dict):
                body, wrong_time = durations(body)
                problem = wrong_fields(body, BWD_FIELDS) or wrong_time
                if problem:
                    self.bad(rec, problem)
                c.bwd_metrics.append(self.small_dict(body))
            else:
                self.bad(rec, "expected an object")
        elif kind == "artifact":
            self.on_artifact(rec, c)
        elif kind in GRAPH_KINDS:
            meta = None
            if isinstance(body, dict) and body:
                meta = {k: v for k, v in body.items() if k != "stack"}
            c.graphs.append(self.payload(rec, kind, c, meta))
            if (
                kind == "dynamo_output_graph"
                and c.stack == []
                and isinstance(rec.meta.get("stack"), list)
            ):
                c.stack = self.stack(rec.meta["stack"])
        elif kind in GUARD_KINDS:
            c.guards = self.payload(rec, kind, c)
        elif kind in SYMBOL_KINDS:
            self.on_symbol(rec, c)
        else:
            if kind not in EVENT_KINDS:
                count_kind(log.unknown_kinds, kind)
            self.event(rec, c, kind, _summary(body))
            if kind in ISSUE_KINDS:
                self.on_issue(rec, c, kind)

    def ran(self, cid: CompileId) -> CompileId:
        """A logged id as the id of its compile in the current run."""
        got = self.in_run.get(cid)
        if got is None:
            got = self.in_run[cid] = cid.in_run(self.run)
        return got

    def next_run(self, cid: CompileId) -> CompileId:
        """Begin the process's next run at the dynamo_start of `cid`, started and ended before."""
        self.run += 1
        self.in_run.clear()
        self.ended.clear()
        new = self.ran(cid.in_run(0))
        # Events begun since the last compile of `cid` ended (dynamo, entire_frame_compile)
        # are this compile's: they come before its dynamo_start.
        st = self.open.pop(cid, None)
        if st is not None:
            self.open[new] = st
        return new

    def event(self, rec: Record, c: Compile, kind: str, summary: str, caller: bool = False) -> None:
        if len(c.events) >= MAX_EVENTS:
            c.events_dropped += 1
            return
        c.events.append(self.as_event(rec, kind, summary, caller))

    def on_runtime_metrics(self, rec: Record, c: Compile) -> None:
        """Compile work a compiled function did when it ran (its first call): an event of its
        compile, with its times. It is not the compile's own time, so no total counts it."""
        body = self.metrics_body(rec)
        if body is None:
            return
        times = [f"{name} {v:.3f} s" for name, metric in PHASES if (v := seconds_of(body, metric))]
        fwd = body.get("is_forward")
        said = "compile work at run time"
        if isinstance(fwd, bool):
            said += " (forward)" if fwd else " (backward)"
        self.event(rec, c, "compilation_metrics_runtime", ", ".join([said, *times]), caller=True)

    def on_issue(self, rec: Record, c: Compile, kind: str) -> None:
        """An export issue, told apart as torch's draft export tells them."""
        body = rec.body
        if not isinstance(body, dict):
            self.bad(rec, "expected an object")
            return
        problem = wrong_fields(body, ISSUE_FIELDS)
        if problem:
            self.bad(rec, problem)
            return
        if kind == "guard_on_data_dependent_error" and c.id is not None:
            return  # torch.compile breaks the graph there, and says so as a graph break
        if kind == "guard_added":
            # A guard export evaluated on an input's dynamic dim (it has sources; a runtime
            # assert has a provenance record of its own), outside any compile: export.
            # torch.compile adds such guards all the time, and says why it recompiled.
            if c.id is not None or body.get("prefix") != "eval":
                return
            if not body.get("symbol_to_sources"):
                return
        if len(c.export_issues) >= MAX_EVENTS:
            c.events_dropped += 1
            return
        subject = body.get("op" if kind.endswith("_fake_kernel") else "expr")
        if kind == "propagate_real_tensors_provenance":
            detail = (
                f"could not be decided from the symbols: the real tensors gave "
                f"{_opt_str(body.get('result'))}, asserts were added"
            )
        elif kind == "guard_on_data_dependent_error":
            detail = "could not be decided: it depends on the values of a tensor"
        elif kind == "guard_added":
            sources = body["symbol_to_sources"]
            named = ", ".join(f"{k} = {v}" for k, v in list(sources.items())[:4])
            detail = f"a guard on the input dims {named}: the exported program only takes those"
        elif kind == "missing_fake_kernel":
            detail = "this custom op has no fake kernel (torch.library.register_fake)"
        else:
            reason = (_opt_str(body.get("reason")) or "").strip()
            detail = reason or "its fake kernel does not match the real one"
        user = self.stack(body.get("user_stack"))
        c.export_issues.append(
            ExportIssue(
                ISSUE_KINDS[kind],
                rec.line,
                subject[:300] if isinstance(subject, str) else "?",  # missing: types checked
                detail[:1000],
                user_line(user),
            )
        )

    def as_event(
        self, rec: Record, kind: str, summary: str | dict[str, Any], caller: bool = False
    ) -> Event:
        """The record as an event, at its user_stack's frame; with `caller`, else at the user's
        innermost frame of the record's own stack (torch's frames left out)."""
        if isinstance(summary, dict):
            summary = metrics_summary(summary)
        where = None
        if isinstance(rec.body, dict):
            user = self.stack(rec.body.get("user_stack"), rec, "user_stack")
            where = user_line(user)
        if where is None and caller:
            frames = self.stack(rec.meta.get("stack"), rec)
            where = innermost_user(frames)
        return Event(kind, rec.line, summary, where)

    def small_dict(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            k: self.intern(v) if isinstance(v, str) and len(v) > 64 else v for k, v in body.items()
        }

    def on_str(self, rec: Record) -> None:
        body = rec.body
        if (
            isinstance(body, list)
            and len(body) == 2
            and isinstance(body[0], str)
            and is_int(body[1])
        ):
            self.strings[body[1]] = body[0]
        else:
            self.bad(rec, "expected [file name, index]")

    def metrics_body(self, rec: Record) -> dict[str, Any] | None:
        """A metrics record's fields, without the times no clock gives; wrong ones said."""
        body = rec.body
        if not isinstance(body, dict):
            self.bad(rec, "expected an object")
            return None
        body, wrong_time = durations(body)
        problem = wrong_fields(body, METRIC_FIELDS) or wrong_time
        if problem:
            self.bad(rec, problem)
        return body

    def on_metrics(self, rec: Record, c: Compile) -> None:
        body = self.metrics_body(rec)
        if body is None:
            return
        if c.id is None:
            c.outside.append(_outside(rec.line, body))
        if c.metrics is not None:
            # A second metrics record for one id (records outside any compile): keep both.
            self.event(rec, c, "compilation_metrics", metrics_summary(body))
            return
        c.metrics = self.small_dict(body)
        if c.id is not None:
            self.ended.add(c.id)
            # A restart's earlier attempts logged no metrics of their own: they ended with it,
            # so their id starting again is a new run.
            i = c.id
            self.ended.update(
                CompileId(i.frame, i.frame_compile, a, i.autograd, i.run) for a in range(i.attempt)
            )
        if self.part:
            self.metrics_events[c.id] = self.as_event(rec, "compilation_metrics", body)
        fail_type, fail_reason = _failure(body)
        c.fail_type = fail_type or c.fail_type
        c.fail_reason = fail_reason or c.fail_reason
        ff, fl = body.get("fail_user_frame_filename"), body.get("fail_user_frame_lineno")
        if isinstance(ff, str):
            c.fail_where = f"{ff}:{fl}" if is_int(fl) else ff
        rr = body.get("restart_reasons")
        if isinstance(rr, list) and all(isinstance(r, str) for r in rr):
            c.restart_reasons = [str(r) for r in rr]
        if isinstance(body.get("co_name"), str):
            c.function = body["co_name"]
        if isinstance(body.get("co_filename"), str):
            c.file = body["co_filename"]
        if is_int(body.get("co_firstlineno")):
            c.firstline = body["co_firstlineno"]
        rec_reason = body.get("recompile_reason")
        if isinstance(rec_reason, str) and rec_reason and not c.recompile_reasons:
            c.recompile_reasons = split_reasons(rec_reason)

    def on_artifact(self, rec: Record, c: Compile) -> None:
        body = rec.body
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str):
            self.bad(rec, f"artifact without a name: name is {peek(name)}")
            name = "?"
        enc = body.get("encoding") if isinstance(body, dict) else None
        if enc is not None and not isinstance(enc, str):
            self.bad(rec, f"encoding is not a string: {peek(enc)}")
        if name == "torch_version":
            v = json_of(rec.payload)
            if isinstance(v, dict) and isinstance(v.get("pytorch_version"), str):
                self.log.torch_version = v["pytorch_version"]
            elif rec.payload_ok:
                got = v.get("pytorch_version") if isinstance(v, dict) else v
                self.bad(rec, f"torch_version: pytorch_version is not a string: {peek(got)}")
        elif name == "fx_graph_runnable" and self.log.torch_version is None and rec.payload:
            # torch 2.9 and older log no torch_version record; their runnable graphs name it.
            named = _RUNNABLE_VERSION.search(rec.payload, 0, 4096)
            if named:
                self.log.torch_version = named.group(1).decode("ascii")
        elif name in _PROVENANCE:
            got = _provenance(json_of(rec.payload), name)
            if got is None:
                self.bad(rec, f"{name} is not a JSON object of kernels")
            else:
                c.provenance.append(Provenance(rec.line, _PROVENANCE[name], got))
        elif name == "recompile_reasons":
            c.recompile_reasons, problem = _reasons(rec)
            if problem:
                self.bad(rec, problem)
            return
        elif name == "dynamo_graph_break_reason":
            c.graph_breaks.append(_graph_break(rec, self.intern))
            return
        elif name == "dynamo_error":
            c.artifacts.append(self.payload_always(rec, name, c, 20_000))
            return
        elif name == "make_fx_fail_partial" and c.id is None and len(c.export_issues) < MAX_EVENTS:
            # An export that failed while tracing: torch logs the graph traced until then.
            # (Inside a compile, the failure is the compile's own, with its reason.)
            frames = self.stack(rec.meta.get("stack"), rec)
            c.export_issues.append(
                ExportIssue(
                    "failed trace",
                    rec.line,
                    "make_fx",
                    "tracing stopped with an error; the graph traced until then is this "
                    "artifact (the error itself is not in the log)",
                    innermost_user(frames),
                )
            )
        m = _CACHE_ARTIFACT.fullmatch(name)
        if m:
            v = json_of(rec.payload)
            key = reason = None
            if isinstance(v, dict):
                key = v.get("key") if isinstance(v.get("key"), str) else None
                r = v.get("reason") or v.get("cache_bypass_reason")
                reason = r if isinstance(r, str) else None
            c.cache.append(CacheEvent(m.group("cache"), m.group("outcome"), key, reason))
        if name.endswith("graph") or name in (
            "fx_graph_runnable",
            "inductor_provenance_tracking_node_mappings",
        ):
            c.graphs.append(self.payload(rec, name, c))
        else:
            c.artifacts.append(self.payload(rec, name, c, artifact_meta(name, rec.payload)))

    def payload_always(self, rec: Record, kind: str, c: Compile, limit: int) -> Payload:
        """A payload whose text is always kept (errors), outside the budget."""
        p = self.payload(rec, kind, c, keep=False)
        if rec.payload is not None:
            n = max(limit, self.keep.payload_bytes)
            p.text = rec.text(n)
            p.cut = max(0, len(rec.payload) - n)
        return p

    def on_symbol(self, rec: Record, c: Compile) -> None:
        b = rec.body
        if not isinstance(b, dict):
            self.bad(rec, "expected an object")
            return
        problem = wrong_fields(b, SYMBOL_FIELDS, required=("symbol",))
        if problem:
            self.bad(rec, problem)
        user = self.stack(b.get("user_stack"), rec, "user_stack")
        where = user_line(user)
        kind = {
            "create_symbol": "created",
            "create_unbacked_symbol": "unbacked",
            "symbolic_shape_specialization": "specialized",
        }[rec.kind]
        src = b.get("source")
        if src is None and isinstance(b.get("sources"), list):
            src = ", ".join(str(s) for s in b["sources"])
        c.symbols.append(
            Symbol(
                kind=kind,
                symbol=str(b.get("symbol", "?")),
                value=_opt_str(b.get("val", b.get("value"))),
                range=_opt_str(b.get("vr")),
                source=_opt_str(src),
                reason=_opt_str(b.get("reason")),
                where=where,
                # Several fake modes in one compile (exports outside any compile, `-/-`): a
                # symbol is made while the tensors of the latest one are fakified.
                describer=c.input_sets[-1].describer if c.input_sets else None,
            )
        )

    def on_describe(self, rec: Record, c: Compile) -> None:
        b = rec.body
        if not isinstance(b, dict):
            self.bad(rec, "expected an object")
            return
        d, i = b.get("describer_id"), b.get("id")
        if (
            not isinstance(d, int)
            or not isinstance(i, int)
            or isinstance(d, bool)
            or isinstance(i, bool)
        ):
            self.bad(rec, "describer_id and id must be integers")
            return
        s = None
        for x in c.input_sets:
            if x.describer == d:
                s = x
                break
        if s is None:
            s = InputSet(describer=d, where=self.user_frame(rec.meta.get("stack"), rec))
            c.input_sets.append(s)
        if rec.kind == "describe_storage":
            size = b.get("size")
            if not (is_int(size) or isinstance(size, str) or size is None):
                self.bad(rec, f"storage size is not a number or expression: {peek(size)}")
                size = None
            st = StorageDesc(i, size, rec.line)
            self.describer(self.storages, d)[i] = st
            s.storages[i] = st
        elif rec.kind == "describe_tensor":
            if len(s.tensors) >= MAX_DESCRIBED:
                s.dropped += 1
                return
            problem = inputs_mod.check_tensor(b)
            if problem:
                self.bad(rec, problem)
            t = TensorDesc(i, inputs_mod.compact(b, self.intern), rec.line)
            self.describer(self.tensors, d)[i] = t
            s.tensors[i] = t
            self.borrow(s, t)
        elif rec.kind == "describe_source":
            if len(s.sources) >= MAX_DESCRIBED:
                s.dropped += 1
                return
            src = b.get("source")
            if not isinstance(src, str):
                self.bad(rec, "source is not a string")
                src = str(src)
            s.sources.append((i, src))
            if i not in s.tensors:
                known = self.tensors.get(d, {}).get(i)
                if known is not None:
                    s.tensors[i] = known
                    self.borrow(s, known)
        else:
            count_kind(self.log.unknown_kinds, rec.kind)

    def describer(self, table: OrderedDict[int, dict[int, Any]], d: int) -> dict[int, Any]:
        got = table.get(d)
        if got is None:
            got = table[d] = {}
            while len(table) > KEEP_DESCRIBERS:
                table.popitem(last=False)
        else:
            table.move_to_end(d)
        return got

    def borrow(self, s: InputSet, t: TensorDesc) -> None:
        """Copy into a set the storage and linked tensors its tensor names from elsewhere."""
        d = s.describer
        sid = t.storage
        if sid is not None and sid not in s.storages:
            st = self.storages.get(d, {}).get(sid)
            if st is not None:
                s.storages[sid] = st
        if inputs_mod.LINKING.isdisjoint(t.fields):
            return  # most tensors name no other tensor
        for link in (*inputs_mod.links(t), *t.attrs.values()):
            if link not in s.tensors:
                other = self.tensors.get(d, {}).get(link)
                if other is not None:
                    s.tensors[link] = other
                    self.borrow(s, other)

    def on_chromium(self, rec: Record, cid: CompileId | None) -> None:
        ev = json_of(rec.payload)
        if not isinstance(ev, dict):
            if rec.payload_ok:
                self.bad(rec, "payload is not a JSON event")
            return
        problem = wrong_fields(ev, CHROMIUM_FIELDS, required=("name", "ph", "ts"))
        if problem:
            self.bad(rec, problem)
        args = ev.get("args")
        if cid is None and isinstance(args, dict):
            cid = parse_id(args.get("compile_id"))
            if cid is not None and self.run:
                cid = self.ran(cid)
        c = self.compile_for(rec, cid)
        name, ph, ts = ev.get("name"), ev.get("ph"), ev.get("ts")
        if not isinstance(name, str) or not isinstance(ts, int | float) or isinstance(ts, bool):
            return
        st = self.open.setdefault(cid, OpenState())
        if ph == "B":
            if len(st.chromium) >= MAX_EVENTS:  # begun and never ended: a hostile log
                c.events_dropped += 1
                return
            depth = len(st.chromium)
            if self.part and cid in self.closed:
                depth += self.closed[cid] << CLOSED_SHIFT  # see merge()
            st.chromium.append((name, float(ts), depth))
        elif ph == "E":
            if not self.end_event(cid, name, float(ts), c) and self.part:
                self.unmatched.append((cid, name, float(ts)))
                self.closed[cid] = self.closed.get(cid, 0) + 1
        elif ph == "i" and name.endswith("_cache_disabled") and len(c.cache) < MAX_EVENTS:
            # A cache turned off (force_disable_caches, or its config): an instant event only.
            reason = args.get("cache_bypass_reason") if isinstance(args, dict) else None
            cache = name[: -len("_cache_disabled")]
            c.cache.append(
                CacheEvent(cache, "disabled", None, reason if isinstance(reason, str) else None)
            )
        elif ph == "X":
            dur = ev.get("dur")
            add_phase(
                c, Phase(name, float(ts), float(dur) if isinstance(dur, int | float) else 0.0)
            )
        if not st.chromium:
            # Only compiles with begun, unended events stay here: the E lookup scans them.
            self.open.pop(cid, None)

    def end_event(
        self, cid: CompileId | None, name: str, ts: float, c: Compile | None = None
    ) -> bool:
        """Close the begun event `name` as a phase; False if nothing had begun it."""
        # An event begun before a restart (dynamo, entire_frame_compile) ends in a later
        # attempt: it belongs to the attempt where it began.
        owners = [cid]
        if cid is not None and cid.attempt:
            owners += [o for o in self.open if o is not None and o != cid and o.base == cid.base]
        for owner in owners:
            ost = self.open.get(owner)
            if ost is None:
                continue
            k = next(
                (k for k in range(len(ost.chromium) - 1, -1, -1) if ost.chromium[k][0] == name),
                None,
            )
            if k is not None:
                _, t0, depth = ost.chromium.pop(k)
                if not ost.chromium:
                    self.open.pop(owner, None)
                target = self.compiles.get(owner) or c
                if target is not None:
                    add_phase(target, Phase(name, t0, ts - t0, depth))
                return True
        return False

    # -- a log read in parts ----------------------------------------------------------------
    def merge(self, b: Indexer) -> None:
        """Take in what another reader found in the part of this log after ours."""
        la, lb = self.log, b.log
        la.records += lb.records
        for k, n in lb.kinds.items():
            la.kinds[k] = la.kinds.get(k, 0) + n
        for k, n in lb.unknown_kinds.items():
            la.unknown_kinds[k] = la.unknown_kinds.get(k, 0) + n
        la.first_time = la.first_time or lb.first_time
        la.last_time = lb.last_time or la.last_time
        la.rank = la.rank if la.rank is not None else lb.rank
        la.torch_version = la.torch_version or lb.torch_version
        la.bad_count += lb.bad_count
        la.bad_lines = (la.bad_lines + lb.bad_lines)[:MAX_BAD_KEPT]
        la.notes.extend(n for n in lb.notes if n not in la.notes)
        self.strings.update(b.strings)
        self.started |= b.started
        # Events begun in our part and still open are the outer ones of b's. b counted
        # depths from its own stack and noted how many of ours it had closed by then.
        deeper = {cid: len(st.chromium) for cid, st in self.open.items() if st.chromium}
        # How many of b's first k unmatched ends close one of ours: an end whose begin was lost
        # (a damaged record) closes nothing, as one reader finds.
        closes: dict[CompileId | None, list[int]] = {}
        names = {cid: [n for n, _, _ in st.chromium] for cid, st in self.open.items()}
        for cid, name, _ts in b.unmatched:
            open_here = names.get(cid, [])
            hit = name in open_here
            if hit:
                del open_here[len(open_here) - 1 - open_here[::-1].index(name)]
            counts = closes.setdefault(cid, [0])
            counts.append(counts[-1] + hit)

        def depth(cid: CompileId | None, d: int) -> int:
            closed, local = d >> CLOSED_SHIFT, d & ((1 << CLOSED_SHIFT) - 1)
            counts = closes.get(cid)
            if counts is not None:
                closed = counts[min(closed, len(counts) - 1)]
            return local + max(0, deeper.get(cid, 0) - closed)

        for cid in b.compiles:
            where, facts = b.compiles.entry(cid)
            if cid in deeper or cid in b.closed:
                if not isinstance(where, Compile):
                    where = where[0].load(*where[1:])
                where.phases = [
                    dataclasses.replace(p, depth=depth(cid, p.depth)) for p in where.phases
                ]
            if cid in self.compiles:
                mine = self.compiles.get(cid)
                assert mine is not None
                theirs = where if isinstance(where, Compile) else where[0].load(*where[1:])
                if cid not in b.started and mine.stack:
                    theirs.stack = []  # a graph's stack only fills in for a missing dynamo_start
                merge_compile(mine, theirs, b.metrics_events.get(cid))
            else:
                self.compiles.adopt(cid, where, facts)
        for cid, name, ts in b.unmatched:
            self.end_event(cid, name, ts)
        for cid, st in b.open.items():
            self.open.setdefault(cid, OpenState()).chromium.extend(
                (n, t, depth(cid, d)) for n, t, d in st.chromium
            )

    def __getstate__(self) -> dict[str, Any]:
        # Sent back by the reader of another part: what it keeps for cross-references while
        # reading is not needed any more.
        state = dict(self.__dict__)
        state["tensors"] = OrderedDict()
        state["storages"] = OrderedDict()
        state["interned"] = {}
        state["fallback_strings"] = None  # a closure over the reader's lookups
        return state

    # -- end of log -----------------------------------------------------------------------
    def finish(self) -> LogIndex:
        log = self.log
        for cid, st in self.open.items():
            c = self.compiles.get(cid) if st.chromium else None
            if c is not None:
                for name, t0, depth in st.chromium:
                    add_phase(c, Phase(name, t0, None, depth))
        self.open.clear()
        self.tensors.clear()
        self.storages.clear()
        if self.run:
            log.notes.append(
                f"this process started compile ids over {self.run} time(s) "
                "(torch._dynamo.reset()): the compiles of each later run are named ID@2, ID@3, ..."
            )
        if log.rank is None:
            m = _RANK_IN_NAME.search(log.name)
            if m:
                log.rank = int(m.group(1))
        # Statuses come from each compile's facts, so compiles already on disk stay there;
        # each is finished (inputs resolved) and explained when it is read back.
        out = CompileList(partial(finish_compile, log.rank), explain_frame)
        for frame_ids in _by_frame(self.compiles.keys()):
            entries: list[list[Compile | Spilled]] = []
            facts: list[list[Facts | None]] = []
            for attempt_ids in frame_ids:
                got = [self.compiles.entry(cid) for cid in attempt_ids]
                fs = [f for _, f in got]
                if attempt_ids != [None]:
                    _status(fs, self.started)
                entries.append([e for e, _ in got])
                facts.append(list(fs))
            if frame_ids != [[None]]:
                _same_code(facts)
            out.add_frame(entries, facts)
        log.compiles = out
        return log


# Compile fields set once from one record: the first part's value wins, else the later's.
_SET_ONCE = frozenset({"restart_reasons", "recompile_reasons", "inputs", "status"})


def merge_compile(a: Compile, b: Compile, metrics_event: Event | None = None) -> None:
    """Fold the later part `b` of one compile's records into `a`. When both parts have metrics
    (records outside any compile, a record written twice), b's are an event of `a`, as one
    reader keeps them (`metrics_event`), and what b took from them (function, failure, reasons)
    is dropped."""
    if a.metrics is not None and b.metrics is not None:
        b = dataclasses.replace(
            b,
            metrics=None,
            fail_type=None,
            fail_reason=None,
            fail_where=None,
            function=None,
            file=None,
            firstline=None,
            restart_reasons=[],
            recompile_reasons=[],
        )
        if metrics_event is not None:
            if len(a.events) + len(b.events) < MAX_EVENTS:
                b.events = sorted([*b.events, metrics_event], key=lambda e: e.line)
            else:
                b.events_dropped += 1
    for f in dataclasses.fields(Compile):
        name = f.name
        va, vb = getattr(a, name), getattr(b, name)
        if name in ("last_line", "end"):
            setattr(a, name, vb)
        elif name == "events_dropped":
            a.events_dropped = va + vb
        elif name == "input_sets":
            for sb in vb:
                sa = next((x for x in va if x.describer == sb.describer), None)
                if sa is None:
                    va.append(sb)
                    continue
                sa.storages.update(sb.storages)
                sa.tensors.update(sb.tensors)
                sa.sources.extend(sb.sources)
                sa.dropped += sb.dropped
                sa.where = sa.where or sb.where
        elif name in ("guards", "stack"):  # each dynamo_start and guards record replaces it
            setattr(a, name, vb or va)
        elif isinstance(va, list) and name not in _SET_ONCE:
            va.extend(vb)
        elif not va and vb:
            setattr(a, name, vb)


def finish_compile(rank: int | None, c: Compile) -> None:
    """Fill in what a compile gets from its log, and resolve its inputs."""
    if c.rank is None:
        c.rank = rank
    if c.function is None and c.stack:
        c.function = c.stack[-1].name
        c.file = c.file or c.stack[-1].file
        c.firstline = c.firstline or c.stack[-1].line
    for s in c.input_sets:
        s.superseded = c.status == "restarted"
    c.inputs = inputs_mod.resolve(c)
    # In time order (a phase is logged when it ends; a log read in parts ends some later).
    c.phases.sort(key=lambda p: (p.start_us, p.depth))


def _order(cid: CompileId | None) -> tuple[bool, tuple[int, ...]]:
    return (cid is not None, cid.sort_key if cid is not None else (0, 0, 0, 0))


def _by_frame(ids: Iterable[CompileId | None]) -> list[list[list[CompileId | None]]]:
    """Compile ids in order, as frames -> compiles -> attempts."""
    frames: dict[tuple[Any, ...], dict[CompileId | None, list[CompileId | None]]] = {}
    for cid in sorted(ids, key=_order):
        key = ("-",) if cid is None else (cid.run, cid.autograd, cid.frame)
        base = None if cid is None else cid.base
        frames.setdefault(key, {}).setdefault(base, []).append(cid)
    return [list(f.values()) for f in frames.values()]


def add_bad(log: LogIndex, bad: BadLine) -> None:
    log.bad_count += 1
    if len(log.bad_lines) < MAX_BAD_KEPT:
        log.bad_lines.append(bad)


def _name_alike(facts: list[Facts]) -> None:
    """Name the compiles of one code that logged no name of their own as the latest that did."""
    named = next((f.code for f in reversed(facts) if f.code[0] is not None), None)
    if named is not None:
        for f in facts:
            if f.code[0] is None:
                f.code = named


def _same_code(frame: list[list[Facts | None]]) -> None:
    """Every compile of a frame compiles one code object: one that logged neither a name nor
    a stack (dynamo gave up before tracing: the recompile limit) is named as the others."""
    every = [f for attempts in frame for f in attempts if f is not None]
    _name_alike([f for f in every if f.code[0] is not None or not f.stack])


INFERRED_LIMIT = "recompile limit (inferred)"  # fail_type of a compile torch did not start


def _status(attempts: list[Facts], started: set[CompileId | None]) -> None:
    """Set the status of a compile's attempts from their metrics and graph breaks."""
    attempts.sort(key=lambda c: c.id.attempt if c.id else 0)
    final = attempts[-1]
    broke = any(a.graph_breaks for a in attempts)
    for a in attempts[:-1]:
        a.status = "restarted"
    for a in attempts[1:]:
        if not a.stack:
            a.stack = attempts[0].stack
    # Every attempt compiles the same code: an attempt without metrics of its own (a restart)
    # is named as the final one's metrics name it. Its dynamo_start stack can end in the
    # caller instead (torch before 2.6 logged eval_frame's `_fn` there).
    _name_alike(attempts)
    for i, a in enumerate(attempts[:-1]):
        if i < len(final.restart_reasons) and not a.restart_reasons:
            a.restart_reasons = [final.restart_reasons[i]]
    if not broke and final.restart_reasons and not any(a.graph_breaks for a in attempts):
        # Logs without dynamo_graph_break_reason artifacts (older torch): the restart
        # reasons are the graph breaks.
        for r in final.restart_reasons:
            if not r.lower().startswith(("restart", "speculat")):
                final.graph_breaks.append(GraphBreak(r.strip(), None, final.first_line, r[:2000]))
        broke = bool(final.graph_breaks)
    if final.fail_type:
        final.status = "failed"
    elif not final.has_metrics:
        # No metrics: a compile dynamo started and never finished (a crashed run), or one
        # logged without dynamo_start/metrics: compiled autograd's graphs, and torch.export's
        # trace (strict: its dynamo graph; torch 2.15's non-strict: inputs, symbols, guards).
        if any(a.id in started for a in attempts):
            final.status = "incomplete"
        elif final.reasons_only:
            # torch 2.5 and older: dynamo logged why the frame would recompile, then compiled
            # nothing (no dynamo_start, no metrics): it had hit the frame's recompile limit.
            final.status = "failed"
            final.fail_type = INFERRED_LIMIT
            final.fail_reason = (
                "cache_size_limit reached: dynamo logged why the frame would recompile, then "
                "nothing more (torch 2.5 and older log no dynamo_start or metrics for a frame "
                "past its recompile limit; tlview infers it)"
            )
        elif final.graphs and final.id is not None and final.id.autograd is not None:
            final.status = "ok"
        else:
            final.status = "traced" if final.graphs or final.described else "incomplete"
    elif broke:
        final.status = "graph_break"
    elif final.graph_ops in (0, None) and not final.graphs:
        final.status = "empty"  # no ops, or none counted and no graph logged
    else:
        final.status = "ok"


def innermost_user(frames: list[StackFrame]) -> StackFrame | None:
    """The innermost frame of a stack outside torch's own code (None: all of it is torch's)."""
    return next((f for f in reversed(frames) if not is_torch_file(f.file)), None)


def user_line(frames: list[StackFrame]) -> StackFrame | None:
    """The user's line of a user_stack: its innermost frame outside torch (a higher-order op such
    as while_loop or invoke_subgraph leaves torch's own frames below the user's), else the last."""
    return innermost_user(frames) or (frames[-1] if frames else None)


def is_torch_file(path: str) -> bool:
    """A frame in torch's own code (not the user's), by its file's path."""
    p = path.replace("\\", "/")
    return "/torch/" in p and ("-packages/" in p or p.startswith("torch/"))


def add_phase(c: Compile, p: Phase) -> None:
    if len(c.phases) < MAX_EVENTS:
        c.phases.append(p)
    else:
        c.events_dropped += 1


def _graph_break(rec: Record, intern: Callable[[str], str]) -> GraphBreak:
    """A graph break, its texts kept once however often it repeats (the final pass keeps every
    compile's graph breaks: store.Facts)."""
    text = rec.text(20_000)
    m = _BREAK_AT.search(text)
    reason = text
    k = text.find("Graph Break Reason:")
    if k >= 0:
        reason = text[k + len("Graph Break Reason:") :]
    elif (old := _OLD_REASON.search(text)) is not None:  # torch 2.6 and older: "Reason: ..."
        reason = text[old.end() :]
    end = reason.find("User code traceback:")
    if end >= 0:
        reason = reason[:end]
    return GraphBreak(
        intern(reason.strip() or text.strip()[:500]),
        m.group(1) if m else None,
        rec.line,
        intern(text[:4000]),
    )


def _reasons(rec: Record) -> tuple[list[str], str | None]:
    """The guard failures of a recompile_reasons payload, and what is wrong with it if it is a
    JSON list of something other than strings (those items are left out)."""
    v = json_of(rec.payload)
    if isinstance(v, list):
        got = [x for x in v if isinstance(x, str)]
        wrong = (
            None if len(got) == len(v) else f"recompile_reasons is not a list of strings: {peek(v)}"
        )
        return got, wrong
    return split_reasons(rec.text(100_000)), None


# A guard failure as torch words it: the id of the compile whose guards failed, then why.
_REASON_START = re.compile(rf"{ID_TEXT}: ")


def split_reasons(text: str) -> list[str]:
    """Recompile reasons written as text, one per guard failure: a line that does not start
    with a compile id (`User stack trace:` and its frames) belongs to the reason above it."""
    out: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):  # torch's lines, not Unicode's
        if not line.strip():
            continue
        if out and not _REASON_START.match(line):
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


# Inductor's provenance artifacts: which kernel computes which FX nodes, and from which code.
_PROVENANCE = {
    "inductor_provenance_tracking_node_mappings": "nodes",
    "inductor_provenance_tracking_kernel_stack_traces": "code",
}
MAX_KERNELS = 20_000  # kernels kept per artifact


def _provenance(v: Any, name: str) -> dict[str, list[str]] | None:
    """Kernel -> strings of one provenance artifact, the kernels a log can be trusted to give."""
    if isinstance(v, dict) and _PROVENANCE[name] == "nodes":
        v = v.get("cppCodeToPost", {})
    if not isinstance(v, dict):
        return None
    out: dict[str, list[str]] = {}
    for k, items in v.items():
        if len(out) >= MAX_KERNELS:
            break
        if isinstance(k, str) and isinstance(items, list):
            out[k] = [x for x in items if isinstance(x, str)]
    return out


MAX_SECONDS = 365 * 86400  # no compile takes a year: a longer time is damage


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


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _summary(body: Any) -> str:
    if isinstance(body, dict):
        parts = []
        for k, v in body.items():
            if k in ("stack", "user_stack", "frame_locals"):
                continue
            parts.append(f"{k}={peek(v, 120)}")
        return ", ".join(parts)[:1000]
    return peek(body, 400)


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


def metrics_summary(body: dict[str, Any]) -> str:
    keys = ("co_name", "fail_type", "fail_reason", "entire_frame_compile_time_s")
    return ", ".join(f"{k}={peek(body.get(k), 200)}" for k in keys if body.get(k) is not None)
