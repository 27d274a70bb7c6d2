"""Keep compiles on disk once there are many, so memory stays flat however long the log is."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

from tlview.model import Compile, CompileId, GraphBreak, StackFrame, Status, shifted_breaks

# Compiles held in memory per log; beyond this the least recently touched go to a temp file.
IN_MEMORY = 256
# ... and at most about this many bytes of them (see `weight`), the most recent few aside.
IN_MEMORY_BYTES = 8 << 20
KEEP_RECENT = 4
# Whether a pickled CompileList hands over its spill file (same machine) or its contents.
SEND_FILES = True
# Strings longer than this (configs, versions, stacks) are pickled once per log, by reference.
SHARED_MIN = 64


class Strings:
    """One copy of each long string many compiles share (configs, versions, reprs)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.items: list[str] = []

    def intern(self, s: str) -> str:
        i = self.ids.get(s)
        if i is not None:
            return self.items[i]
        self.ids[s] = len(self.items)
        self.items.append(s)
        return s


class _Unpickler(pickle.Unpickler):
    """Reads back only tlview's own records from tlview's own temp file."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "tlview.model":
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected class {module}.{name} in tlview's spill file")


# This run's directory of temp files (spill files, a forked writer's output): made by the first
# process that needs one, and emptied and removed when that process exits, so what a forked copy
# leaves there (it leaves with os._exit, and ^C can stop a hand-over half way) goes too.
_DIR: tuple[int, str] | None = None
# Off in a Dask worker: it outlives the run and is stopped without exit handlers, so its temp
# files go straight in the system temp directory (each is removed when no longer referenced).
RUN_DIR = True


def temp_dir() -> str:
    """This run's temp directory; a process about to fork makes it first, so its copies use it."""
    global _DIR
    if not RUN_DIR:
        import tempfile

        return tempfile.gettempdir()
    if _DIR is None:
        import atexit
        import tempfile

        from tlview.runtime.leftovers import prefix, sweep

        base = tempfile.gettempdir()
        sweep(base, "tlview-")  # what runs killed before they could clean up left here
        path = tempfile.mkdtemp(prefix=prefix("tlview-"), dir=base)
        _DIR = (os.getpid(), path)
        atexit.register(_remove_dir, os.getpid(), path)
    return _DIR[1]


def _remove_dir(owner: int, path: str) -> None:
    if os.getpid() != owner:  # a forked copy that exits normally (a pool worker) leaves it
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        os.rmdir(path)


class SpillFile:
    """An append-only temp file of pickled compiles, deleted when no longer referenced."""

    def __init__(
        self, path: str | None = None, shift: int = 0, dropped: frozenset[int] = frozenset()
    ) -> None:
        # What a reader of a later part of a log (index/halves.py) did not know, applied to each
        # compile read back: lines to add (it numbered its lines from its own start), and the
        # payloads whose text one reader of the whole log would not have kept.
        self.shift = shift
        self.dropped = dropped
        if path is None:
            import tempfile  # a log of few compiles never spills: a few ms not spent at start

            from tlview.runtime.leftovers import prefix

            where = temp_dir()
            fd, self.path = tempfile.mkstemp(prefix=prefix("tlview-"), suffix=".spill", dir=where)
            self.f = os.fdopen(fd, "w+b")
            _MADE.append((os.getpid(), self.path))
        else:
            self.path = path
            self.f = open(path, "r+b")  # noqa: SIM115 - closed by the finalizer
        self.end = self.f.seek(0, os.SEEK_END)
        # Only the process that made or adopted the file deletes it: a forked renderer
        # (runtime/halves.py) shares it and must leave it be.
        self._final = weakref.finalize(self, _remove, self.f, self.path, os.getpid())

    def dump(self, c: Compile) -> tuple[SpillFile, int, int]:
        data = pickle.dumps(c, pickle.HIGHEST_PROTOCOL)
        self.f.seek(self.end)
        self.f.write(data)
        at = self.end
        self.end += len(data)
        return self, at, len(data)

    def load(self, at: int, n: int) -> Compile:
        self.f.flush()
        # pread: a forked renderer reads the same open file, so no shared offset is moved.
        c = _Unpickler(io.BytesIO(os.pread(self.f.fileno(), n, at))).load()
        assert isinstance(c, Compile)
        if self.shift:
            c.shift_lines(self.shift)
        if self.dropped:
            c.drop_texts(self.dropped)
        return c

    def __reduce__(self) -> Any:
        # Sent to another process on this machine (a pool worker's result, the other half of
        # a split log): the receiver takes the file over.
        if not SEND_FILES:
            raise pickle.PicklingError("spill files cannot be sent to another machine")
        self.f.flush()
        self._final.detach()
        with contextlib.suppress(OSError):
            self.f.close()
        return (SpillFile, (self.path, self.shift, self.dropped))


