"""One record's payload read straight from its log file, a few lines at a time: `tlview show`
writes one payload of a log whose others are as large, and keeps only what it is writing."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tlview.logs.files import open_log

BLOCK = 1 << 20  # bytes read at a time while looking for the record's line; bytes per chunk


def chunks(path: Path, line: int) -> Iterator[bytes]:
    """The payload of the record at LINE of PATH as torch logged it: each TAB line without its
    TAB, joined by line feeds, in chunks of about BLOCK bytes that end where a line ends (so a
    chunk's text can be made inert on its own)."""
    with open_log(path) as f:
        lines = _lines(f, line)
        next(lines, None)  # the record's own line
        pieces: list[bytes] = []
        size = 0
        sep = b""  # the line feed between two payload lines: none before the first
        for ln in lines:
            if not ln.startswith(b"\t"):
                break
            pieces.append(sep + ln[1:].rstrip(b"\n"))
            sep = b"\n"
            size += len(pieces[-1])
            if size >= BLOCK:
                yield b"".join(pieces)
                pieces, size = [], 0
        if pieces:
            yield b"".join(pieces)


def md5(path: Path, line: int) -> str:
    """The md5 of that payload, as torch computed it when it logged the record."""
    h = hashlib.md5(usedforsecurity=False)
    for c in chunks(path, line):
        h.update(c)
    return h.hexdigest()


def _lines(f: IO[bytes], first: int) -> Iterator[bytes]:
    """The lines of F from line FIRST on (1-based), each with its line end. The lines before
    it are counted a block at a time, not read one by one."""
    seen = 1  # the number of the line that starts the next block read
    while True:
        block = f.read(BLOCK)
        if not block:
            return
        n = block.count(b"\n")
        if seen + n >= first:
            at = -1
            for _ in range(first - seen):
                at = block.index(b"\n", at + 1)
            break
        seen += n
    carry = b""
    for ln in io.BytesIO(block[at + 1 :]):
        if not ln.endswith(b"\n"):
            carry = ln  # the block ends inside this line: the file holds its rest
            break
        yield ln
    rest = f.readline()
    if carry or rest:
        yield carry + rest
    yield from iter(f.readline, b"")
