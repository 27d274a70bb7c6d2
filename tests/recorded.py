"""The real inputs programs saved (`record()` and `record_frame()` of make_fixtures.RECORD, kept
as tests/fixtures/<name>.inputs.json), and rebuilt tensors read back the same way, to compare
field by field."""

from __future__ import annotations

import atexit
import json
import re
import sys
from typing import Any

from helpers import FIXTURES


def reader() -> dict[str, Any]:
    """The programs' own `record` module (RECORD), to read rebuilt tensors as it read theirs."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(FIXTURES))
    ns: dict[str, Any] = {}
    exec(compile(make_fixtures.RECORD, "record.py", "exec"), ns)  # noqa: S102 - our own code
    atexit.unregister(ns["_write"])  # it writes inputs.json when a program ends
    return ns


def saved(name: str) -> list[dict[str, Any]]:
    """What the program NAME recorded: one entry per recorded call, {function, inputs}."""
    got: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.inputs.json").read_text())
    return got


def mask(v: Any) -> Any:
    """Nested ints (`j1`, `8*j1`) get a fresh id in every process: compare them as `j`."""
    if isinstance(v, str):
        return re.sub(r"j\d+", "j", v)
    if isinstance(v, list):
        return [mask(x) for x in v]
    if isinstance(v, dict):
        return {k: mask(x) for k, x in v.items()}
    return v


def read(ns: dict[str, Any], tensors: dict[str, Any], order: list[str]) -> dict[str, Any]:
    """Rebuilt tensors read as `record()` read the originals: storages and bases numbered in
    the same order, so sharing compares as numbers."""
    ns["_STORAGES"].clear()
    ns["_TENSORS"].clear()
    return {src: mask(ns["meta"](tensors[src])) for src in order}


def renumbered(fields: dict[str, Any], order: list[str]) -> dict[str, Any]:
    """The fields of ORDER's sources with storages and bases numbered from 0 in that order, as
    `read` numbers them: a recorded frame holds more tensors than its graph takes."""
    storages: dict[int, int] = {}
    bases: dict[int, int] = {}

    def fix(m: dict[str, Any]) -> dict[str, Any]:
        m = dict(m)
        if "storage" in m:
            m["storage"] = storages.setdefault(m["storage"], len(storages))
        if "base" in m:
            m["base"] = dict(m["base"], tensor=bases.setdefault(m["base"]["tensor"], len(bases)))
        if "inner" in m:
            m["inner"] = {k: fix(v) for k, v in m["inner"].items()}
        return m

    return {src: fix(mask(fields[src])) for src in order}
