"""Read a log: its records, one Indexer per process that wrote them, each finished."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

from tlview.index.core import add_bad
from tlview.index.indexer import Indexer
from tlview.index.keep import Keep
from tlview.index.kinds import MAX_PID
from tlview.logs.files import Opener, open_log
from tlview.model import LogIndex
from tlview.parse import MAX_BAD_KEPT, Reader, Record


def index_records(
    records: Iterable[Record],
    log: LogIndex,
    keep: Keep | None = None,
    earlier: Callable[[int, int], str | None] | None = None,
    part: bool = False,
    by_pid: dict[int, Indexer] | None = None,
) -> dict[int, Indexer]:
    """Index a record stream, one Indexer per process id found in it.

    `earlier` finds a file name a process interned before this part of a log, and `part`
    marks the reader of a later part of a split log (see halves.py). `by_pid`: the indexers of
    the records before these, to go on with.
    """
    by_pid = {} if by_pid is None else by_pid
    first: Indexer | None = next(iter(by_pid.values()), None)
    for rec in records:
        # Older torch wrote the thread id (a pointer-sized number) where it now writes the
        # pid; threads of one process are one stream.
        pid = rec.pid if rec.pid <= MAX_PID else -1
        ix = by_pid.get(pid)
        if ix is None:
            sub = LogIndex(path=log.path, name=log.name, pid=rec.pid, size=log.size)
            ix = by_pid[pid] = Indexer(sub, keep)
            ix.part = part
            # A second process in one file (forked child, concatenated logs): its interned
            # names may come from the first process's table.
            ix.fallback_strings = _names_from(
                pid, earlier, first, None if first is None else next(iter(by_pid))
            )
            if first is None:
                first = ix
        ix.add(rec)
    return by_pid


def _names_from(
    pid: int,
    earlier: Callable[[int, int], str | None] | None,
    first: Indexer | None,
    first_pid: int | None,
) -> Callable[[int], str | None] | None:
    """Where a process looks up a file name it did not intern itself in this part."""
    if earlier is None and first is None:
        return None

    def lookup(v: int) -> str | None:
        name = earlier(pid, v) if earlier is not None else None
        if name is None and first is not None:
            name = first.strings.get(v)
            if name is None and earlier is not None and first_pid is not None:
                name = earlier(first_pid, v)
        return name

    return lookup


def read_log(
    path: Path,
    keep: Keep | None = None,
    name: str | None = None,
    progress: Callable[[int], None] | None = None,
    opener: Opener = open_log,
) -> list[LogIndex]:
    """Read one log file into one LogIndex per process that wrote to it."""
    log = LogIndex(path=str(path), name=name or path.name)
    with contextlib.suppress(OSError):
        log.size = path.stat().st_size
    part = None
    if opener is open_log:
        from tlview.index import halves as split

        if split.worth_splitting(path):
            part = split.read_halves(path, log, keep, progress)
    if part is None:
        bad = LogIndex(path=log.path, name=log.name)  # collects the reader's bad lines, capped
        reader = Reader(
            path, log.name, on_bad=lambda b: add_bad(bad, b), on_chunk=progress, opener=opener
        )
        indexers = index_records(reader, log, keep)
        lines, crlf = reader.lines, reader.crlf
    else:
        indexers, bad, lines, crlf = part.indexers, part.bad, part.lines, part.crlf
    logs = [ix.finish() for ix in indexers.values()]
    if not logs:
        logs = [log]
    # Bad lines and line counts belong to the file; attach them to its first process.
    head = logs[0]
    head.bad_count += bad.bad_count
    head.bad_lines = (bad.bad_lines + head.bad_lines)[:MAX_BAD_KEPT]
    for lg in logs:
        lg.lines = lines if lg is head else 0
        lg.size = log.size if lg is head else 0
    if crlf:
        head.notes.append("CRLF line ends (read as LF)")
    if len(logs) > 1:
        for lg in logs:
            lg.notes.append(f"one of {len(logs)} processes writing to this file (pid {lg.pid})")
    for lg in logs:
        lg.bad_lines.sort(key=lambda b: b.line)
    return logs
