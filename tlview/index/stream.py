"""Index a stream of records: one Indexer per process id that wrote them.

Its own module so that log.py (which reads a log) and parts.py (which reads a part of one)
both call it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tlview.index.indexer import Indexer
from tlview.index.keep import Keep
from tlview.index.kinds import MAX_PID
from tlview.model import LogIndex
from tlview.parse import Record


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
    marks the reader of a later part of a split log (see parts.py). `by_pid`: the indexers of
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
