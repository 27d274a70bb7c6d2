"""Values the log gives as torch's reprs (`<class 'x.Y'>`, `device(type='cuda', index=0)`)
or loose JSON, read as the names and ids tlview shows."""

from __future__ import annotations

import functools
import re
from typing import Any


def as_id(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


_CLASS_REPR = re.compile(r"<class '([\w.]+)'>")


def class_name(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    return _class_name(v)


@functools.lru_cache(maxsize=256)
def _class_name(v: str) -> str:
    m = _CLASS_REPR.fullmatch(v.strip())
    return m.group(1) if m else v


_DEVICE_REPR = re.compile(r"device\(type='([\w]+)'(?:, index=(\d+))?\)")


def device_name(v: Any) -> str:
    """`device(type='cuda', index=0)` -> `cuda:0`, the form users type."""
    if not isinstance(v, str):
        return "?"
    return _device_name(v)


@functools.lru_cache(maxsize=256)
def _device_name(v: str) -> str:
    m = _DEVICE_REPR.fullmatch(v.strip())
    if not m:
        return v
    return m.group(1) if m.group(2) is None else f"{m.group(1)}:{m.group(2)}"
