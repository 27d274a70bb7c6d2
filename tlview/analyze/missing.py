"""Why a compile lacks an artifact a reader expects (its metrics, inductor's graphs or code), in
one line each: a cache hit, a compile through aot_compile (precompile) or export, compiled
autograd's capture, a run that stopped, a restart.

Said only for what is absent from the log: torch 2.13 logs the post-grad graph and output code
on an FX graph cache hit too, so a hit explains their absence only in logs of torch that did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tlview.index.kinds import INDUCTOR_KINDS
from tlview.model import Compile, Phase

# The span aot_compile (precompile) and strict export wrap their dynamo trace in, logged without
# a compile id (torch/_dynamo/aot_compile.py, torch/_dynamo/functional_export.py).
CAPTURE_SPAN = "fullgraph_capture"
_AOT_GRAPHS = ("aot_forward_graph", "aot_inference_graph", "aot_joint_graph")


class Missing(NamedTuple):
    """An artifact a compile lacks, and why, in one line."""

    artifact: str  # "metrics", "inductor code", "AOT graphs", ...
    why: str


def _kinds(c: Compile) -> set[str]:
    return {g.kind for g in c.graphs}


def _hit(c: Compile, cache: str) -> bool:
    return any(e.cache == cache and e.outcome == "hit" for e in c.cache)


def capture_spans(outside: Compile | None) -> list[Phase]:
    """The `fullgraph_capture` spans of a log's `-/-` compile (aot_compile's, strict export's)."""
    if outside is None:
        return []
    return [p for p in outside.phases if p.name == CAPTURE_SPAN and p.dur_us is not None]


def captured_by(c: Compile, captures: Sequence[Phase]) -> Phase | None:
    """The span outside any compile id that a compile's trace ran in (aot_compile's or strict
    export's `fullgraph_capture`, of `capture_spans`), found by time."""
    if not captures or not c.phases:
        return None
    start = min(p.start_us for p in c.phases)
    return next((p for p in captures if _within(start, p)), None)


def _within(t: float, p: Phase) -> bool:
    return p.start_us <= t <= p.start_us + (p.dur_us or 0.0)


def _metrics_missing(c: Compile, captures: Sequence[Phase]) -> str | None:
    """Why a compile has no metrics of its own."""
    if c.status == "restarted":
        return "restarted: the attempt after it logged the metrics"
    if c.id is not None and c.id.frame is None:
        return "compiled autograd's capture: its compile is the dynamo one under !N/..."
    if c.status == "incomplete":
        return "the run stopped during this compile"
    if captured_by(c, captures) is not None:
        return (
            f"traced inside {CAPTURE_SPAN} (aot_compile, precompile or strict export): torch logs "
            "its metrics, and inductor's work, without a compile id (under -/-)"
        )
    if c.graphs:
        return "a graph and no metrics: torch.export's or precompile's trace, or a run that stopped"
    return None


def missing(c: Compile, captures: Sequence[Phase] = ()) -> list[Missing]:
    """What a compile lacks, and why; `captures`: its log's `capture_spans` (for precompile)."""
    if c.id is None:
        return []
    out = []
    if c.metrics is None and (why := _metrics_missing(c, captures)) is not None:
        out.append(Missing("metrics", why))
    kinds = _kinds(c)
    if _hit(c, "fx_graph") and not any(INDUCTOR_KINDS.match(k) for k in kinds):
        out.append(
            Missing(
                "inductor code",
                "FX graph cache hit: inductor loaded the compiled code and logged no graph or "
                "code (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 logs them)",
            )
        )
    if _hit(c, "aotautograd") and not kinds.intersection(_AOT_GRAPHS):
        out.append(
            Missing("AOT graphs", "AOTAutograd cache hit: its forward and backward were loaded")
        )
    return out


def missing_line(c: Compile, captures: Sequence[Phase] = ()) -> str | None:
    """What a compile lacks and why, in one line (None: nothing a reader expects is missing)."""
    return said(missing(c, captures))


def said(got: Sequence[Missing]) -> str | None:
    """Missing artifacts in one line: `no metrics: why; no inductor code: why`."""
    return "; ".join(f"no {m.artifact}: {m.why}" for m in got) or None
