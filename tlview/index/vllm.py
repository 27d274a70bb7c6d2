"""vLLM's JSON artifacts (its compile calls' configs, compile events, piece compile starts),
read into their payload's `meta`: the fields analyze/vllm.py groups pieces and calls by."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tlview.index.core import State
from tlview.index.kinds import is_int, json_of, peek
from tlview.model import Compile
from tlview.parse import Record

MAX_TEXT = 2000  # characters kept of one config value (a list of splitting ops)
MAX_KEYS = 64  # config keys kept (vLLM writes 14)

# The fields of a `vllm_piecewise_compile_start` (vllm/compilation/piecewise_backend.py), and
# what each must be.
_START_FIELDS: dict[str, Callable[[Any], bool]] = {
    "piecewise_index": is_int,
    "submod_name": lambda v: isinstance(v, str),
    "total_piecewise_compiles": is_int,
    "compile_range_start": is_int,
    "compile_range_end": is_int,
    "is_single_size": lambda v: isinstance(v, bool),
    "is_cudagraph_capture_size": lambda v: isinstance(v, bool),
}


def config_meta(v: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A compilation config's values, strings cut, as logged (vLLM joins lists with ", ")."""
    out: dict[str, Any] = {}
    wrong = None
    for k, x in list(v.items())[:MAX_KEYS]:
        if isinstance(x, str):
            out[k] = x[:MAX_TEXT]
        elif x is None or isinstance(x, bool | int | float):
            out[k] = x
        else:
            wrong = wrong or f"{k} is not a string, number or bool: {peek(x)}"
    return out, wrong


def start_meta(v: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A piece's compile start: which piece, of how many, for which range of sizes."""
    out: dict[str, Any] = {}
    wrong = None
    for k, ok in _START_FIELDS.items():
        x = v.get(k)
        if x is None:
            continue
        if ok(x):
            out[k] = x[:MAX_TEXT] if isinstance(x, str) else x
        else:
            wrong = wrong or f"{k} is not what vLLM writes: {peek(x)}"
    return out, wrong


def event_meta(v: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A compile event: `aot_cache_hit` or `fresh_compile`."""
    kind = v.get("type")
    if isinstance(kind, str):
        return {"type": kind[:MAX_TEXT]}, None
    return {}, f"type is not a string: {peek(kind)}"


# vLLM's JSON artifacts, each with the reader of its payload (beside the kinds of kinds.py).
VLLM_ARTIFACTS: dict[str, Callable[[dict[str, Any]], tuple[dict[str, Any], str | None]]] = {
    "vllm_compilation_config": config_meta,
    "vllm_piecewise_compile_start": start_meta,
    "vllm_compile_event": event_meta,
}


def on_vllm_artifact(ix: State, rec: Record, c: Compile, name: str) -> None:
    """One of vLLM's JSON artifacts: its fields and the record's time in the payload's meta
    (a piece's time runs from its compile start), a field of the wrong type a bad line."""
    v = json_of(rec.payload)
    meta: dict[str, Any] = {"time": rec.time}
    if isinstance(v, dict):
        got, wrong = VLLM_ARTIFACTS[name](v)
        meta = {**got, "time": rec.time}
        if wrong:
            ix.bad(rec, f"{name}: {wrong}")
    elif rec.payload_ok:
        ix.bad(rec, f"{name} is not a JSON object: {peek(v)}")
    c.artifacts.append(ix.payload(rec, name, c, meta))
