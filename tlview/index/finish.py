"""The end of a log: each compile's status, its name from its frame's, and what it lacks."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import partial
from typing import Any

from tlview.index import inputs as inputs_mod
from tlview.index.core import State, add_phase
from tlview.index.kinds import plain_restart
from tlview.index.recompiles import explain_frame
from tlview.model import Compile, CompileId, GraphBreak, LogIndex, Phase
from tlview.runtime.store import CompileList, Facts, Spilled
from tlview.units import number

_RANK_IN_NAME = re.compile(r"rank_([0-9]+)")  # ASCII: U+0663 names no rank


def finish(ix: State) -> LogIndex:
    """The log's compiles, by frame and with their statuses, once every record is read."""
    log = ix.log
    for cid, st in ix.open.items():
        c = ix.compiles.get(cid) if st.chromium else None
        if c is not None:
            for name, t0, depth in st.chromium:
                add_phase(c, Phase(name, t0, None, depth))
    ix.open.clear()
    ix.tensors.clear()
    ix.storages.clear()
    if ix.run:
        log.notes.append(
            f"this process started compile ids over {ix.run} time(s) "
            "(torch._dynamo.reset()): the compiles of each later run are named ID@2, ID@3, ..."
        )
    if log.rank is None:
        m = _RANK_IN_NAME.search(log.name)
        rank = number(m.group(1)) if m else None
        if rank is not None:
            log.rank, log.rank_from = rank, "file name"
    # Statuses come from each compile's facts, so compiles already on disk stay there;
    # each is finished (inputs resolved) and explained when it is read back.
    out = CompileList(partial(finish_compile, log.rank), explain_frame)
    for frame_ids in _by_frame(ix.compiles.keys()):
        entries: list[list[Compile | Spilled]] = []
        facts: list[list[Facts | None]] = []
        for attempt_ids in frame_ids:
            got = [ix.compiles.entry(cid) for cid in attempt_ids]
            fs = [f for _, f in got]
            if attempt_ids != [None]:
                _status(fs, ix.started)
            entries.append([e for e, _ in got])
            facts.append(list(fs))
        if frame_ids != [[None]]:
            _same_code(facts)
        out.add_frame(entries, facts)
    log.compiles = out
    return log


def finish_compile(rank: int | None, c: Compile) -> None:
    """Fill in what a compile gets from its log, and resolve its inputs."""
    if c.rank is None:
        c.rank = rank
    if c.function is None and c.stack:
        c.function = c.stack[-1].name
        c.file = c.file or c.stack[-1].file
        c.source_line = c.source_line or c.stack[-1].line
    for s in c.input_sets:
        s.superseded = c.status == "restarted"
    c.inputs = inputs_mod.resolve(c)
    # In time order (a phase is logged when it ends; a log read in parts ends some later).
    c.phases.sort(key=lambda p: (p.start_us, p.depth))


def _order(cid: CompileId | None) -> tuple[bool, tuple[int, ...]]:
    return (cid is not None, cid.sort_key if cid is not None else (0, 0, 0, 0))


def _by_frame(ids: Iterable[CompileId | None]) -> list[list[list[CompileId | None]]]:
    """Compile ids in order, as frames -> compiles -> attempts."""
    frames: dict[tuple[Any, ...], dict[CompileId | None, list[CompileId | None]]] = {}
    for cid in sorted(ids, key=_order):
        key = ("-",) if cid is None else (cid.run, cid.autograd, cid.frame)
        base = None if cid is None else cid.base
        frames.setdefault(key, {}).setdefault(base, []).append(cid)
    return [list(f.values()) for f in frames.values()]


def _name_alike(facts: list[Facts]) -> None:
    """Name the compiles of one code that logged no name of their own as the latest that did."""
    named = next((f.code for f in reversed(facts) if f.code[0] is not None), None)
    if named is not None:
        for f in facts:
            if f.code[0] is None:
                f.code = named


def _same_code(frame: list[list[Facts | None]]) -> None:
    """Every compile of a frame compiles one code object: one that logged neither a name nor
    a stack (dynamo gave up before tracing: the recompile limit) is named as the others."""
    every = [f for attempts in frame for f in attempts if f is not None]
    _name_alike([f for f in every if f.code[0] is not None or not f.stack])


INFERRED_LIMIT = "recompile limit (inferred)"  # fail_type of a compile torch did not start


def _status(attempts: list[Facts], started: set[CompileId | None]) -> None:
    """Set the status of a compile's attempts from their metrics and graph breaks."""
    attempts.sort(key=lambda c: c.id.attempt if c.id else 0)
    final = attempts[-1]
    broke = any(a.graph_breaks for a in attempts)
    for a in attempts[:-1]:
        a.status = "restarted"
    for a in attempts[1:]:
        if not a.stack:
            a.stack = attempts[0].stack
    # Every attempt compiles the same code: an attempt without metrics of its own (a restart)
    # is named as the final one's metrics name it. Its dynamo_start stack can end in the
    # caller instead (torch before 2.6 logged eval_frame's `_fn` there).
    _name_alike(attempts)
    for i, a in enumerate(attempts[:-1]):
        if i < len(final.restart_reasons) and not a.restart_reasons:
            a.restart_reasons = [final.restart_reasons[i]]
    if not broke and final.restart_reasons and not any(a.graph_breaks for a in attempts):
        # Logs without dynamo_graph_break_reason artifacts (older torch): the restart
        # reasons are the graph breaks.
        for r in final.restart_reasons:
            # A restart to make a float a tensor (Tensorify...) breaks no graph.
            if not r.lower().startswith(("restart", "speculat")) and plain_restart(r) is None:
                final.graph_breaks.append(
                    GraphBreak(r.strip(), None, final.first_log_line, r[:2000])
                )
        broke = bool(final.graph_breaks)
    if final.fail_type:
        final.status = "failed"
    elif not final.has_metrics:
        # No metrics: a compile dynamo started and never finished (a crashed run), or one
        # logged without dynamo_start/metrics: compiled autograd's graphs, and torch.export's
        # trace (strict: its dynamo graph; torch 2.15's non-strict: inputs, symbols, guards).
        if any(a.id in started for a in attempts):
            final.status = "incomplete"
        elif final.reasons_only:
            # torch 2.5 and older: dynamo logged why the frame would recompile, then compiled
            # nothing (no dynamo_start, no metrics): it had hit the frame's recompile limit.
            final.status = "failed"
            final.fail_type = INFERRED_LIMIT
            final.fail_reason = (
                "cache_size_limit reached: dynamo logged why the frame would recompile, then "
                "nothing more (torch 2.5 and older log no dynamo_start or metrics for a frame "
                "past its recompile limit; tlview infers it)"
            )
        elif final.graphs and final.id is not None and final.id.autograd is not None:
            final.status = "ok"
        else:
            final.status = "traced" if final.graphs or final.described else "incomplete"
    elif broke:
        final.status = "graph_break"
    elif final.graph_ops in (0, None) and not final.graphs:
        final.status = "empty"  # no ops, or none counted and no graph logged
    else:
        final.status = "ok"
