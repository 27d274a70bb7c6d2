"""A compile finished: its status, its name from its frame's, its inputs, why it recompiled.

A compile (all attempts of one id) is finished when it closes (compiles.py): when no record has
touched it for a while, or at the end of the log. What finishing changed of the fields records
set is kept (`Finisher.raw`), so a record that comes later opens the compile again as it was
read, and it is finished again when it closes. Two things a compile cannot know when it closes
are set right at the end of the log (`Finisher.stale`): the log's rank, when a record names it
only later, and the name of a frame whose named compile comes later.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Any

from tlview.index import inputs as inputs_mod
from tlview.index.kinds import plain_restart
from tlview.model import Compile, CompileId, GraphBreak, LogIndex
from tlview.units import number

_RANK_IN_NAME = re.compile(r"rank_([0-9]+)")  # ASCII: U+0663 names no rank
INFERRED_LIMIT = "recompile limit (inferred)"  # fail_type of a compile torch did not start
# Failures logged as artifacts that end the compile when they come without its metrics (an
# eager backward's failure is suppressed by torch: never).
FATAL = frozenset({"fx_interpreter_error", "inductor_spmd_graph_mismatch"})

FrameKey = tuple[Any, ...]
Code = tuple[str | None, str | None, int | None]  # function, file, first source line
# What finishing may change of the fields records set: see `_raw`.
Raw = tuple[Any, ...]
SortKey = tuple[bool, tuple[int, ...]]


def order(cid: CompileId | None) -> SortKey:
    """Compiles in report order: `-/-` first, then by run, frame, compile and attempt."""
    return (cid is not None, cid.sort_key if cid is not None else (0, 0, 0, 0))


def frame_of(cid: CompileId | None) -> FrameKey:
    """The frame a compile compiles (every compile of one code object, across recompiles)."""
    return ("-",) if cid is None else (cid.run, cid.autograd, cid.frame)


def base_of(cid: CompileId | None) -> CompileId | None:
    """The compile an attempt is of (its id with attempt 0)."""
    return None if cid is None else cid.base


def rank_in_name(name: str) -> int | None:
    """The rank a log's file name gives (`..._rank_3_...`), if any."""
    m = _RANK_IN_NAME.search(name)
    return number(m.group(1)) if m else None


def code_of(c: Compile) -> Code:
    return (c.function, c.file, c.source_line)


def _raw(c: Compile) -> Raw:
    return (
        c.rank,
        c.stack,
        code_of(c),
        c.restart_reasons,
        len(c.graph_breaks),
        c.fail_type,
        c.fail_reason,
        c.events_dropped,  # resolving inputs counts the descriptions an input set dropped
    )


class Finisher:
    """Finishes the compiles of one process's log as they close, and opens them again."""

    def __init__(
        self,
        log: LogIndex,
        started: set[CompileId | None],
        unsorted: Container[CompileId | None] = (),
    ) -> None:
        self.log = log
        self.started = started  # compiles with a dynamo_start record
        # Compiles whose phases are left in record order: a later part's whose events began in
        # the part before (the merge still changes their depths, and finishes them again).
        self.unsorted = unsorted
        self.raw: dict[CompileId | None, Raw] = {}  # fields finishing changed, as read
        self.filled: dict[CompileId | None, int | None] = {}  # rank given (None: none yet)
        self.took: dict[CompileId | None, Code | None] = {}  # named as their frame
        self.named: dict[FrameKey, tuple[SortKey, Code]] = {}  # latest named compile's code

    def rank(self) -> int | None:
        """The log's rank as known now: from its records, else from its file name."""
        log = self.log
        return log.rank if log.rank is not None else rank_in_name(log.name)

    def finish(self, attempts: list[Compile]) -> None:
        """Finish one compile's attempts (in attempt order), before they are explained."""
        before = [_raw(c) for c in attempts]
        if attempts[0].id is not None:
            status(attempts, self.started)
            self._as_frame(attempts)
        rank = self.rank()
        for c, raw in zip(attempts, before, strict=True):
            if c.rank is None:
                self.filled[c.id] = rank
            finish_compile(rank, c, c.id not in self.unsorted)
            if _raw(c) != raw:
                self.raw[c.id] = raw

    def _as_frame(self, attempts: list[Compile]) -> None:
        """Name a compile that logged neither a name nor a stack (dynamo gave up before tracing:
        the recompile limit) as the latest of its frame that did."""
        frame = frame_of(attempts[0].id)
        for c in attempts:
            if c.function is not None:
                mark = (order(c.id), code_of(c))
                if frame not in self.named or self.named[frame][0] < mark[0]:
                    self.named[frame] = mark
        got = self.named.get(frame)
        for c in attempts:
            if c.function is None and not c.stack:
                self.took[c.id] = None if got is None else got[1]
                if got is not None:
                    c.function, c.file, c.source_line = got[1]

    def open(self, c: Compile) -> None:
        """A finished compile as it was read, for records that come after it closed."""
        raw = self.raw.pop(c.id, None)
        self.filled.pop(c.id, None)
        self.took.pop(c.id, None)
        c.status = "outside" if c.id is None else "incomplete"
        c.recompile = None
        c.inputs = []
        for s in c.input_sets:
            s.superseded = False
        if raw is not None:
            (c.rank, c.stack, code, c.restart_reasons, breaks, c.fail_type, c.fail_reason) = raw[:7]
            c.events_dropped = raw[7]
            c.function, c.file, c.source_line = code
            del c.graph_breaks[breaks:]

    def stale(self) -> dict[CompileId | None, tuple[int | None, Code | None]]:
        """At the end of the log: the compiles whose rank or frame name changed after they
        closed, with what they get now (None: unchanged)."""
        out: dict[CompileId | None, tuple[int | None, Code | None]] = {}
        rank = self.rank()
        if rank is not None:
            for cid, given in self.filled.items():
                if given != rank:
                    out[cid] = (rank, None)
        for cid, code in self.took.items():
            now = self.named.get(frame_of(cid))
            if now is not None and now[1] != code:
                out[cid] = (out.get(cid, (None, None))[0], now[1])
        return out

    def take(self, other: Finisher, cids: list[CompileId | None]) -> None:
        """Take over what another reader's finisher knows of these (finished) compiles."""
        for cid in cids:
            if cid in other.raw:
                self.raw[cid] = other.raw.pop(cid)
            if cid in other.filled:
                self.filled[cid] = other.filled.pop(cid)
            if cid in other.took:
                self.took[cid] = other.took.pop(cid)

    def take_names(self, other: Finisher) -> None:
        """The latest named compile of each frame, over both readers."""
        for frame, mark in other.named.items():
            if frame not in self.named or self.named[frame][0] < mark[0]:
                self.named[frame] = mark


