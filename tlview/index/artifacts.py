"""Artifact records: graph breaks, recompile reasons, caches, provenance, torch's version."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tlview.index.beside import ARTIFACTS
from tlview.index.core import State, innermost_user
from tlview.index.digests import artifact_meta
from tlview.index.kinds import MAX_EVENTS, json_of, peek
from tlview.index.recompiles import split_reasons
from tlview.index.vllm import VLLM_ARTIFACTS, on_vllm_artifact
from tlview.model import CacheEvent, Compile, ExportIssue, GraphBreak, Payload, Provenance
from tlview.parse import Record

_CACHE_ARTIFACT = re.compile(r"(?P<cache>.+)_cache_(?P<outcome>hit|miss|bypass)")
_BREAK_AT = re.compile(r"Graph break in user code at (\S+:\d+)")
# Where older torch (2.6 and before) starts a graph break's own words, under the line above.
_OLD_REASON = re.compile(r"^Reason: ", re.M)
_RUNNABLE_VERSION = re.compile(rb"^# torch version: ([\w.+-]{1,64})$", re.M)


def on_artifact(ix: State, rec: Record) -> None:
    """An artifact record: what it tells of its compile, its payload kept."""
    c = ix.compile_of(rec)
    name = _name(ix, rec)
    read = _BY_NAME.get(name)
    if read is None or not read(ix, rec, c):  # True: read whole, its payload not kept as it is
        _kept(ix, rec, c, name)
    beside = ARTIFACTS.get(name)
    if beside is not None:  # what it says beside the compile (beside.py)
        beside(ix, rec, c)


def _kept(ix: State, rec: Record, c: Compile, name: str) -> None:
    """An artifact kept as the compile's graph or artifact (a cache's outcome noted)."""
    m = _CACHE_ARTIFACT.fullmatch(name)
    if m:
        c.cache.append(_cache(rec, m))
    if name.endswith("graph") or name in (
        "fx_graph_runnable",
        "inductor_provenance_tracking_node_mappings",
    ):
        c.graphs.append(ix.payload(rec, name, c))
    else:
        c.artifacts.append(ix.payload(rec, name, c, artifact_meta(name, rec.payload)))


def _name(ix: State, rec: Record) -> str:
    """The artifact's name ("?" for none); a wrong name or encoding is a bad line."""
    body = rec.body
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str):
        ix.bad(rec, f"artifact without a name: name is {peek(name)}")
        name = "?"
    enc = body.get("encoding") if isinstance(body, dict) else None
    if enc is not None and not isinstance(enc, str):
        ix.bad(rec, f"encoding is not a string: {peek(enc)}")
    return name


def _cache(rec: Record, m: re.Match[str]) -> CacheEvent:
    """A cache's hit, miss or bypass (`fx_graph_cache_hit`), with its key and reason."""
    v = json_of(rec.payload)
    key = reason = None
    if isinstance(v, dict):
        key = v.get("key") if isinstance(v.get("key"), str) else None
        r = v.get("reason") or v.get("cache_bypass_reason")
        reason = r if isinstance(r, str) else None
    return CacheEvent(m.group("cache"), m.group("outcome"), key, reason)


# Each reads what an artifact of its name says; True when that is all of it (no payload kept).
Reader = Callable[[State, Record, Compile], bool]


def _torch_version(ix: State, rec: Record, c: Compile) -> bool:
    v = json_of(rec.payload)
    if isinstance(v, dict) and isinstance(v.get("pytorch_version"), str):
        ix.saw_version(v["pytorch_version"])
    elif rec.payload_ok:
        got = v.get("pytorch_version") if isinstance(v, dict) else v
        ix.bad(rec, f"torch_version: pytorch_version is not a string: {peek(got)}")
    return False


def _runnable(ix: State, rec: Record, c: Compile) -> bool:
    """torch 2.9 and older log no torch_version record; their runnable graphs name it (after
    their configs: anywhere in the payload)."""
    if rec.payload and ix.log.torch_version is None:
        named = _RUNNABLE_VERSION.search(rec.payload)
        if named:
            ix.saw_version(named.group(1).decode("ascii"))
    return False


