"""Group a stream of records into compiles: status, stacks, graphs, breaks, symbols, inputs."""

from __future__ import annotations

from tlview.index.core import State
from tlview.index.finish import finish
from tlview.index.handlers import HANDLERS, handler
from tlview.index.kinds import CONTEXT_INTS, count_kind, peek
from tlview.index.merge import merge
from tlview.model import LogIndex
from tlview.parse import Record


class Indexer(State):
    """Builds the compile index of one process's records, as they stream past: each record is
    counted and checked, then read by the handler of its kind (handlers.HANDLERS)."""

    def add(self, rec: Record) -> None:
        log = self.log
        log.records += 1
        kind = rec.kind
        kinds = log.kinds
        if kind in kinds:
            kinds[kind] += 1
        else:
            count_kind(kinds, kind)
        if log.first_time is None:
            log.first_time = rec.time
        log.last_time = rec.time
        if rec.rank is not None and log.rank is None:
            log.rank, log.rank_from = rec.rank, "records"
        ctx = rec.meta
        for key in CONTEXT_INTS:
            v = ctx.get(key)
            if v is not None and (type(v) is not int or v < 0):
                self.bad(rec, f"{key} is not a non-negative integer: {peek(v)}")
                break
        (HANDLERS.get(kind) or handler(kind))(self, rec)

    def finish(self) -> LogIndex:
        """The log's index, once every record is read (finish.py)."""
        return finish(self)

    def merge(self, later: State) -> None:
        """Take in what the reader of the part of this log after ours found (merge.py)."""
        merge(self, later)
