"""Which function reads each record kind: the indexer's table (kinds.py says what torch writes).

To read a new record kind, write its handler, `def on_x(ix: State, rec: Record) -> None`, in the
module of its group (metrics.py, artifacts.py, describe.py, symbols.py, chromium.py; here when it
is a few lines), and add `"x": on_x` to HANDLERS. A handler finds its compile with
`ix.compile_of(rec)` and says what is wrong with a record with `ix.bad(rec, why)`. A kind with
no entry is kept as an event of its compile (and counted as unknown unless EVENT_KINDS has it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tlview.index import beside
from tlview.index.annotations import forward_params
from tlview.index.artifacts import on_artifact
from tlview.index.chromium import on_chromium
from tlview.index.core import State
from tlview.index.describe import on_other_describe, on_source, on_storage, on_tensor
from tlview.index.digests import code_collectives
from tlview.index.kinds import (
    EVENT_KINDS,
    GRAPH_KINDS,
    GUARD_KINDS,
    ISSUE_KINDS,
    SYMBOL_KINDS,
    count_kind,
    cut_name,
    is_int,
    peek,
)
from tlview.index.metrics import on_bwd_metrics, on_metrics
from tlview.index.symbols import on_issue, on_symbol
from tlview.parse import Record

Handler = Callable[[State, Record], None]


def on_str(ix: State, rec: Record) -> None:
    """A file name interned for the stacks after it: `[name, index]`."""
    body = rec.body
    if isinstance(body, list) and len(body) == 2 and isinstance(body[0], str) and is_int(body[1]):
        ix.strings[body[1]] = cut_name(body[0])
    else:
        ix.bad(rec, "expected [file name, index]")


def on_start(ix: State, rec: Record) -> None:
    """dynamo_start: a compile begins, with the user's stack."""
    cid = ix.id_of(rec)
    if cid is not None and cid in ix.ended and cid in ix.started:
        cid = ix.next_run(cid)  # not a copy of the record: its compile had ended
    c = ix.compile_for(rec, cid)
    if cid is None:
        ix.loose(rec, c)
    ix.started.add(cid)
    if isinstance(rec.body, dict):
        c.stack = ix.stack(rec.body.get("stack"), rec)
    else:
        ix.bad(rec, "expected an object with a stack")


def on_graph(ix: State, rec: Record) -> None:
    """A graph or generated code (GRAPH_KINDS), its payload kept as the compile's graph."""
    c = ix.compile_of(rec)
    # Read before the payload is summed up: reading it checks its md5.
    params = forward_params(rec.payload) if rec.kind == "dynamo_output_graph" else None
    g = ix.payload(rec, _graph_name(ix, rec), c, _graph_meta(rec))
    g.placeholders = params
    c.graphs.append(g)
    if (
        rec.kind == "dynamo_output_graph"
        and c.stack == []
        and isinstance(rec.meta.get("stack"), list)
    ):
        c.stack = ix.stack(rec.meta["stack"])


def _graph_name(ix: State, rec: Record) -> str:
    """The kind, or AOTInductor's code by what it is: inductor_aot_wrapper_code, ..."""
    body = rec.body
    if rec.kind == "graph_dump" and isinstance(body, dict) and isinstance(body.get("name"), str):
        return ix.intern(body["name"][:200])
    return rec.kind


def _graph_meta(rec: Record) -> dict[str, Any] | None:
    """What the record says of its graph (its stack aside), and the collectives of output code."""
    body = rec.body
    meta = None
    if isinstance(body, dict) and body:
        meta = {k: v for k, v in body.items() if k != "stack"}
    if rec.kind == "inductor_output_code":
        calls = code_collectives(rec.payload)
        if calls is not None:
            meta = {**(meta or {}), **calls}
    return meta


def on_guards(ix: State, rec: Record) -> None:
    """The guards of a compile's graph (GUARD_KINDS)."""
    c = ix.compile_of(rec)
    c.guards.append(ix.payload(rec, rec.kind, c))


def on_event(ix: State, rec: Record) -> None:
    """Any other kind: an event of its compile; export's diagnostics also as its issues."""
    c = ix.compile_of(rec)
    kind = rec.kind
    if kind not in EVENT_KINDS:
        count_kind(ix.log.unknown_kinds, kind)
    ix.event(rec, c, kind, _summary(rec.body))
    if kind in ISSUE_KINDS:
        on_issue(ix, rec, c)


HANDLERS: dict[str, Handler] = {
    "str": on_str,
    "chromium_event": on_chromium,
    "dynamo_start": on_start,
    "compilation_metrics": on_metrics,
    "bwd_compilation_metrics": on_bwd_metrics,
    "artifact": on_artifact,
    "describe_storage": on_storage,
    "describe_tensor": on_tensor,
    "describe_source": on_source,
    **dict.fromkeys(GRAPH_KINDS, on_graph),
    **dict.fromkeys(GUARD_KINDS, on_guards),
    **dict.fromkeys(SYMBOL_KINDS, on_symbol),
    **beside.KINDS,  # run-time metrics, failures, real-tensor propagation, export's start
}


def handler(kind: str) -> Handler:
    """The handler of a record kind (HANDLERS), for one HANDLERS does not name."""
    return on_other_describe if kind.startswith("describe_") else on_event


def _summary(body: Any) -> str:
    if isinstance(body, dict):
        parts = []
        for k, v in body.items():
            if k in ("stack", "user_stack", "frame_locals"):
                continue
            parts.append(f"{k}={peek(v, 120)}")
        return ", ".join(parts)[:1000]
    return peek(body, 400)
