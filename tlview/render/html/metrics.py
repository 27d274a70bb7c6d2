"""compilation_metrics as a section shows them: long values cut, repeats linked to their first."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from tlview.dumps import dumps
from tlview.model import Compile
from tlview.render.html.budget import KiB
from tlview.render.html.rows import Row
from tlview.units import nbytes

METRIC_BYTES = 64 * KiB  # a compilation_metrics value longer than this is cut
SHARED_METRIC = 200  # a metric value this long that repeats an earlier compile's is linked to it


@dataclass(slots=True)
class MetricView:
    name: str
    value: str
    same_as: tuple[str, str] | None = None  # (anchor, compile label) that shows the same value
    note: str | None = None

    @property
    def long(self) -> bool:
        return len(self.value) > 120 or "\n" in self.value


def first_shown(rows: list[Row]) -> dict[tuple[str, bytes], tuple[str, str]]:
    """Where each long metric value is first shown: later sections link there instead."""
    shared: dict[tuple[str, bytes], tuple[str, str]] = {}
    for r in rows:
        for name, d, _ in r.long_metrics:
            shared.setdefault((name, d), (r.anchor, r.label))
    return shared


def long_metrics(c: Compile) -> list[tuple[str, bytes, int]]:
    """The metric values of SHARED_METRIC or more a detailed section shows, in its order: name,
    digest and length. Found in the first pass, so any part of the page can link repeats."""
    out = []
    for m in ([c.metrics] if c.metrics else []) + c.bwd_metrics:
        for k, val in m.items():
            if val is None or not _may_be_long(val):
                continue
            text = _metric_text(val)
            if len(text) >= SHARED_METRIC:
                out.append((str(k), digest(text), len(text)))
    return out


def digest(text: str) -> bytes:
    """A long metric value's fingerprint. The same values (configs) come back in every compile,
    each digested twice (first pass, then its section): a cache hit costs a dict lookup, where
    hashing kilobytes again cost 8% of a page of 500 detailed compiles."""
    got = _DIGESTS.get(text)
    if got is None:
        got = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()
        global _DIGESTED
        if _DIGESTED + len(text) > DIGESTS_CHARS:  # the cache holds the texts: keep it small
            _DIGESTS.clear()
            _DIGESTED = 0
        if len(text) <= DIGESTS_CHARS // 8:
            _DIGESTS[text] = got
            _DIGESTED += len(text)
    return got


DIGESTS_CHARS = 4 << 20  # characters of metric values the digest cache may hold
_DIGESTS: dict[str, bytes] = {}
_DIGESTED = 0


def _may_be_long(v: Any) -> bool:
    """Whether a metric value's text can be SHARED_METRIC long or more, from a cheap look."""
    if isinstance(v, bool | int | float):
        return False
    if isinstance(v, str):
        head = v[:1]
        if len(v) > 120 and (head == "{" or head.isspace()):
            return True  # _metric_text may indent it
        return len(v) >= SHARED_METRIC
    return True


def metric_views(
    m: dict[str, Any],
    r: Row,
    shared: dict[tuple[str, bytes], tuple[str, str]],
    full: bool,
) -> tuple[list[MetricView], list[str]]:
    """Every field of a metrics record; long values shown first by another compile are linked."""
    out, nulls = [], []
    for k, val in m.items():
        if val is None:
            nulls.append(str(k))
            continue
        text = _metric_text(val)
        mv = MetricView(str(k), text)
        if len(text) >= SHARED_METRIC:
            seen = shared.get((str(k), digest(text)))
            if seen is not None and seen[0] != r.anchor:
                mv.same_as = seen
                mv.value = ""
        if not full and len(mv.value) > METRIC_BYTES:
            mv.note = (
                f"Cut: {nbytes(METRIC_BYTES)} of {nbytes(len(text))} shown. "
                "`--full` shows every value whole."
            )
            mv.value = mv.value[:METRIC_BYTES]
        out.append(mv)
    return out, nulls


def _metric_text(v: Any) -> str:
    if isinstance(v, str):
        s = v.strip()
        if s[:1] == "{" and s[-1:] == "}" and len(s) > 120:
            return _indented(s) or v
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "\n".join(v)
    return dumps(v, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


@lru_cache(maxsize=64)
def _indented(s: str) -> str | None:
    """A JSON object logged as one line, indented; the configs repeat in every compile."""
    try:
        return orjson.dumps(orjson.loads(s), option=orjson.OPT_INDENT_2).decode()
    except (orjson.JSONDecodeError, TypeError):  # not JSON, or nested too deep to write back
        return None