Spilled = tuple[SpillFile, int, int]  # where a compile is on disk

# Spill files made, with the process that made each: see `remove_made_here`.
_MADE: list[tuple[int, str]] = []


def remove_made_here() -> None:
    """Delete the spill files this process made: a forked reader whose work will not be read
    (its finalizers do not run: it leaves with os._exit, and a file being handed over has
    already let go of its own)."""
    me = os.getpid()
    for pid, path in _MADE:
        if pid == me:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _remove(f: IO[bytes], path: str, owner: int) -> None:
    with contextlib.suppress(OSError):
        f.close()
    if os.getpid() == owner:
        with contextlib.suppress(OSError):
            os.unlink(path)


@dataclass(slots=True)
class Facts:
    """What the final pass needs of a compile to set its status, without loading it."""

    id: CompileId | None
    status: Status
    has_metrics: bool
    fail_type: str | None
    graph_ops: int | None
    graphs: int
    graph_breaks: list[GraphBreak]
    restart_reasons: list[str]
    stack: list[StackFrame]
    first_log_line: int
    code: tuple[str | None, str | None, int | None]  # function, file, first line, from metrics
    described: bool  # it logged inputs or symbols (what an export's trace logs, and no more)
    reasons_only: bool  # it logged why the frame would recompile, and nothing else
    fail_reason: str | None = None  # a failure the final pass inferred (set with fail_type)

    @classmethod
    def of(cls, c: Compile) -> Facts:
        return cls(
            c.id,
            c.status,
            c.metrics is not None,
            c.fail_type,
            c.graph_ops,
            len(c.graphs),
            c.graph_breaks,
            c.restart_reasons,
            c.stack,
            c.first_log_line,
            (c.function, c.file, c.source_line),
            bool(c.input_sets or c.symbols),
            bool(c.recompile_reasons)
            and c.metrics is None
            and not (c.graphs or c.input_sets or c.symbols or c.stack),
        )

    def shift_lines(self, n: int) -> None:
        """See `Compile.shift_lines`."""
        self.first_log_line += n
        self.graph_breaks = shifted_breaks(self.graph_breaks, n)

    def apply(self, c: Compile) -> None:
        c.status = self.status
        if self.fail_reason is not None and c.fail_type is None:
            c.fail_type, c.fail_reason = self.fail_type, self.fail_reason
        c.graph_breaks = self.graph_breaks
        c.restart_reasons = self.restart_reasons
        c.stack = self.stack
        if c.function is None and self.code[0] is not None:
            c.function, c.file, c.source_line = self.code


def weight(c: Compile) -> int:
    """Roughly the bytes a compile holds in memory: mostly its described tensors."""
    n = 4096 + 120 * len(c.phases) + 300 * (len(c.graphs) + len(c.artifacts) + len(c.events))
    for s in c.input_sets:
        n += 1000 * len(s.tensors) + 200 * (len(s.storages) + len(s.sources))
    for p in c.payloads():
        if p.text is not None:
            n += len(p.text)
    return n


def cost(e: Compile | Spilled) -> int:
    """Roughly what rendering a compile costs: its pickled size (a compile in memory pickles
    to about a third of its `weight`)."""
    return e[2] if isinstance(e, tuple) else weight(e) // 3


