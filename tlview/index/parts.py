"""Read one large log with as many processes as there are cores: cut it at record lines, index
every part at once (this process the first, a forked copy each of the others), merge in order."""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from tlview.index.core import add_bad
from tlview.index.kinds import MAX_PID, cut_name
from tlview.index.stream import index_records
from tlview.logs.files import is_gzip
from tlview.model import BadLine, LogIndex
from tlview.parse import _PREFIX, _RECORD_START, Reader
from tlview.runtime.cores import Meanwhile, cores, spare_core
from tlview.runtime.fork import Forked
from tlview.runtime.store import remove_made_here, temp_dir

# Smaller logs are read in one process. Two readers against one, best of 3 here (round 22):
# even at 5 MB, 4-10% faster at 8 MB, 10-20% at 16 and 30 MB (JSON and page, both shapes).
PARALLEL_MIN = 8 << 20
# Bytes each reader reads at least. A part costs this process about 5 ms (its copy's result
# taken in, its compiles merged: 200 MB of small records read in 2, 4 and 8 parts here), and its
# copy a fork and the hand-over of its compiles; 8 MB take a reader 0.08-0.15 s to read.
PART_MIN = 8 << 20
_STR = b'] {"str":'  # torch writes `{"str": [`; a compact writer `{"str":[`
NS_PER_BYTE = 2.9  # what reading a large-payload log costs here (benchmarks/RESULTS.md)
READERS_ENV = "TLVIEW_READERS"  # a number of readers to use whatever the log's size (to measure)


@dataclass(slots=True)
class Part:
    """What the reader of one part of a log found: its indexers, not yet finished."""

    indexers: dict[int, Any]  # pid key -> Indexer
    bad: LogIndex
    lines: int
    crlf: bool
    keep: Any  # the Keep it read with: the texts it kept


