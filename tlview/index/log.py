"""Read a log: its records, one Indexer per process that wrote them, each finished."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from tlview.index.core import add_bad
from tlview.index.indexer import Indexer
from tlview.index.keep import Keep
from tlview.index.stream import index_records
from tlview.logs.files import Opener, open_log
from tlview.model import LogIndex
from tlview.parse import MAX_BAD_KEPT, Reader
from tlview.runtime.cores import Meanwhile


def read_log(
    path: Path,
    keep: Keep | None = None,
    name: str | None = None,
    progress: Callable[[int], None] | None = None,
    opener: Opener = open_log,
    meanwhile: Meanwhile | None = None,
) -> list[LogIndex]:
    """Read one log file into one LogIndex per process that wrote to it. `meanwhile`: work this
    process does while forked copies read the rest of a large log (runtime/cores.py)."""
    log = LogIndex(path=str(path), name=name or path.name)
    with contextlib.suppress(OSError):
        log.size = path.stat().st_size
    indexers, bad, lines, crlf = _read(path, log, keep, progress, opener, meanwhile)
    logs = [ix.finish() for ix in indexers.values()] or [log]
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


def _read(
    path: Path,
    log: LogIndex,
    keep: Keep | None,
    progress: Callable[[int], None] | None,
    opener: Opener,
    meanwhile: Meanwhile | None,
) -> tuple[dict[int, Indexer], LogIndex, int, bool]:
    """The log's indexers (one a process), bad lines, line count and whether it has CRLFs: read
    in parts by several processes when it is large enough, else here."""
    if opener is open_log:
        from tlview.index import parts  # only for a log large enough to read in parts

        n = parts.readers(path)
        part = parts.read_parts(path, log, keep, progress, n, meanwhile) if n > 1 else None
        if part is not None:
            return part.indexers, part.bad, part.lines, part.crlf
    bad = LogIndex(path=log.path, name=log.name)  # collects the reader's bad lines, capped
    reader = Reader(
        path, log.name, on_bad=lambda b: add_bad(bad, b), on_chunk=progress, opener=opener
    )
    indexers = index_records(reader, log, keep)
    return indexers, bad, reader.lines, reader.crlf
