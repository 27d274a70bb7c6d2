"""Keep compiles on disk once there are many, so memory stays flat however long the log is."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

from .model import Compile, CompileId, GraphBreak, StackFrame

# Compiles held in memory per log; beyond this the least recently touched go to a temp file.
IN_MEMORY = 256
# Whether a pickled CompileList hands over its spill file (same machine) or its contents.
SEND_FILES = True
# Strings longer than this (configs, versions, stacks) are pickled once per log, by reference.
SHARED_MIN = 64


class Strings:
    """Long strings shared by many compiles, pickled as references into this table."""

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


class _Pickler(pickle.Pickler):
    def __init__(self, f: IO[bytes], strings: Strings) -> None:
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.table = strings.ids

    def persistent_id(self, obj: Any) -> int | None:
        if type(obj) is str and len(obj) > SHARED_MIN:
            return self.table.get(obj)
        return None


class _Unpickler(pickle.Unpickler):
    """Reads only tlview's own records back from tlview's own temp file."""

    def __init__(self, f: IO[bytes], items: list[str]) -> None:
        super().__init__(f)
        self.items = items

    def persistent_load(self, pid: Any) -> str:
        return self.items[pid]

    def find_class(self, module: str, name: str) -> Any:
        if module == "tlview.model" or (module == "builtins" and name in ("set", "frozenset")):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected class {module}.{name} in tlview's spill file")


def _dumps(c: Compile, strings: Strings) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, strings).dump(c)
    return buf.getvalue()


def _loads(data: bytes, items: list[str]) -> Compile:
    c = _Unpickler(io.BytesIO(data), items).load()
    assert isinstance(c, Compile)
    return c


class _SpillFile:
    """An append-only temp file of pickled compiles, deleted when no longer referenced."""

    def __init__(self, path: str | None = None) -> None:
        if path is None:
            fd, self.path = tempfile.mkstemp(prefix="tlview-", suffix=".spill")
            self.f = os.fdopen(fd, "w+b")
        else:
            self.path = path
            self.f = open(path, "r+b")  # noqa: SIM115 - closed by the finalizer
        self.end = self.f.seek(0, os.SEEK_END)
        self._final = weakref.finalize(self, _remove, self.f, self.path)

    def handover(self) -> None:
        """Another process now owns the file: do not delete it here."""
        self._final.detach()
        with contextlib.suppress(OSError):
            self.f.close()

    def write(self, data: bytes) -> tuple[int, int]:
        self.f.seek(self.end)
        self.f.write(data)
        at = self.end
        self.end += len(data)
        return at, len(data)

    def read(self, at: int, n: int) -> bytes:
        self.f.seek(at)
        return self.f.read(n)


def _remove(f: IO[bytes], path: str) -> None:
    with contextlib.suppress(OSError):
        f.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


@dataclass(slots=True)
class Facts:
    """What the final pass needs of a compile to set its status, without loading it."""

    id: CompileId | None
    status: str
    has_metrics: bool
    fail_type: str | None
    graph_ops: int | None
    graphs: int
    graph_breaks: list[GraphBreak]
    restart_reasons: list[str]
    stack: list[StackFrame]
    first_line: int

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
            c.first_line,
        )

    def apply(self, c: Compile) -> None:
        c.status = self.status
        c.graph_breaks = self.graph_breaks
        c.restart_reasons = self.restart_reasons
        c.stack = self.stack


class OpenCompiles:
    """The compiles of a log while it is read: recent ones in memory, older ones on disk."""

    def __init__(self, strings: Strings, limit: int | None = None) -> None:
        self.strings = strings
        self.limit = IN_MEMORY if limit is None else limit
        self.mem: OrderedDict[CompileId | None, Compile] = OrderedDict()
        self.disk: dict[CompileId | None, tuple[tuple[int, int], Facts]] = {}
        self.file: _SpillFile | None = None

    def __contains__(self, cid: CompileId | None) -> bool:
        return cid in self.mem or cid in self.disk

    def get(self, cid: CompileId | None) -> Compile | None:
        c = self.mem.get(cid)
        if c is not None:
            self.mem.move_to_end(cid)
            return c
        got = self.disk.pop(cid, None)
        if got is None or self.file is None:
            return None
        c = _loads(self.file.read(*got[0]), self.strings.items)
        self.put(cid, c)
        return c

    def put(self, cid: CompileId | None, c: Compile) -> None:
        self.mem[cid] = c
        while len(self.mem) > self.limit:
            self.evict()

    def evict(self) -> None:
        old, oc = self.mem.popitem(last=False)
        if self.file is None:
            self.file = _SpillFile()
        self.disk[old] = (self.file.write(_dumps(oc, self.strings)), Facts.of(oc))

    def keys(self) -> list[CompileId | None]:
        return [*self.mem, *self.disk]

    def entry(self, cid: CompileId | None) -> tuple[Compile | tuple[int, int], Facts]:
        """Where a compile is (in memory, or its place on disk) and its facts."""
        c = self.mem.get(cid)
        if c is not None:
            return c, Facts.of(c)
        return self.disk[cid]


# Turns a compile as read into a finished one (inputs resolved, log-wide defaults filled in).
Finisher = Callable[[Compile], None]
# Explains each compile of a frame against the one before it: `explain.explain_frame`.
Explainer = Callable[[list[list[Compile]]], None]


class CompileList(Sequence[Compile]):
    """A log's compiles in id order; past a few hundred they stay on disk and are read back
    one at a time, finished and explained on the way out."""

    def __init__(
        self,
        strings: Strings | None = None,
        file: _SpillFile | None = None,
        finish: Finisher | None = None,
        explain: Explainer | None = None,
    ) -> None:
        self.strings = strings or Strings()
        self.file = file
        self.finish = finish
        self.explain = explain
        self.entries: list[Compile | tuple[int, int]] = []
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
        frame: list[list[Compile | tuple[int, int]]],
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

    def _raw(self, i: int) -> Compile:
        e = self.entries[i]
        if isinstance(e, Compile):
            c = e
        else:
            assert self.file is not None
            c = _loads(self.file.read(*e), self.strings.items)
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
        for fs, fe in self.frames:
            prev: list[Compile] | None = None
            for b in range(fs, fe):
                cur = self._attempts(b)
                self._explained(prev, cur)
                yield from cur
                prev = cur

    def __reduce__(self) -> Any:
        # Sent to another process: on this machine, hand over the spill file; elsewhere
        # (SEND_FILES off) send the finished compiles themselves.
        if self.file is None or not SEND_FILES:
            return (CompileList.of, (list(self),))
        self.file.f.flush()
        self.file.handover()
        state = (
            self.file.path,
            self.strings.items,
            self.entries,
            self.facts,
            self.bases,
            self.frames,
            self.base_of,
            self.finish,
            self.explain,
        )
        return (CompileList._adopt, state)

    @classmethod
    def _adopt(cls, path: str, items: list[str], *state: Any) -> CompileList:
        out = cls(file=_SpillFile(path))
        out.strings.items = items
        out.strings.ids = {s: i for i, s in enumerate(items)}
        out.entries, out.facts, out.bases, out.frames, out.base_of, out.finish, out.explain = state
        return out
