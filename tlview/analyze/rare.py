"""Whether a compile has the artifacts few compiles have: graphs a pass left, its frame's
bytecode before and after dynamo, regional inductor's regions, collectives. Checks on payload
kinds and fields, cheap enough for every compile, so that `Analysis` imports passes.py,
bytecode.py, subgraphs.py and collectives.py (their classes and regexes cost every report's
start-up) only for a compile that has what they read. Each check is True for every compile
those modules find something in; it may be True for one they find nothing in
(tests/test_startup.py checks both on every log)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlview.index.digests import COLLECTIVE_SCHEDULE

if TYPE_CHECKING:
    from tlview.model import Compile

# The kinds of passes.pass_step's pass graphs (its role "pass"): vLLM's `vllm_post_grad.*`
# (_VLLM_PASS), inductor's batch fusions `optimus_*` and `cff_*` (_FUSION), its pattern passes
# `{pass}_pre_grad` and `{pass}_post_grad` (_TORCH_PASS).
_PASS_PREFIXES = ("vllm_post_grad.", "optimus_", "cff_")
_PASS_SUFFIXES = ("_pre_grad", "_post_grad")
# bytecode._BYTECODE: `{co_name}_ORIGINAL_BYTECODE` and `{co_name}_MODIFIED_BYTECODE`.
_BYTECODE_SUFFIXES = ("_ORIGINAL_BYTECODE", "_MODIFIED_BYTECODE")


def may_have_passes(c: Compile) -> bool:
    """Whether some payload of the compile may be a graph a pass left (never False for one
    that has one: the graphs before and after a stage alone are no passes)."""
    return any(
        p.kind.startswith(_PASS_PREFIXES) or p.kind.endswith(_PASS_SUFFIXES) for p in c.payloads()
    )


def may_have_bytecode(c: Compile) -> bool:
    """Whether some payload of the compile may be its frame's original or modified bytecode."""
    return any(p.kind.endswith(_BYTECODE_SUFFIXES) for p in c.payloads())


def has_subgraphs(c: Compile) -> bool:
    """Whether any artifact of the compile names a region."""
    return any(p.subgraph is not None for p in c.payloads())


def has_collectives(c: Compile) -> bool:
    """Whether the compile scheduled a collective or its output code calls one: what
    collectives.parity compares (it gives None for any other compile)."""
    return any(p.kind == COLLECTIVE_SCHEDULE for p in c.artifacts) or any(
        p.kind == "inductor_output_code" and (p.meta or {}).get("calls") for p in c.graphs
    )
