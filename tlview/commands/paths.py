"""The paths a command is given: a directory's newest log (--latest), a pipe read twice."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from tlview.commands.funnel import say
from tlview.errors import EXIT_NO_TRACE, EXIT_USAGE, TlviewError
from tlview.logs.files import discover, no_logs
from tlview.logs.sources import is_url


class Reader(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


class Writer(Protocol):
    def write(self, data: bytes, /) -> int: ...


def _copy_wanted(src: IO[bytes], dst: Writer, wanted: tuple[bytes, ...]) -> None:
    """SRC (gzip or not, by its magic) into DST: every record line, and with WANTED a record's
    payload lines only when its line holds one of them, else an empty line for each."""
    head = src.read(2)
    stream: Reader = src
    if head == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=_Prefixed(head, src))
        head = b""
    keep = True  # whether the record the current line belongs to is kept
    start = True  # whether the next chunk starts a line
    pending = head
    while True:
        chunk = pending + stream.readline(CHUNK)
        pending = b""
        if not chunk:
            return
        line_start = start
        start = chunk.endswith(b"\n")
        if line_start and chunk[:1] not in (b"\t", b"\n", b"\r"):  # a record line: kept
            keep = not wanted or any(w in chunk for w in wanted)
            dst.write(chunk)
            while not start:  # the rest of a long record line
                chunk = stream.readline(CHUNK)
                if not chunk:
                    return
                dst.write(chunk)
                start = chunk.endswith(b"\n")
            continue
        if keep:
            dst.write(chunk)
        elif start:
            dst.write(b"\n")


CHUNK = 1 << 20


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were read already (the gzip magic), given back first."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.head[: len(b)] or self.rest.read(len(b))
        self.head = self.head[len(data) :] if self.head else b""
        n = len(data)
        b[:n] = data
        return n


def newest(path: str) -> str:
    """The newest log of a directory (--latest): by modification time (of the file a link
    names), then name; a newer file that is plainly no log (empty, binary) is passed over."""
    if not path or is_url(path) or not Path(path).is_dir():
        raise TlviewError(f"{path}: --latest needs a local directory of logs", EXIT_USAGE)
    from tlview.parse import sniff  # here: `tlview --help` imports no orjson

    logs, notes = discover(Path(path))
    when = {}
    for log in logs:
        with contextlib.suppress(OSError):  # gone since it was listed
            when[log] = (log.stat().st_mtime_ns, log.name)
    passed: list[str] = []
    for found in sorted(when, key=lambda log: when[log], reverse=True):
        why = sniff(found)
        if why is None:
            over = f" (passed over newer: {', '.join(passed)})" if passed else ""
            say(f"tlview: reading the newest log, {found}{over}", err=True)
            return str(found)
        if len(passed) < 3:
            passed.append(f"{found.name}: {why}")
    if passed:
        raise TlviewError(f"{path}: no log to read among its *.log files: {'; '.join(passed)}")
    raise TlviewError(no_logs(path, notes), EXIT_NO_TRACE)


@contextlib.contextmanager
def rereadable(path: str, wanted: tuple[bytes, ...] = ()) -> Iterator[str]:
    """PATH, or a copy of it when it is a pipe (`-` from `cat`, `<(zcat ...)`), which a second
    read would find empty; the copy has the pipe's name, so the report names the same log.
    With WANTED, the copy holds the payloads only of the records whose line holds one of them
    (the others' payload lines are empty lines, so every line keeps its number), gzip-compressed:
    its size is about what the second read needs, not the stream's."""
    real = "/dev/stdin" if path == "-" else path
    try:
        mode = os.stat(real).st_mode
    except OSError:  # the reader says what is wrong with it
        mode = stat.S_IFREG
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tlview-pipe-") as d:
        copy = os.path.join(d, os.path.basename(real) or "stdin")
        try:
            with open(real, "rb") as src, gzip.open(copy, "wb", compresslevel=1) as dst:
                _copy_wanted(src, dst, wanted)
        except (OSError, EOFError, zlib.error) as e:
            why = getattr(e, "strerror", None) or e
            raise TlviewError(f"{path}: cannot read: {why}", EXIT_NO_TRACE) from None
        yield copy
