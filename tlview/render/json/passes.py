"""A compile's regions, pass graphs and bytecode in `tlview.report/2`: keys written only when
the compile has them, so the JSON of a log without them is what it was."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by Analysis for a compile that has them
    from tlview.analyze.bytecode import BytecodePair
    from tlview.analyze.compiles import Analysis
    from tlview.analyze.passes import PassStage, PassStep
    from tlview.analyze.subgraphs import SubgraphGroup


def compile_keys(a: Analysis) -> dict[str, Any]:
    """`subgraphs`, `passes` and `bytecode` of a compile, each only when it has them."""
    out: dict[str, Any] = {}
    if a.subgraphs:
        out["subgraphs"] = [subgraph(g) for g in a.subgraphs if g.subgraph is not None]
    if a.passes:
        out["passes"] = [stage(s) for s in a.passes]
    if a.bytecode:
        out["bytecode"] = [bytecode(b) for b in a.bytecode]
    return out


def subgraph(g: SubgraphGroup) -> dict[str, Any]:
    return {"subgraph": g.subgraph, "artifacts": [name for name, _ in g.artifacts]}


def stage(s: PassStage) -> dict[str, Any]:
    return {
        "stage": s.stage,
        "subgraph": s.subgraph,
        "passes": s.passes,
        "steps": [step(x) for x in s.steps],
    }


def step(x: PassStep) -> dict[str, Any]:
    return {"name": x.name, "line": x.line, "role": x.role, "pass": x.pass_name, "index": x.index}


def bytecode(b: BytecodePair) -> dict[str, Any]:
    return {
        "co_name": b.co_name,
        "original": b.original_name,
        "modified": b.modified_name,
        "compiles": list(b.compiles),
    }
