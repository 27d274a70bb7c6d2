"""orjson.dumps for values read from a log: nesting deeper than orjson writes is cut, and an
integer past 64 bits (a sum of a log's counts) written as a number, not fatal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tlview.inert import json as inert_json

MAX_DEPTH = 200  # levels kept of a value nested deeper than orjson writes (254)
TOO_DEEP = f"<nested deeper than {MAX_DEPTH} levels: cut>"


def dumps(v: Any, option: int = 0, default: Callable[[Any], Any] | None = None) -> bytes:
    """`orjson.dumps(v)`; a value of a damaged log nested too deep for it keeps its first levels,
    an integer orjson cannot write (past 64 bits: a total of counts a log gave at their largest)
    is written as the nearest float, and the characters a terminal obeys are escaped
    (`inert.json`)."""
    try:
        return inert_json(orjson.dumps(v, default=default, option=option))
    except TypeError:  # "Recursion limit reached", "Integer exceeds 64-bit range"
        return inert_json(orjson.dumps(_cut(v, MAX_DEPTH), default=default, option=option))


def _cut(v: Any, depth: int) -> Any:
    if isinstance(v, dict):
        return TOO_DEEP if depth == 0 else {k: _cut(x, depth - 1) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return TOO_DEEP if depth == 0 else [_cut(x, depth - 1) for x in v]
    if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < 1 << 64:
        return float(v) if v.bit_length() < 1024 else str(v)
    return v
