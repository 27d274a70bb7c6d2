"""vLLM's compile calls in `tlview.report/2` (`vllm`, `vllm_ranks`): keys written only when
vLLM wrote records, so the JSON of any other log is what it was."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # analyze/vllm.py is imported only for a log with vLLM's records
    from tlview.analyze.vllm import (
        RangeGroup,
        RankRow,
        VllmCall,
        VllmConfig,
        VllmPiece,
        VllmReport,
    )


def vllm_keys(v: VllmReport | None) -> dict[str, Any]:
    """`vllm` (every call, log by log) and, for a job, `vllm_ranks`."""
    if v is None:
        return {}
    out: dict[str, Any] = {"vllm": [call(c) for c in v.calls]}
    if v.ranks:
        out["vllm_ranks"] = [rank_row(r) for r in v.ranks]
    return out


def call(c: VllmCall) -> dict[str, Any]:
    return {
        "log": c.log,
        "rank": c.rank,
        "index": c.index,
        "prefix": c.prefix,
        "event": c.event,
        "cache_hit": c.cache_hit,
        "compile": c.compile,
        "line": c.line,
        "config": None if c.config is None else config(c.config),
        "split_graph": c.split_graph,
        "patterns": c.patterns,
        "frame": c.frame,
        "submods": c.submods,
        "seconds": c.seconds,
        "ranges": [range_group(g) for g in c.by_range()],
    }


def config(c: VllmConfig) -> dict[str, Any]:
    return {
        "line": c.line,
        "model": c.model,
        "prefix": c.prefix,
        "mode": c.mode,
        "backend": c.backend,
        "cudagraph_mode": c.cudagraph_mode,
        "custom_ops": c.custom_ops,
        "splitting_ops": c.splitting_ops,
        "compile_sizes": c.compile_sizes,
        "compile_ranges": c.compile_ranges,
        "inductor_passes": c.inductor_passes,
        "enabled_passes": c.enabled_passes,
        "use_inductor_graph_partition": c.use_inductor_graph_partition,
        "dynamic_shapes_type": c.dynamic_shapes_type,
        "dynamic_shapes_evaluate_guards": c.dynamic_shapes_evaluate_guards,
        "other": c.other,
    }


def range_group(g: RangeGroup) -> dict[str, Any]:
    return {
        "label": g.label,
        "capture_size": g.capture_size,
        "pieces": [piece(p) for p in g.pieces],
    }


def piece(p: VllmPiece) -> dict[str, Any]:
    return {
        "submod": p.submod,
        "index": p.index,
        "total": p.total,
        "start": p.start,
        "end": p.end,
        "single_size": p.single_size,
        "capture_size": p.capture_size,
        "compile": p.compile,
        "line": p.line,
        "graph": p.graph,
        "artifacts": [name for name, _ in p.artifacts],
        "pass_graphs": p.pass_graphs,
        "cache": p.cache,
        "seconds": p.seconds,
        "seconds_from": p.seconds_from,
    }


def rank_row(r: RankRow) -> dict[str, Any]:
    return {
        "index": r.index,
        "prefix": r.prefix,
        "differs": r.differs,
        "ranks": [
            {
                "rank": x.rank,
                "log": x.log,
                "pieces": x.pieces,
                "compiles": x.compiles,
                "hits": x.hits,
                "seconds": x.seconds,
            }
            for x in r.cells
        ],
    }