class OpenCompiles:
    """The compiles of a log while it is read: recent ones in memory, older ones on disk."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = IN_MEMORY if limit is None else limit
        self.mem: OrderedDict[CompileId | None, Compile] = OrderedDict()
        self.disk: dict[CompileId | None, tuple[Spilled, Facts]] = {}
        self.file: SpillFile | None = None
        # Weights of the compiles in memory, as last measured, and their sum.
        self.weights: dict[CompileId | None, int] = {}
        self.total = 0

    def __contains__(self, cid: CompileId | None) -> bool:
        return cid in self.mem or cid in self.disk

    def get(self, cid: CompileId | None) -> Compile | None:
        c = self.mem.get(cid)
        if c is not None:
            self.mem.move_to_end(cid)
            return c
        got = self.disk.pop(cid, None)
        if got is None:
            return None
        f, at, n = got[0]
        c = f.load(at, n)
        self.put(cid, c)
        return c

    def put(self, cid: CompileId | None, c: Compile) -> None:
        self.mem[cid] = c
        self.mem.move_to_end(cid)
        # Compiles with hundreds of inputs weigh megabytes: bound the bytes too, keeping
        # the few most recent (records for them may still come). A compile grows while it is
        # among the most recent, so only those are weighed again; older ones keep their weight.
        for k, (rid, rc) in enumerate(reversed(self.mem.items())):
            if k > KEEP_RECENT:
                break
            w = weight(rc)
            self.total += w - self.weights.get(rid, 0)
            self.weights[rid] = w
        while len(self.mem) > self.limit or (
            self.total > IN_MEMORY_BYTES and len(self.mem) > KEEP_RECENT
        ):
            self.evict()

    def evict(self) -> None:
        old, oc = self.mem.popitem(last=False)
        self.total -= self.weights.pop(old, 0)
        if self.file is None:
            self.file = SpillFile()
        self.disk[old] = (self.file.dump(oc), Facts.of(oc))

    def spill_all(self) -> None:
        """Put every compile on disk (before sending this reader's work to another process:
        the receiver reads each back only when it needs it, or its own forked copy does)."""
        while self.mem:
            self.evict()

    def shift_lines(self, n: int) -> None:
        """Move the log lines of every compile held by n (see `Compile.shift_lines`)."""
        for c in self.mem.values():
            c.shift_lines(n)
        for _, facts in self.disk.values():
            facts.shift_lines(n)
        for f in self._files():  # moved as each compile is read back
            f.shift += n

    def drop_texts(self, lines: frozenset[int]) -> None:
        """Forget the kept text of the payloads at these lines (see `Compile.drop_texts`)."""
        for c in self.mem.values():
            c.drop_texts(lines)
        for f in self._files():  # forgotten as each compile is read back
            f.dropped |= lines

    def _files(self) -> list[SpillFile]:
        """The spill files of the compiles on disk (this reader's own), each once."""
        return list({id(f): f for (f, _, _), _ in self.disk.values()}.values())

    def keys(self) -> list[CompileId | None]:
        return [*self.mem, *self.disk]

    def __iter__(self) -> Iterator[CompileId | None]:
        return iter(self.keys())

    def entry(self, cid: CompileId | None) -> tuple[Compile | Spilled, Facts]:
        """Where a compile is (in memory, or its place on disk) and its facts."""
        c = self.mem.get(cid)
        if c is not None:
            return c, Facts.of(c)
        return self.disk[cid]

    def adopt(self, cid: CompileId | None, where: Compile | Spilled, facts: Facts | None) -> None:
        """Take over a compile another reader of the same log found (the other half)."""
        if isinstance(where, Compile):
            self.put(cid, where)
        else:
            assert facts is not None
            self.disk[cid] = (where, facts)


# Turns a compile as read into a finished one (inputs resolved, log-wide defaults filled in).
Finisher = Callable[[Compile], None]
# Explains each compile of a frame against the one before it: `index/recompiles.py:explain_frame`.
Explainer = Callable[[list[list[Compile]]], None]


class CompileList(Sequence[Compile]):
    """A log's compiles in id order; past a few hundred they stay on disk and are read back
    one at a time, finished and explained on the way out."""

    def __init__(self, finish: Finisher | None = None, explain: Explainer | None = None) -> None:
        self.finish = finish
        self.explain = explain
        self.entries: list[Compile | Spilled] = []
        self.facts: list[Facts | None] = []
        self.bases: list[tuple[int, int]] = []  # [start, end) of each compile's attempts
        self.frames: list[tuple[int, int]] = []  # [start, end) into bases, per frame
        self.base_of: list[int] = []

    @classmethod
    def of(cls, compiles: Sequence[Compile]) -> CompileList:
        """Finished compiles, kept as they are (each its own compile and frame)."""
        out = cls()
        for c in compiles:
            out.add_frame([[c]], [[None]])
        return out

    def add_frame(
        self,
        frame: list[list[Compile | Spilled]],
        facts: list[list[Facts | None]],
    ) -> None:
        first_base = len(self.bases)
        for attempts, fs in zip(frame, facts, strict=True):
            start = len(self.entries)
            for e, f in zip(attempts, fs, strict=True):
                self.entries.append(e)
                self.facts.append(f)
                self.base_of.append(len(self.bases))
            self.bases.append((start, len(self.entries)))
        self.frames.append((first_base, len(self.bases)))

    @property
    def on_disk(self) -> bool:
        return any(isinstance(e, tuple) for e in self.entries)

    @property
    def in_memory(self) -> int:
        return sum(isinstance(e, Compile) for e in self.entries)

    def spill(self, into: SpillFile) -> None:
        """Put every compile still in memory into INTO: a job of many logs keeps few compiles in
        memory over all of them (read back as the others are)."""
        for i, e in enumerate(self.entries):
            if isinstance(e, Compile):
                self.entries[i] = into.dump(e)

    def _raw(self, i: int) -> Compile:
        e = self.entries[i]
        c = e if isinstance(e, Compile) else e[0].load(e[1], e[2])
        f = self.facts[i]
        if f is not None:
            f.apply(c)
            if self.finish is not None:
                self.finish(c)
            if isinstance(e, Compile):
                self.facts[i] = None  # finished in place, once
        return c

    def _attempts(self, b: int) -> list[Compile]:
        start, end = self.bases[b]
        return [self._raw(i) for i in range(start, end)]

    def _explained(self, prev: list[Compile] | None, cur: list[Compile]) -> None:
        if self.explain is not None:
            self.explain([prev, cur] if prev is not None else [cur])

    def __len__(self) -> int:
        return len(self.entries)

    @overload
    def __getitem__(self, i: int) -> Compile: ...

    @overload
    def __getitem__(self, i: slice) -> list[Compile]: ...

    def __getitem__(self, i: int | slice) -> Compile | list[Compile]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        b = self.base_of[i]
        cur = self._attempts(b)
        frame_start = next(fs for fs, fe in self.frames if fs <= b < fe)
        prev = self._attempts(b - 1) if b > frame_start else None
        self._explained(prev, cur)
        return cur[i - self.bases[b][0]]

    def __iter__(self) -> Iterator[Compile]:
        return self.iter_from(0)

    def iter_from(self, i: int) -> Iterator[Compile]:
        """The compiles from the i-th on, each explained against the attempts before it."""
        if i >= len(self.entries):
            return
        first = self.base_of[i]
        for fs, fe in self.frames:
            if fe <= first:
                continue
            start = max(fs, first)
            prev = self._attempts(start - 1) if start > fs else None
            for b in range(start, fe):
                cur = self._attempts(b)
                self._explained(prev, cur)
                yield from cur[i - self.bases[b][0] :] if b == first else cur
                prev = cur

    def __reduce__(self) -> Any:
        # Sent to another process: on this machine the spill files change hands with it;
        # to another machine (SEND_FILES off) the finished compiles themselves go.
        if SEND_FILES:
            state = (self.entries, self.facts, self.bases, self.frames, self.base_of)
            return (CompileList._adopt, (self.finish, self.explain, *state))
        return (CompileList.of, (list(self),))

    @classmethod
    def _adopt(cls, finish: Finisher | None, explain: Explainer | None, *state: Any) -> CompileList:
        out = cls(finish, explain)
        out.entries, out.facts, out.bases, out.frames, out.base_of = state
        return out
