"""Keep compiles on disk once there are many, so memory stays flat however long the log is."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import IO, Any, overload

from .model import Compile, CompileId

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


class OpenCompiles:
    """The compiles of a log while it is read: recent ones in memory, older ones on disk."""

    def __init__(self, strings: Strings, limit: int | None = None) -> None:
        self.strings = strings
        self.limit = IN_MEMORY if limit is None else limit
        self.mem: OrderedDict[CompileId | None, Compile] = OrderedDict()
        self.disk: dict[CompileId | None, tuple[int, int]] = {}
        self.file: _SpillFile | None = None

    def __contains__(self, cid: CompileId | None) -> bool:
        return cid in self.mem or cid in self.disk

    def get(self, cid: CompileId | None) -> Compile | None:
        c = self.mem.get(cid)
        if c is not None:
            self.mem.move_to_end(cid)
            return c
        where = self.disk.pop(cid, None)
        if where is None or self.file is None:
            return None
        c = _loads(self.file.read(*where), self.strings.items)
        self.put(cid, c)
        return c

    def put(self, cid: CompileId | None, c: Compile) -> None:
        self.mem[cid] = c
        while len(self.mem) > self.limit:
            old, oc = self.mem.popitem(last=False)
            if self.file is None:
                self.file = _SpillFile()
            self.disk[old] = self.file.write(_dumps(oc, self.strings))

    def keys(self) -> list[CompileId | None]:
        return [*self.mem, *self.disk]

    def take(self, cid: CompileId | None) -> Compile:
        """Remove a compile from the working set and return it (for the final pass)."""
        c = self.get(cid)
        assert c is not None
        del self.mem[cid]
        return c


class CompileList(Sequence[Compile]):
    """A log's compiles in order; past a few hundred they are read back from disk one at a time."""

    def __init__(self, strings: Strings | None = None, limit: int | None = None) -> None:
        self.strings = strings or Strings()
        self.limit = IN_MEMORY if limit is None else limit
        self.mem: list[Compile] = []
        self.offsets: list[tuple[int, int]] = []
        self.file: _SpillFile | None = None

    @classmethod
    def of(cls, compiles: Sequence[Compile]) -> CompileList:
        out = cls()
        out.mem = list(compiles)
        return out

    def append(self, c: Compile) -> None:
        if self.file is None and len(self.mem) < self.limit:
            self.mem.append(c)
            return
        if self.file is None:
            self.file = _SpillFile()
            for m in self.mem:
                self.offsets.append(self.file.write(_dumps(m, self.strings)))
            self.mem = []
        self.offsets.append(self.file.write(_dumps(c, self.strings)))

    def replace(self, i: int, c: Compile) -> None:
        """Store a changed compile back (what a post-pass that annotates compiles calls)."""
        if self.file is None:
            self.mem[i] = c
        else:
            self.offsets[i] = self.file.write(_dumps(c, self.strings))

    @property
    def on_disk(self) -> bool:
        return self.file is not None

    def __len__(self) -> int:
        return len(self.offsets) if self.file is not None else len(self.mem)

    @overload
    def __getitem__(self, i: int) -> Compile: ...

    @overload
    def __getitem__(self, i: slice) -> list[Compile]: ...

    def __getitem__(self, i: int | slice) -> Compile | list[Compile]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if self.file is None:
            return self.mem[i]
        return _loads(self.file.read(*self.offsets[i]), self.strings.items)

    def __iter__(self) -> Iterator[Compile]:
        if self.file is None:
            yield from self.mem
            return
        for at, n in self.offsets:
            yield _loads(self.file.read(at, n), self.strings.items)

    def __reduce__(self) -> Any:
        # Sent to another process on this machine (a pool worker's result): hand over the
        # spill file instead of the compiles. SEND_FILES is off where the receiver is remote.
        if self.file is None or not SEND_FILES:
            return (CompileList.of, (list(self),))
        self.file.f.flush()
        self.file.handover()
        return (CompileList._adopt, (self.file.path, self.offsets, self.strings.items))

    @classmethod
    def _adopt(cls, path: str, offsets: list[tuple[int, int]], items: list[str]) -> CompileList:
        out = cls()
        out.strings.items = items
        out.strings.ids = {s: i for i, s in enumerate(items)}
        out.file = _SpillFile(path)
        out.offsets = offsets
        return out
