"""A compile's failure in words, with the failures torch logged as artifacts beside it
(fx_interpreter_error, eager_compile_backwards_failure, inductor_spmd_graph_mismatch).

A failure artifact of a compile that logged no metrics is its failure (index/finish.py sets its
status); one beside metrics that name a failure adds where it happened; one beside a compile that
succeeded is a warning: torch suppressed it (a backward compiled eagerly fails, and is compiled
again when the backward runs).
"""

from __future__ import annotations

from typing import NamedTuple

from tlview.model import Compile

# What each failure artifact is, in a few words.
TROUBLES = {
    "fx_interpreter_error": "FX interpreter error",
    "eager_compile_backwards_failure": "eager backward compile failed (suppressed)",
    "inductor_spmd_graph_mismatch": "ranks' graphs differ (SPMD check)",
}


class TroubleLine(NamedTuple):
    """One failure artifact of a compile: what it is, its line, and whether the compile failed."""

    kind: str
    what: str
    text: str
    line: int
    fatal: bool  # the compile failed (with it, or of it)


def troubles(c: Compile) -> list[TroubleLine]:
    """The compile's failure artifacts, each in one line."""
    failed = c.status == "failed"
    return [
        TroubleLine(t.kind, TROUBLES.get(t.kind, t.kind), t.text, t.line, failed)
        for t in c.troubles
    ]


def failure_line(c: Compile) -> str | None:
    """The compile's failure in one line: its metrics' reason (first line), else the failure
    artifact that ended it; None for a compile that did not fail."""
    if c.status != "failed":
        return None
    first = (c.fail_reason or "").strip().splitlines()
    said = f"{c.fail_type}: {first[0]}" if first else c.fail_type or "failed"
    fatal = [t for t in c.troubles if t.kind in TROUBLES and t.kind != c.fail_type]
    if fatal and c.fail_type not in TROUBLES:
        said += f" ({TROUBLES[fatal[0].kind]}: {fatal[0].text})"
    return said