def apply_stale(c: Compile, rank: int | None, code: Code | None) -> None:
    """What `Finisher.stale` found, on a finished compile."""
    if rank is not None:
        c.rank = rank
    if code is not None:
        c.function, c.file, c.source_line = code


def finish_compile(rank: int | None, c: Compile, sort: bool = True) -> None:
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
    if sort:
        # In time order (a phase is logged when it ends; a log read in parts ends some later).
        c.phases.sort(key=lambda p: (p.start_us, p.depth))


def _name_alike(attempts: list[Compile]) -> None:
    """Name the attempts that logged no name of their own as the latest that did."""
    named = next((code_of(c) for c in reversed(attempts) if c.function is not None), None)
    if named is not None:
        for c in attempts:
            if c.function is None:
                c.function, c.file, c.source_line = named


def status(attempts: list[Compile], started: set[CompileId | None]) -> None:
    """Set the status of a compile's attempts from their metrics and graph breaks."""
    final = attempts[-1]
    reasons_only = _reasons_only(final)
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
    broke = any(a.graph_breaks for a in attempts)
    if not broke and final.restart_reasons:
        broke = _breaks_from_restarts(final)
    _failed_by_trouble(final)
    final.status = _final_status(final, broke, reasons_only, any(a.id in started for a in attempts))


def _failed_by_trouble(final: Compile) -> None:
    """A compile without metrics, beside the error torch logged when it stopped
    (fx_interpreter_error, ...), failed of that error."""
    if final.metrics is not None or final.fail_type:
        return
    trouble = next((t for t in final.troubles if t.kind in FATAL), None)
    if trouble is not None:
        final.fail_type, final.fail_reason = trouble.kind, trouble.text


def _reasons_only(c: Compile) -> bool:
    """It logged why the frame would recompile, and nothing else."""
    return (
        bool(c.recompile_reasons)
        and c.metrics is None
        and not (c.graphs or c.input_sets or c.symbols or c.stack)
    )


def _breaks_from_restarts(final: Compile) -> bool:
    """Logs without dynamo_graph_break_reason artifacts (older torch): the restart reasons are
    the graph breaks. Whether there are any."""
    for r in final.restart_reasons:
        # A restart to make a float a tensor (Tensorify...) breaks no graph.
        if not r.lower().startswith(("restart", "speculat")) and plain_restart(r) is None:
            final.graph_breaks.append(GraphBreak(r.strip(), None, final.first_log_line, r[:2000]))
    return bool(final.graph_breaks)


def _final_status(c: Compile, broke: bool, reasons_only: bool, started: bool) -> Any:
    if c.fail_type:
        return "failed"
    if c.metrics is None:
        return _without_metrics(c, reasons_only, started)
    if broke:
        return "graph_break"
    if c.graph_ops in (0, None) and not c.graphs:
        return "empty"  # no ops, or none counted and no graph logged
    return "ok"


def _without_metrics(c: Compile, reasons_only: bool, started: bool) -> Any:
    """No metrics: a compile dynamo started and never finished (a crashed run), or one logged
    without dynamo_start/metrics: compiled autograd's graphs, and torch.export's trace (strict:
    its dynamo graph; torch 2.15's non-strict: inputs, symbols, guards)."""
    if started:
        return "incomplete"
    if reasons_only:
        # torch 2.5 and older: dynamo logged why the frame would recompile, then compiled
        # nothing (no dynamo_start, no metrics): it had hit the frame's recompile limit.
        c.fail_type = INFERRED_LIMIT
        c.fail_reason = (
            "cache_size_limit reached: dynamo logged why the frame would recompile, then "
            "nothing more (torch 2.5 and older log no dynamo_start or metrics for a frame "
            "past its recompile limit; tlview infers it)"
        )
        return "failed"
    if c.graphs and c.id is not None and c.id.autograd is not None:
        return "ok"
    return "traced" if c.graphs or c.input_sets or c.symbols else "incomplete"
