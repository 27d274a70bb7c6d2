"""vLLM's compile calls in a job summary: one short table (calls, pieces, cache hits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlview.render.markdown.md import MAX_ROWS, table, text
from tlview.units import count, seconds

if TYPE_CHECKING:  # analyze/vllm.py is imported only for a log with vLLM's records
    from tlview.analyze.vllm import VllmCall, VllmReport


def call_row(c: VllmCall) -> list[str]:
    where = f"rank {c.rank}" if c.rank is not None else text(c.log)
    return [
        str(c.index + 1),
        where,
        text(c.prefix or ""),
        text(c.event or ""),
        str(len(c.submods)),
        str(c.compiles),
        str(c.hits),
        seconds(c.seconds),
    ]


def vllm_lines(v: VllmReport | None, more: str) -> list[str]:
    """The vLLM table, or nothing when vLLM wrote no records; MORE: what lists every call."""
    if v is None:
        return []
    head = f"#### vLLM ({count(len(v.calls), 'compile call')}, "
    out = [head + f"{count(v.compiles, 'piece compile')}, {v.hits} cache hits)", ""]
    rows = [call_row(c) for c in v.calls[:MAX_ROWS]]
    cols = ("call", "log", "prefix", "event", "pieces", "compiles", "cache hits", "time")
    out += table(cols, rows, len(v.calls), "calls", more)
    differ = [r for r in v.ranks if r.differs]
    if differ:
        said = "; ".join(f"call {r.index + 1}: {', '.join(r.differs)}" for r in differ[:MAX_ROWS])
        out += ["", f"Ranks differ in {said}"]
    return [*out, ""]
