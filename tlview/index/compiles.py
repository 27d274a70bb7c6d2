"""The compiles of one process's log while it is read: open ones in memory, closed ones finished.

A compile is open while records may still come for it. When too many are open (IN_MEMORY
compiles, or about IN_MEMORY_BYTES of them), the least recently touched compile closes with all
its attempts: it is finished (finish.py), explained against the compile of its frame before it
(recompiles.py), and spilled to disk. A record for a closed compile opens it again, as it was
read. At the end of the log every compile closes, and the log's compiles are a plain sequence
of finished ones (store.CompileList), in report order.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from tlview.index.finish import (
    Finisher,
    FrameKey,
    apply_stale,
    base_of,
    frame_of,
    order,
)
from tlview.index.recompiles import explain
from tlview.model import Compile, CompileId
from tlview.runtime.store import CompileList, Marks, Spilled, SpillFile, marks, weight

# Compiles held open in memory per log; beyond this the least recently touched close, to disk.
IN_MEMORY = 256
# ... and at most about this many bytes of them (see `store.weight`), the most recent few aside.
IN_MEMORY_BYTES = 8 << 20
KEEP_RECENT = 4
AT_HAND = 8  # closed compiles kept in memory to explain the next compile of their frame

Cid = CompileId | None


class Compiles:
    """A log's compiles as it is read: open in memory, or closed (finished, mostly on disk)."""

    def __init__(self, finisher: Finisher, limit: int | None = None) -> None:
        self.fin = finisher
        self.limit = IN_MEMORY if limit is None else limit
        self.open: OrderedDict[Cid, Compile] = OrderedDict()  # least recently touched first
        self.weights: dict[Cid, int] = {}  # of the open ones, as last measured
        self.total = 0
        self.done: dict[Cid, Compile | Spilled] = {}  # closed: finished, in memory or on disk
        self.marks: dict[Cid, Marks] = {}  # of each closed compile, kept in memory (store.Marks)
        self.attempts: dict[Cid, list[Cid]] = {}  # each compile's attempts, in order
        self.frames: dict[FrameKey, list[Cid]] = {}  # each frame's compiles, in order
        self.file: SpillFile | None = None
        self.at_hand: OrderedDict[Cid, Compile] = OrderedDict()  # closed, recently loaded

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["at_hand"] = OrderedDict()
        return state

    def __contains__(self, cid: Cid) -> bool:
        return cid in self.open or cid in self.done

    def __iter__(self) -> Iterator[Cid]:
        return iter([*self.open, *self.done])

    def get(self, cid: Cid) -> Compile | None:
        """An open compile, opened again if it had closed; None if it has no record yet."""
        c = self.open.get(cid)
        if c is not None:
            self.open.move_to_end(cid)
            return c
        if cid not in self.done:
            return None
        self.reopen(base_of(cid))
        self._close_past_limits()
        return self.open[cid]

    def put(self, cid: Cid, c: Compile) -> None:
        """A new compile (its first record), open."""
        base = base_of(cid)
        attempts = self.attempts.get(base)
        if attempts is None:
            self.attempts[base] = [cid]
            bisect.insort(self.frames.setdefault(frame_of(cid), []), base, key=order)
        else:
            if self.is_closed(base):  # a later attempt of a closed compile: all open
                self.reopen(base)
            bisect.insort(attempts, cid, key=order)
        self._open(cid, c)
        self._close_past_limits()

    def _open(self, cid: Cid, c: Compile) -> None:
        self.open[cid] = c
        self.open.move_to_end(cid)
        # Compiles with hundreds of inputs weigh megabytes: bound the bytes too, keeping
        # the few most recent (records for them may still come). A compile grows while it is
        # among the most recent, so only those are weighed again; older ones keep their weight.
        for k, (rid, rc) in enumerate(reversed(self.open.items())):
            if k > KEEP_RECENT:
                break
            w = weight(rc)
            self.total += w - self.weights.get(rid, 0)
            self.weights[rid] = w

    def _close_past_limits(self) -> None:
        while len(self.open) > self.limit or (
            self.total > IN_MEMORY_BYTES and len(self.open) > KEEP_RECENT
        ):
            current = base_of(next(reversed(self.open)))
            oldest = next(((cid,) for cid in self.open if base_of(cid) != current), None)
            if oldest is None:  # one compile's attempts: they stay open together
                return
            self.close(base_of(oldest[0]), spill=True)

    def close(self, base: Cid, spill: bool) -> None:
        """Finish a compile's attempts, explain it, and keep them (on disk with `spill`)."""
        attempts = []
        for cid in self.attempts[base]:
            attempts.append(self.open.pop(cid))
            self.total -= self.weights.pop(cid, 0)
        self.fin.finish(attempts)
        before, after = self._around(base)
        previous = self._closed(before) if before is not None else None
        if before is None or previous is not None:
            explain(previous, attempts)
        for c in attempts:
            self._keep(c.id, c, spill)
        if after is not None and self.is_closed(after):
            self._explain_again(attempts, after)

    def reopen(self, base: Cid) -> None:
        """Open a closed compile's attempts again, as they were read."""
        for cid in self.attempts[base]:
            e = self.done.pop(cid)
            del self.marks[cid]
            c = self.at_hand.pop(cid, None) or self._load(e)
            self.fin.open(c)
            self._open(cid, c)

    def _around(self, base: Cid) -> tuple[Cid | None, Cid | None]:
        """The compiles of the frame just before and after this one (None: none); a
        compile without an id (`-/-`) has none."""
        if base is None:
            return None, None
        bases = self.frames[frame_of(base)]
        i = bisect.bisect_left(bases, order(base), key=order)
        before = bases[i - 1] if i > 0 else None
        after = bases[i + 1] if i + 1 < len(bases) else None
        return before, after

    def is_closed(self, base: Cid) -> bool:
        return self.attempts[base][0] in self.done

    def _closed(self, base: Cid) -> list[Compile] | None:
        """A compile's finished attempts, or None while it is open."""
        if not self.is_closed(base):
            return None
        return [self._at_hand(cid) for cid in self.attempts[base]]

    def _at_hand(self, cid: Cid) -> Compile:
        c = self.at_hand.get(cid)
        if c is None:
            e = self.done[cid]
            c = self._load(e)
            if not isinstance(e, Compile):
                self.at_hand[cid] = c
                while len(self.at_hand) > AT_HAND:
                    self.at_hand.popitem(last=False)
        else:
            self.at_hand.move_to_end(cid)
        return c

    def _keep(self, cid: Cid, c: Compile, spill: bool) -> None:
        """A finished compile kept, in memory or (`spill`) on disk, also at hand."""
        self.marks[cid] = marks(c)
        if spill:
            if self.file is None:
                self.file = SpillFile()
            self.done[cid] = self.file.dump(c)
            self.at_hand[cid] = c
            self.at_hand.move_to_end(cid)
            while len(self.at_hand) > AT_HAND:
                self.at_hand.popitem(last=False)
        else:
            self.done[cid] = c

    @staticmethod
    def _load(e: Compile | Spilled) -> Compile:
        return e if isinstance(e, Compile) else e[0].load(e[1], e[2])

    def close_all(self, spill: bool) -> None:
        """Close every open compile, in report order (each explained once)."""
        for base in sorted({base_of(cid) for cid in self.open}, key=order):
            self.close(base, spill)

    def restate(self) -> None:
        """At the end of the log: the rank and frame names finished compiles did not know."""
        for cid, (rank, code) in self.fin.stale().items():
            e = self.done[cid]
            c = self._at_hand(cid)
            apply_stale(c, rank, code)
            self._keep(cid, c, not isinstance(e, Compile))

    def listing(self) -> CompileList:
        """The log's finished compiles, in report order (every compile closed)."""
        assert not self.open
        cids = sorted(self.done, key=order)
        return CompileList([self.done[cid] for cid in cids], [self.marks[cid] for cid in cids])

    def bases(self) -> list[Cid]:
        """Every compile (its attempts' base id), in report order."""
        return sorted(self.attempts, key=order)

    def take(self, base: Cid) -> list[Compile]:
        """A compile's attempts as read, out of this reader (for another to take in)."""
        if self.is_closed(base):
            self.reopen(base)
        out = []
        for cid in self.attempts.pop(base):  # its frame's list keeps it: see adopt
            out.append(self.open.pop(cid))
            self.total -= self.weights.pop(cid, 0)
        return out

    def adopt(self, other: Compiles, base: Cid) -> None:
        """Take over a closed compile another reader of this log finished (a later part)."""
        was_before, _ = other._around(base)  # the other reader's frames stay as they were read
        cids = other.attempts.pop(base)
        for cid in cids:
            self.done[cid] = other.done.pop(cid)
            self.marks[cid] = other.marks.pop(cid)
        self.fin.take(other.fin, cids)
        self.attempts[base] = cids
        bisect.insort(self.frames.setdefault(frame_of(base), []), base, key=order)
        # It was explained against the compile before it in its own part: again when this
        # reader has another one before it, and the one after it (ids out of order) too.
        before, after = self._around(base)
        if before != was_before:
            previous = self._closed(before) if before is not None else None
            if previous is not None or before is None:
                self._explain_again(previous, base)
        if after is not None and self.is_closed(after):
            self._explain_again(self._closed(base), after)

    def _explain_again(self, previous: list[Compile] | None, base: Cid) -> None:
        """Explain a closed compile again, against a new compile before it."""
        attempts = self._closed(base)
        assert attempts is not None
        explain(previous, attempts)
        final = attempts[-1]
        self._keep(final.id, final, not isinstance(self.done[final.id], Compile))

    def files(self) -> list[SpillFile]:
        """The spill files of the closed compiles on disk (this reader's own), each once."""
        return list({id(e[0]): e[0] for e in self.done.values() if isinstance(e, tuple)}.values())

    def in_memory(self) -> list[Compile]:
        return [*self.open.values(), *(e for e in self.done.values() if isinstance(e, Compile))]

    def shift_lines(self, n: int) -> None:
        """Move the log lines of every compile held by n (see `Compile.shift_lines`)."""
        self.at_hand.clear()
        for c in self.in_memory():
            c.shift_lines(n)
        for f in self.files():  # moved as each compile is read back
            f.shift += n

    def drop_texts(self, lines: frozenset[int]) -> None:
        """Forget the kept text of the payloads at these lines (see `Compile.drop_texts`)."""
        self.at_hand.clear()
        for c in self.in_memory():
            c.drop_texts(lines)
        for f in self.files():  # forgotten as each compile is read back
            f.dropped |= lines
