"""Group a stream of records into compiles: status, stacks, graphs, breaks, symbols, inputs."""

from __future__ import annotations

from tlview.index.core import State, add_phase
from tlview.index.finish import rank_in_name
from tlview.index.handlers import HANDLERS, handler
from tlview.index.kinds import CONTEXT_INTS, count_kind, peek
from tlview.index.merge import merge
from tlview.model import LogIndex, Phase
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
        """The log's index, once every record is read: every compile closed and finished."""
        log = self.log
        for cid, st in self.open.items():
            c = self.compiles.get(cid) if st.chromium else None
            if c is not None:
                for name, t0, depth in st.chromium:
                    add_phase(c, Phase(name, t0, None, depth))
        self.open.clear()
        self.tensors.clear()
        self.storages.clear()
        if self.run:
            log.notes.append(
                f"this process started compile ids over {self.run} time(s) "
                "(torch._dynamo.reset()): the compiles of each later run are named ID@2, ID@3, ..."
            )
        if log.rank is None:
            rank = rank_in_name(log.name)
            if rank is not None:
                log.rank, log.rank_from = rank, "file name"
        self.compiles.close_all(spill=False)
        self.compiles.restate()
        log.compiles = self.compiles.listing()
        return log

    def merge(self, later: State) -> None:
        """Take in what the reader of the part of this log after ours found (merge.py)."""
        merge(self, later)
