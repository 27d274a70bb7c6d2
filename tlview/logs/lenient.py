"""Record lines orjson refuses but torch wrote: NaN and infinite metrics, integers past 64 bits,
invalid UTF-8. Read as Python's json reads them, or with bad bytes replaced."""

from __future__ import annotations

import re
from typing import Any

import orjson

NOT_JSON = object()


def python_json(data: bytes) -> Any:
    """A record as Python's json reads it: torch writes records with `json.dumps`, which writes
    a float metric that is NaN or infinite as `NaN`/`Infinity`, where orjson refuses them; and
    an integer over 64 bits (as text). NOT_JSON when it is not that either, or holds what no
    report could write back (lone surrogates)."""
    import json  # already imported by orjson's own module

    # Checked as read, never by encoding it again: orjson dies on a signal, not an error, when
    # a long line's copy does not fit in the process's address space.
    try:
        meta = json.loads(data.decode("utf-8"), parse_int=_int64)
    except (ValueError, RecursionError, TypeError):
        return NOT_JSON
    if _SURROGATE.search(data) is not None and not _encodable(meta):
        return NOT_JSON
    return meta


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # an escaped surrogate: a lone one cannot be written


def _int64(text: str) -> int | str:
    """An integer as orjson reads and writes them (64 bits, signed or not); a longer one as
    its digits, a string where a number should be: a field of the wrong type, reported."""
    v = int(text) if len(text) < 21 else None
    return v if v is not None and -(1 << 63) <= v < 1 << 64 else text


def _encodable(v: Any) -> bool:
    """Whether every string in a JSON value is valid Unicode (no lone surrogate)."""
    todo = [v]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return True


def lenient_json(data: bytes) -> Any:
    """Parse a record whose only fault is invalid UTF-8; None if it is broken otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
    return None


def json_error(e: orjson.JSONDecodeError) -> str:
    msg = str(e.msg if hasattr(e, "msg") else e)
    pos = getattr(e, "pos", None)
    return f"{msg} at column {pos + 1}" if isinstance(pos, int) else msg