def _kernels(ix: State, rec: Record, c: Compile) -> bool:
    """Inductor's provenance: which kernel computes which nodes. Without a payload (an FX graph
    cache hit with provenance tracking off) it says nothing, as torch means it to: see
    PAYLOAD_OPTIONAL."""
    if rec.payload is None:
        return False
    name = rec.body["name"]
    v = json_of(rec.payload)
    got = _provenance(v, name)
    if got is None:
        ix.bad(rec, f"{name} is not a JSON object of kernels")
    else:
        links = _links(v) if _PROVENANCE[name] == "nodes" else {}
        c.provenance.append(Provenance(rec.line, _PROVENANCE[name], got, links))
    return False


def _vllm(ix: State, rec: Record, c: Compile) -> bool:
    """One of vLLM's JSON artifacts (vllm.py), kept with its fields."""
    on_vllm_artifact(ix, rec, c, rec.body["name"])
    return True


def _recompile_reasons(ix: State, rec: Record, c: Compile) -> bool:
    c.recompile_reasons, problem = _reasons(rec)
    if problem:
        ix.bad(rec, problem)
    return True


def _break(ix: State, rec: Record, c: Compile) -> bool:
    c.graph_breaks.append(_graph_break(rec, ix.intern))
    return True


def _error(ix: State, rec: Record, c: Compile) -> bool:
    c.artifacts.append(payload_always(ix, rec, "dynamo_error", c, 20_000))
    return True


def _failed_trace(ix: State, rec: Record, c: Compile) -> bool:
    """An export that failed while tracing: torch logs the graph traced until then. (Inside a
    compile, the failure is the compile's own, with its reason.)"""
    if c.id is None and len(c.export_issues) < MAX_EVENTS:
        frames = ix.stack(rec.meta.get("stack"), rec)
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
    return False


def payload_always(ix: State, rec: Record, kind: str, c: Compile, limit: int) -> Payload:
    """A payload whose text is always kept (errors), outside the budget."""
    p = ix.payload(rec, kind, c, keep=False)
    if rec.payload is not None:
        n = max(limit, ix.keep.payload_bytes)
        p.text = rec.text(n)
        p.cut = max(0, len(rec.payload) - n)
    return p


def _graph_break(rec: Record, intern: Callable[[str], str]) -> GraphBreak:
    """A graph break, its texts kept once however often it repeats (a log of thousands of
    recompiles holds one copy of each)."""
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


# Inductor's provenance artifacts: which kernel computes which FX nodes, and from which code.
_PROVENANCE = {
    "inductor_provenance_tracking_node_mappings": "nodes",
    "inductor_provenance_tracking_kernel_stack_traces": "code",
}
MAX_KERNELS = 20_000  # kernels kept per artifact


# The maps of a node mapping (both of its formats: torch 2.8's names kernels alone, torch 2.9's
# "version": 2.0 numbers each kernel call, "cpp_fused_relu_0:2"), kept for the provenance view.
LINK_MAPS = ("preToPost", "postToPre", "cppCodeToPost", "postToCppCode")


def _links(v: Any) -> dict[str, dict[str, list[str]]]:
    """The node mapping's maps, each name -> names, as far as a log can be trusted to give them."""
    if not isinstance(v, dict):
        return {}
    out = {}
    for key in LINK_MAPS:
        m = v.get(key)
        if isinstance(m, dict) and m:
            got = _strings(m)
            if got:
                out[key] = got
    return out


def _strings(v: dict[Any, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, items in v.items():
        if len(out) >= MAX_KERNELS:
            break
        if isinstance(k, str) and isinstance(items, list):
            out[k] = [x for x in items if isinstance(x, str)]
    return out


def _provenance(v: Any, name: str) -> dict[str, list[str]] | None:
    """Kernel -> strings of one provenance artifact, the kernels a log can be trusted to give."""
    if isinstance(v, dict) and _PROVENANCE[name] == "nodes":
        v = v.get("cppCodeToPost", {})
    if not isinstance(v, dict):
        return None
    return _strings(v)


_BY_NAME: dict[str, Reader] = {
    "torch_version": _torch_version,
    "fx_graph_runnable": _runnable,
    **dict.fromkeys(_PROVENANCE, _kernels),
    **dict.fromkeys(VLLM_ARTIFACTS, _vllm),
    "recompile_reasons": _recompile_reasons,
    "dynamo_graph_break_reason": _break,
    "dynamo_error": _error,
    "make_fx_fail_partial": _failed_trace,
}
