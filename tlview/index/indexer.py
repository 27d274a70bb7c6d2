"""Group a stream of records into compiles: status, stacks, graphs, breaks, symbols, inputs."""

from __future__ import annotations

from typing import Any

from tlview.index import beside
from tlview.index.annotations import forward_params
from tlview.index.artifacts import ArtifactRecords
from tlview.index.beside import BesideRecords
from tlview.index.chromium import ChromiumRecords
from tlview.index.describe import DescribeRecords
from tlview.index.digests import code_collectives
from tlview.index.finish import Finishing
from tlview.index.kinds import (
    BWD_FIELDS,
    CONTEXT_INTS,
    EVENT_KINDS,
    GRAPH_KINDS,
    GUARD_KINDS,
    ISSUE_KINDS,
    METRICS_KINDS,
    SYMBOL_KINDS,
    count_kind,
    parse_id,
    peek,
    wrong_fields,
)
from tlview.index.merge import Merging
from tlview.index.metrics import MetricsRecords, durations
from tlview.index.symbols import SymbolRecords
from tlview.parse import Record


class Indexer(
    BesideRecords,
    MetricsRecords,
    DescribeRecords,
    ChromiumRecords,
    SymbolRecords,
    ArtifactRecords,
    Merging,
    Finishing,
):
    """Builds the compile index of one process's records, as they stream past."""

    # Each base reads a group of record kinds into the state they share (core.Core): `add`
    # counts and checks every record, and hands it to the handler of its kind.
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
            log.rank, log.rank_from = rec.rank, "records"
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
            named = body.get("compile_id")
            cid = parse_id(named)
            if cid is None and isinstance(named, str) and named != "None":
                self.bad(rec, f"compile_id is not a compile id: {peek(named)}")
        if cid is not None:
            if self.run:
                cid = self.ran(cid)
            if kind == "dynamo_start" and cid in self.ended and cid in self.started:
                cid = self.next_run(cid)  # not a copy of the record: its compile had ended
        if kind == "chromium_event":
            self.on_chromium(rec, cid)
            return
        c = self.compile_for(rec, cid)
        if cid is None:
            self.on_loose(rec, c)
        if kind in beside.KINDS:
            beside.KINDS[kind](self, rec, c)
        elif kind.startswith("describe_"):
            self.on_describe(rec, c)
        elif kind == "dynamo_start":
            self.started.add(cid)
            if isinstance(body, dict):
                c.stack = self.stack(body.get("stack"), rec)
            else:
                self.bad(rec, "expected an object with a stack")
        elif kind == "compilation_metrics":
            self.on_metrics(rec, c)
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
            if (name := beside.artifact_name(rec)) in beside.ARTIFACTS:
                beside.ARTIFACTS[name](self, rec, c)
        elif kind in GRAPH_KINDS:
            meta = None
            if isinstance(body, dict) and body:
                meta = {k: v for k, v in body.items() if k != "stack"}
            named = kind
            if (
                kind == "graph_dump"
                and isinstance(body, dict)
                and isinstance(body.get("name"), str)
            ):
                # AOTInductor's code, by what it is: inductor_aot_wrapper_code, ..._kernel_code
                named = self.intern(body["name"][:200])
            if kind == "inductor_output_code":
                calls = code_collectives(rec.payload)
                if calls is not None:
                    meta = {**(meta or {}), **calls}
            # Read before the payload is summed up: reading it checks its md5.
            params = forward_params(rec.payload) if kind == "dynamo_output_graph" else None
            g = self.payload(rec, named, c, meta)
            g.placeholders = params
            c.graphs.append(g)
            if (
                kind == "dynamo_output_graph"
                and c.stack == []
                and isinstance(rec.meta.get("stack"), list)
            ):
                c.stack = self.stack(rec.meta["stack"])
        elif kind in GUARD_KINDS:
            c.guards.append(self.payload(rec, kind, c))
        elif kind in SYMBOL_KINDS:
            self.on_symbol(rec, c)
        else:
            if kind not in EVENT_KINDS:
                count_kind(log.unknown_kinds, kind)
            self.event(rec, c, kind, _summary(body))
            if kind in ISSUE_KINDS:
                self.on_issue(rec, c, kind)


def _summary(body: Any) -> str:
    if isinstance(body, dict):
        parts = []
        for k, v in body.items():
            if k in ("stack", "user_stack", "frame_locals"):
                continue
            parts.append(f"{k}={peek(v, 120)}")
        return ", ".join(parts)[:1000]
    return peek(body, 400)