def readers(path: Path) -> int:
    """How many processes read this log (1: this one alone): one a core this process may run on,
    with at least PART_MIN bytes each, for a plain local file of PARALLEL_MIN bytes or more."""
    if not spare_core():
        return 1
    try:
        if not path.is_file() or is_gzip(path):
            return 1
        size = path.stat().st_size
    except OSError:
        return 1
    forced = os.environ.get(READERS_ENV, "")
    if forced.isdigit() and int(forced) > 0:
        return min(int(forced), max(size, 1))
    if size < PARALLEL_MIN:
        return 1
    return min(cores(), max(2, size // PART_MIN))


def record_start(path: Path, at: int) -> int | None:
    """The offset of the record line that starts nearest to byte `at`, if any. Payloads can be
    megabytes long: both sides are searched a window at a time, out from `at`, so the search
    costs about the distance to the nearest record line, not to the end of the payload."""
    try:
        with path.open("rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # gone, or empty
        return None
    with mm:
        at = min(max(at, 0), len(mm))
        before, after, behind = _nearest_each_side(mm, at)
        if after is not None and before is None and behind > 0:
            # A record line behind `at` could still be nearer than the one found ahead.
            found = _starts(mm, max(at - (after - at), 0), min(behind + 1, len(mm)), at)
            before = found[-1] if found else None
    if before is not None and after is not None and before != after:
        return before if at - before <= after - at else after
    return after if after is not None else before


def _nearest_each_side(mm: mmap.mmap, at: int) -> tuple[int | None, int | None, int]:
    """Windows searched out from `at` on both sides until a record line starts in one: the
    nearest start behind and ahead found (None: none yet), and how far back was searched."""
    size, step = len(mm), 64 << 10
    ahead = behind = at  # searched: [behind, ahead)
    after = before = None
    while after is None and before is None and (behind > 0 or ahead < size):
        if ahead < size:
            # One byte past the window, so a line break at its end sees the next byte.
            m = _RECORD_START.search(mm, max(ahead - 1, 0), min(ahead + step + 1, size))
            after = None if m is None else m.end()
            ahead = min(ahead + step, size)
        if behind > 0:
            lo = max(behind - step, 0)
            found = _starts(mm, lo, min(behind + 1, size), at)
            before = found[-1] if found else None
            behind = lo
    return before, after, behind


def _starts(mm: mmap.mmap, lo: int, hi: int, at: int) -> list[int]:
    """The record lines that start in mm[lo:hi] at or before `at`."""
    return [e for m in _RECORD_START.finditer(mm, lo, hi) if (e := m.end()) <= at]


class Earlier:
    """File names interned before a part of a log, looked for backwards from the part's start
    only when the part names one it did not intern itself (most parts never ask)."""

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self.pos = start  # everything from here on has been looked at
        self.tables: dict[int, dict[int, str]] = {}  # pid key -> index -> name
        self.mm: mmap.mmap | None = None

    def __call__(self, pid: int, idx: int) -> str | None:
        """The name process `pid` interned as `idx` last before the start, if it did."""
        table = self.tables.setdefault(pid, {})
        while idx not in table and self.pos > 0:
            self._back()
        return table.get(idx)

    def _back(self) -> None:
        """Take in the `str` record nearest before `pos`, and move `pos` to its line's start."""
        if self.mm is None:
            with self.path.open("rb") as f:
                self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        mm = self.mm
        i = mm.rfind(_STR, 0, self.pos)
        if i < 0:
            self.pos = 0
            return
        start = mm.rfind(b"\n", 0, i) + 1
        self.pos = start
        nl = mm.find(b"\n", i)
        head = mm[start : len(mm) if nl < 0 else nl].rstrip(b"\r")
        m = _PREFIX.match(head)
        try:
            name, idx = orjson.loads(head[i - start + 2 :])["str"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return
        if m is not None and isinstance(name, str) and isinstance(idx, int):
            pid = int(m.group(3))
            # Looking backwards, the first definition found is the one in force at the start;
            # cut as the record's own reader cuts it (handlers.on_str).
            table = self.tables.setdefault(pid if pid <= MAX_PID else -1, {})
            table.setdefault(idx, cut_name(name))

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()


def read_part(
    path: Path,
    log: LogIndex,
    keep: Any,
    span: tuple[int, int],
    progress: Callable[[int], None] | None = None,
) -> Part:
    """Index the records in bytes span[0]..span[1] of a log, its lines numbered from 1 (a later
    part is renumbered by `shift_lines` once the lines before it are counted)."""
    bad = LogIndex(path=log.path, name=log.name)
    reader = Reader(
        path, log.name, on_bad=lambda b: add_bad(bad, b), on_chunk=progress, span=(*span, 1)
    )
    earlier = Earlier(path, span[0]) if span[0] else None
    try:
        indexers = index_records(reader, log, keep, earlier=earlier, part=earlier is not None)
    finally:
        if earlier is not None:
            earlier.close()
    return Part(indexers, bad, reader.lines, reader.crlf, keep)


def shift_lines(part: Part, n: int) -> None:
    """Number a later part's lines as lines of the whole log: n lines come before it."""
    for log in (part.bad, *(ix.log for ix in part.indexers.values())):
        log.bad_lines = [b._replace(line=b.line + n) for b in log.bad_lines]
    for ix in part.indexers.values():
        ix.compiles.shift_lines(n)
        ix.metrics_events = {
            cid: dataclasses.replace(e, line=e.line + n) for cid, e in ix.metrics_events.items()
        }
    part.lines += n


def _later(path: Path, log: LogIndex, keep: Any, span: tuple[int, int]) -> Part:
    """A later part's reader's job, in a forked copy: its part, ready to change hands."""
    part = read_part(path, log, keep, span)
    for ix in part.indexers.values():
        ix.compiles.close_all(spill=True)  # the file changes hands, not the compiles
    return part


def read_parts(
    path: Path,
    log: LogIndex,
    keep: Any,
    progress: Callable[[int], None] | None,
    n: int,
    meanwhile: Meanwhile | None = None,
) -> Part | None:
    """A log read at once in `n` parts, by this process and n - 1 forked copies, merged in order
    (or, when compile ids were started over, read on here from where that shows); None if there
    is nowhere to cut it. `meanwhile`: work this process does once it has read its part, while
    the copies still read (its part is shorter by about what the work takes)."""
    size = path.stat().st_size
    lead = min(int(meanwhile.ns / NS_PER_BYTE), 3 * size // (4 * (n - 1))) if meanwhile else 0
    spans = _spans(path, size, n, lead)
    if len(spans) < 2:
        return None
    # Each reader keeps texts with the whole budget; the merge forgets those of a later part
    # that one reader would not have kept (Keep.join), so the report is the same.
    keeps = [keep.fresh() if keep is not None else None for _ in spans]
    temp_dir()  # made here, so the copies' spill files are removed with it, whatever happens
    copies = [
        Forked(partial(_later, path, log, k, span), cleanup=remove_made_here)
        for k, span in zip(keeps[1:], spans[1:], strict=True)
    ]
    # What this process does, in bytes: its part, and the job it does after it.
    bar = _Whole(progress, size, spans[0][1] + lead) if progress is not None else None
    parts = [read_part(path, log, keeps[0], spans[0], bar)]
    if meanwhile is not None:
        with contextlib.suppress(Exception):  # done again where it is needed, and fails there
            meanwhile.job()
    for copy, k, span in zip(copies, keeps[1:], spans[1:], strict=True):
        ok, theirs = copy.result()
        # Never lose a part: read it here if its reader failed.
        parts.append(theirs if ok else read_part(path, log, k, span))
    if bar is not None:
        bar.rest()
    return join(path, log, parts, spans)


def _spans(path: Path, size: int, n: int, lead: int) -> list[tuple[int, int]]:
    """The byte spans of the parts: cut at the record lines nearest n equal shares of the work
    (this process's part shorter by `lead`, the work it does after it)."""
    share = (size + lead) / n
    cuts = [record_start(path, int(share * k - lead)) for k in range(1, n)]
    starts = sorted({0, *(c for c in cuts if c is not None and 0 < c < size)})
    return [(a, b) for a, b in zip(starts, [*starts[1:], size], strict=True)]


def join(path: Path, log: LogIndex, parts: list[Part], spans: list[tuple[int, int]]) -> Part:
    """The parts of a log merged in order into the first, as one reader would have read them."""
    whole = parts[0]
    for k in range(1, len(parts)):
        theirs = parts[k]
        if started_over(whole, theirs):
            # The later parts (their spill files) go unread: dropped with them.
            return _read_on(path, log, whole, (spans[k][0], spans[-1][1]))
        _fold(whole, theirs)
    return whole


def _fold(whole: Part, theirs: Part) -> None:
    """Merge the part after `whole` into it."""
    shift_lines(theirs, whole.lines)
    if whole.keep is not None:
        dropped = frozenset(whole.keep.join(theirs.keep, whole.lines))
        if dropped:
            for ix in theirs.indexers.values():
                ix.compiles.drop_texts(dropped)
    for pid, ix in theirs.indexers.items():
        if pid in whole.indexers:
            whole.indexers[pid].merge(ix)
        else:
            whole.indexers[pid] = ix
    whole.bad.bad_count += theirs.bad.bad_count
    whole.bad.bad_lines = _first(whole.bad.bad_lines + theirs.bad.bad_lines)
    whole.lines = theirs.lines
    whole.crlf = whole.crlf or theirs.crlf


def _read_on(path: Path, log: LogIndex, part: Part, span: tuple[int, int]) -> Part:
    """Read the rest of the log after `part` with its indexers, as one reader goes on: only
    one reader can number the runs of a process that started compile ids over."""
    bad = part.bad
    reader = Reader(path, log.name, on_bad=lambda b: add_bad(bad, b), span=(*span, part.lines + 1))
    index_records(reader, log, part.keep, by_pid=part.indexers)
    return Part(part.indexers, bad, reader.lines, part.crlf or reader.crlf, part.keep)


def started_over(a: Part, b: Part) -> bool:
    """Whether a process of the log started compile ids over (torch._dynamo.reset()) in either
    part or across them: the later part cannot know which run its records are in."""
    if any(ix.run for ix in (*a.indexers.values(), *b.indexers.values())):
        return True
    return any(
        pid in a.indexers and bool((a.indexers[pid].started & ix.started) - {None})
        for pid, ix in b.indexers.items()
    )


class _Whole:
    """Progress through this process's work (`work` bytes, its part and job), shown as progress
    through the whole log: the copies read the rest at the same time."""

    def __init__(self, progress: Callable[[int], None], size: int, work: int) -> None:
        self.progress, self.size, self.work = progress, size, max(work, 1)
        self.shown = 0

    def __call__(self, n: int) -> None:
        k = min(n * self.size // self.work, self.size - self.shown)
        self.shown += k
        self.progress(k)

    def rest(self) -> None:
        self.progress(self.size - self.shown)


def _first(bad: list[BadLine]) -> list[BadLine]:
    from tlview.parse import MAX_BAD_KEPT

    return bad[:MAX_BAD_KEPT]
