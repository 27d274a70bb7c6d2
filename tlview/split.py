"""Read one large log with two processes: split it at a record line, index both parts, merge."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .model import BadLine, LogIndex
from .parse import _PREFIX, _RECORD_START, Reader, is_gzip

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

PARALLEL_MIN = 32 << 20  # smaller logs are read in one process: a fork costs more than it saves
PREFIX_BUF = 8 << 20
# What reading costs a byte, in ns (see `split_at`): a payload byte is de-TABbed, hashed and its
# line counted; a record-line byte is parsed as JSON and indexed; a byte before the second
# reader's start is scanned for line breaks and interned names. Fitted on this 2-core machine
# to where both readers of an inductor log and of an aot_eager log ended together.
PAYLOAD_NS, RECORD_NS, PREFIX_NS = 3.5, 7.8, 0.8
# Bytes looked at, in places spread over the log, to weigh payload against record lines.
SAMPLES, SAMPLE = 16, 64 << 10
_STR = b'] {"str": ['


@dataclass(slots=True)
class Part:
    """What the reader of one part of a log found: its indexers, not yet finished."""

    indexers: dict[int, Any]  # pid key -> index.Indexer
    bad: LogIndex
    lines: int
    crlf: bool


def spare_core() -> bool:
    """A second core and fork, not turned off (TLVIEW_NO_SPLIT), not in a pool worker (the pool
    already keeps the cores busy). Also asked before writing a report in two (render/halves.py)."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "fork") or os.environ.get("TLVIEW_NO_SPLIT"):
        return False
    mp = sys.modules.get("multiprocessing")  # never imported: not a pool worker either
    return mp is None or not mp.current_process().daemon


def worth_splitting(path: Path) -> bool:
    """A plain local file large enough, with a core to spare."""
    if not spare_core():
        return False
    try:
        if not path.is_file() or path.stat().st_size < PARALLEL_MIN:
            return False
    except OSError:
        return False
    return not is_gzip(path)


def split_at(path: Path, size: int) -> float:
    """Where the second reader starts, as a fraction of the file, for both to end together.

    The first reader reads [0, m) at r ns a byte; the second scans [0, m) at p, then reads
    [m, size): r m = p m + r (size - m), so m = size / (2 - p / r). r depends on how much of
    the log is payload (inductor code) rather than record lines, sampled across the file.
    """
    payload = total = 0
    with path.open("rb") as f:
        for k in range(SAMPLES):
            f.seek(size * k // SAMPLES)
            lines = f.read(SAMPLE).split(b"\n")[1:-1]  # whole lines only
            total += sum(len(ln) + 1 for ln in lines)
            payload += sum(len(ln) + 1 for ln in lines if ln.startswith(b"\t"))
    if not total:
        return 0.5
    share = payload / total
    r = PAYLOAD_NS * share + RECORD_NS * (1 - share)
    return 1 / (2 - PREFIX_NS / r)


def record_start(path: Path, at: int) -> int | None:
    """The offset of the first record line that starts after byte `at`, if any."""
    with path.open("rb") as f:
        f.seek(max(0, at - 1))
        pos = f.tell()
        carry = b""
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return None
            data = carry + chunk
            m = _RECORD_START.search(data)
            if m is not None:
                return pos - len(carry) + m.end()
            carry = data[-1:]
            pos += len(chunk)


def prefix(path: Path, end: int) -> tuple[int, dict[int, dict[int, str]]]:
    """Lines before `end`, and the file names interned there, per process key."""
    from .index import MAX_PID

    lines = 0
    tables: dict[int, dict[int, str]] = {}
    buf = bytearray(PREFIX_BUF)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as f:
        pos = 0
        while pos < end:
            n = f.readinto(view[: min(len(buf), end - pos)])
            if not n:
                break
            # Whole lines only, so a record is never cut between two reads.
            last = buf.rfind(b"\n", 0, n)
            stop = n if pos + n >= end or last < 0 else last + 1
            lines += buf.count(b"\n", 0, stop)
            i = buf.find(_STR, 0, stop)
            while i >= 0:
                start = buf.rfind(b"\n", 0, i) + 1
                nl = buf.find(b"\n", i, stop)
                head = bytes(buf[start : stop if nl < 0 else nl]).rstrip(b"\r")
                m = _PREFIX.match(head)
                try:
                    name, idx = orjson.loads(head[i - start + 2 :])["str"]
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    name = idx = None
                if m is not None and isinstance(name, str) and isinstance(idx, int):
                    pid = int(m.group(3))
                    tables.setdefault(pid if pid <= MAX_PID else -1, {})[idx] = name
                i = buf.find(_STR, i + 1, stop)
            pos += stop
            f.seek(pos)
    return lines, tables


def read_part(
    path: Path,
    log: LogIndex,
    keep: Any,
    span: tuple[int, int],
    progress: Callable[[int], None] | None = None,
) -> Part:
    """Index the records in bytes span[0]..span[1] of a log."""
    from .index import add_bad, index_records

    first_line, strings = (1, {}) if span[0] == 0 else prefix(path, span[0])
    if span[0]:
        first_line += 1
    bad = LogIndex(path=log.path, name=log.name)
    reader = Reader(
        path,
        log.name,
        on_bad=lambda b: add_bad(bad, b),
        on_chunk=progress,
        span=(span[0], span[1], first_line),
    )
    indexers = index_records(reader, log, keep, strings=strings, part=span[0] > 0)
    return Part(indexers, bad, reader.lines, reader.crlf)


def _child(conn: Connection, path: Path, log: LogIndex, keep: Any, span: tuple[int, int]) -> None:
    try:
        part = read_part(path, log, keep, span)
        for ix in part.indexers.values():
            ix.compiles.spill_all()  # the file changes hands, not the compiles
        conn.send(part)
    except BaseException as e:  # the parent reads the part itself instead
        conn.send(f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def read_halves(
    path: Path, log: LogIndex, keep: Any, progress: Callable[[int], None] | None
) -> Part | None:
    """Both halves of a log, read at once by this process and a forked one, merged."""
    size = path.stat().st_size
    mid = record_start(path, int(size * split_at(path, size)))
    if mid is None or mid >= size:
        return None
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    later = keep.half() if keep is not None else None
    child = ctx.Process(target=_child, args=(send, path, log, later, (mid, size)), daemon=True)
    child.start()
    send.close()
    mine = read_part(path, log, keep.half() if keep is not None else None, (0, mid), progress)
    try:
        theirs = recv.recv()
    except EOFError:
        theirs = "the reader of the second half stopped"
    child.join()
    if isinstance(theirs, str):
        # Never lose the second half: read it here.
        theirs = read_part(path, log, keep, (mid, size))
    elif progress is not None:
        progress(size - mid)
    for pid, ix in theirs.indexers.items():
        if pid in mine.indexers:
            mine.indexers[pid].merge(ix)
        else:
            mine.indexers[pid] = ix
    mine.bad.bad_count += theirs.bad.bad_count
    mine.bad.bad_lines = _first(mine.bad.bad_lines + theirs.bad.bad_lines)
    return Part(mine.indexers, mine.bad, theirs.lines, mine.crlf or theirs.crlf)


def _first(bad: list[BadLine]) -> list[BadLine]:
    from .parse import MAX_BAD_KEPT

    return bad[:MAX_BAD_KEPT]
