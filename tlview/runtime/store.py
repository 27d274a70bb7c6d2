"""Keep compiles on disk once there are many, so memory stays flat however long the log is."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import weakref
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple, overload

from tlview.aside import CodeState
from tlview.counting import is_counted
from tlview.model import Compile

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
        if module in ("tlview.model", "tlview.aside"):
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
        # What a reader of a later part of a log (index/parts.py) did not know, applied to each
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


# The spans that bound a compile's own work (dynamo's, AOTInductor's, a lazy backward's, and each
# attempt's `compile_attempt_N`): a span without a compile id inside one of them is that compile's.
OWN_SPANS = ("dynamo", "entire_frame_compile", "compile_fx_aot", "entire_backward_compile")


class Marks(NamedTuple):
    """What a pass over a whole log needs of each compile without reading it back from disk
    (`analyze/context.py`): where its own spans lie, its graph breaks' places, its code states."""

    key: str
    spans: tuple[tuple[float, float], ...]  # its own spans (OWN_SPANS): start and end, chromium us
    begins: float | None  # when its first span began
    breaks: tuple[tuple[str, str], ...] = ()  # (place, reason) of each graph break with a place
    states: tuple[CodeState, ...] = ()  # the profile-guided code states it read (get_*)
    counted: bool = False  # a compile torch counts: an id, and not an attempt that restarted


def marks(c: Compile) -> Marks:
    """A compile's marks, as it is now (a finished compile's: as it stays)."""
    return Marks(
        c.key,
        _own_spans(c),
        min((p.start_us for p in c.phases), default=None),
        tuple((g.where, g.reason) for g in c.graph_breaks if g.where),
        tuple(s for s in c.code_states if s.kind.startswith("get_")),
        is_counted(c),
    )


def _own_spans(c: Compile) -> tuple[tuple[float, float], ...]:
    """Where a compile's own spans (OWN_SPANS, each attempt's) lie: start and end."""
    return tuple(
        (p.start_us, p.start_us + p.dur_us)
        for p in c.phases
        if p.dur_us is not None and (p.name in OWN_SPANS or p.name.startswith("compile_attempt"))
    )


class CompileList(Sequence[Compile]):
    """A log's finished compiles in report order: in memory, or on disk and read back one at a
    time (past a few hundred, index/compiles.py)."""

    def __init__(
        self, entries: list[Compile | Spilled] | None = None, marked: list[Marks] | None = None
    ) -> None:
        self.entries: list[Compile | Spilled] = [] if entries is None else entries
        # each compile's marks, kept in memory wherever the compile is
        self.marks: list[Marks] = [] if marked is None else marked
        assert len(self.marks) == len(self.entries), "a compile's marks come with it"

    @classmethod
    def of(cls, compiles: Sequence[Compile]) -> CompileList:
        """Finished compiles, kept as they are."""
        return cls(list(compiles), [marks(c) for c in compiles])

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

    def __len__(self) -> int:
        return len(self.entries)

    @overload
    def __getitem__(self, i: int) -> Compile: ...

    @overload
    def __getitem__(self, i: slice) -> list[Compile]: ...

    def __getitem__(self, i: int | slice) -> Compile | list[Compile]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        e = self.entries[i]
        return e if isinstance(e, Compile) else e[0].load(e[1], e[2])

    def __iter__(self) -> Iterator[Compile]:
        return self.iter_from(0)

    def iter_from(self, i: int) -> Iterator[Compile]:
        """The compiles from the i-th on."""
        for k in range(i, len(self.entries)):
            yield self[k]

    def __reduce__(self) -> Any:
        # Sent to another process: on this machine the spill files change hands with it;
        # to another machine (SEND_FILES off) the compiles themselves go.
        if SEND_FILES:
            return (CompileList, (self.entries, self.marks))
        return (CompileList.of, (list(self),))
