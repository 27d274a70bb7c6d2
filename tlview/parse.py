"""Stream a TORCH_TRACE log into typed records: bytes in, `Record` and `BadLine` out, nothing kept."""

from __future__ import annotations

import gzip
import hashlib
import io
import mmap
import os
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tlview.logs.files import Opener, file_size, open_log
from tlview.logs.lenient import NOT_JSON, json_error, lenient_json, python_json
from tlview.model import BadLine, CompileId

CHUNK = 1 << 22  # bytes read at a time; a record longer than this is read whole
WINDOW = 1 << 24  # bytes of a mapped file read at a time (then let go of)
# The longest record read: its line, payload lines and the blank lines after them, which are
# held whole while read. A longer one is a bad line with its size (docs/trust.md).
MAX_RECORD_ENV = "TLVIEW_MAX_RECORD"
DEFAULT_MAX_RECORD = 64 << 20
MAX_BAD_KEPT = 1000  # bad lines listed per log; the rest are counted
MAX_RETRIES = 8  # records looked for on one damaged line (each try parses the rest of it)

# glog prefix as torch's TorchLogsFormatter writes it: optional "[rankN]:", level letter,
# "MMDD HH:MM:SS.ffffff", the process id, then "path:line]" (the path can hold anything).
_PREFIX = re.compile(rb"(?:\[rank(\d{1,9})\]:)?[A-Z](\d{4} \d\d:\d\d:\d\d\.\d+) +(\d{1,19}) ")
# A newline that starts a record line: the next line is neither a payload line (TAB) nor blank.
_RECORD_START = re.compile(rb"\n(?=[^\t\n\r])")
_LAST_RECORD_START = re.compile(rb".*\n(?=[^\t\n\r])", re.S)
_NEWLINE_TAB = re.compile(rb"\n\t")
# A run of NUL bytes, as a crash leaves in a log file: kept as one NUL, so a file of zeros
# with no line break cannot fill memory; the line that holds it is reported.
_NULS = re.compile(rb"\x00{2,}")
_BLANK_THEN_TAB = re.compile(rb"\n(?:\r?\n)+\t")  # a payload, blank lines, TAB lines
_STRAY = "payload lines after a blank line, cut off from any record: skipped"
_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() removes


@dataclass(slots=True)
class Record:
    """One structured-trace record: its kind, its fields and its payload if it had one.

    A payload's md5 is checked when its bytes are first asked for (`payload`, `payload_ok`,
    `text`): a report that only measures a payload (its size, its lines) never hashes it, and
    says so (`payload_checked`). A mismatch found then is a bad line, as one found reading."""

    kind: str
    body: Any  # the value under the kind key, usually a dict
    meta: dict[str, Any]  # the whole JSON object (compile id fields, rank, stack, ...)
    line: int
    pid: int
    time: str  # "MMDD HH:MM:SS.ffffff" from the prefix
    rank: int | None
    payload_lines: int = 0
    # The payload lines as read, each TAB-led, until the md5 is checked (then None).
    raw: bytes | None = None
    checker: Reader | None = None  # checks `raw` against the md5 when its bytes are asked for
    data: bytes | None = None  # the payload's bytes (UTF-8 text), once read and checked
    ok: bool = True  # the md5 matched (or there was none to check)

    @property
    def payload(self) -> bytes | None:
        """The payload's bytes, its md5 checked (on first use); None when it has none."""
        self.check()
        return self.data

    @property
    def payload_ok(self) -> bool:
        """Whether the md5 matched, or there was none to check (checking it first)."""
        self.check()
        return self.ok

    @property
    def payload_checked(self) -> bool:
        """False while the payload's md5 is unchecked: it was only measured (True when it was
        checked, or there is no payload or no md5 to check it by)."""
        return self.raw is None

    @property
    def present(self) -> bool:
        """Whether payload lines followed the record line (read, or measured only)."""
        return self.raw is not None or self.data is not None

    @property
    def payload_size(self) -> int:
        """The payload's bytes without its lines' TABs, counted without checking it."""
        if self.raw is not None:
            return len(self.raw) - self.payload_lines
        return len(self.data or b"")

    def check(self) -> None:
        """Read the payload's bytes and check them against its md5, if not done yet."""
        if self.raw is None:
            return
        raw, self.raw = self.raw, None
        expected = self.meta.get("has_payload")
        assert self.checker is not None and isinstance(expected, str)
        self.checker.check(self, raw, expected)

    @property
    def compile_id(self) -> CompileId | None:
        return compile_id_of(self.meta)

    def text(self, limit: int | None = None) -> str:
        """The payload as text, at most `limit` bytes of it."""
        payload = self.payload
        if payload is None:
            return ""
        data = payload if limit is None else payload[:limit]
        return data.decode("utf-8", errors="replace")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# One CompileId object per id seen: most records name a compile seen just before, and a dict
# hit is cheaper than building a frozen dataclass (and makes later lookups identity hits).
_IDS: dict[tuple[int | None, int | None, int, int | None], CompileId] = {}
MAX_IDS = 1 << 16


def compile_id_of(meta: dict[str, Any]) -> CompileId | None:
    """The compile a record belongs to, from its context keys; None outside any compile."""
    # `type(v) is int` and not `_int`: called for every record, and it also rules out bools.
    frame, fcid = meta.get("frame_id"), meta.get("frame_compile_id")
    autograd, attempt = meta.get("compiled_autograd_id"), meta.get("attempt")
    if type(autograd) is not int:
        autograd = None
    if type(attempt) is not int:
        attempt = 0
    if type(frame) is not int or type(fcid) is not int:
        frame = fcid = None
        if autograd is None:
            return None
    key = (frame, fcid, attempt, autograd)
    cid = _IDS.get(key)
    if cid is None:
        if len(_IDS) >= MAX_IDS:  # a log of endless ids: keep the table bounded
            _IDS.clear()
        cid = _IDS[key] = CompileId(frame, fcid, attempt, autograd)
    return cid


def max_record() -> int:
    """The bound of one record, in bytes: $TLVIEW_MAX_RECORD (`256M`), else 64 MiB."""
    text = os.environ.get(MAX_RECORD_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_RECORD
    from tlview.units import parse_bytes

    return max(1, parse_bytes(text, MAX_RECORD_ENV))


@dataclass(slots=True)
class _Long:
    """A unit over the bound, as the chunked reader goes past it: its record line if short
    enough, and what follows it counted, never held."""

    line: int
    limit: int
    head: bytearray | None = field(default_factory=bytearray)  # None: longer than the bound
    head_len: int = 0
    head_done: bool = False
    led: bool | None = None  # the line after the record line starts with a TAB
    rest: int = 0  # bytes after the record line's newline
    breaks: int = 0  # newlines in the unit
    last_nl: bool = False

    def feed(self, data: bytes | bytearray) -> int:
        """Take the next bytes; where in them the next unit starts, or -1 (all taken)."""
        if self.last_nl and data and data[0] not in b"\t\n\r":
            self.breaks -= 1  # that newline ended the unit: it is not one of its lines
            self.rest = max(0, self.rest - 1)
            return 0
        m = _RECORD_START.search(data)
        self._take(data if m is None else data[: m.start()])
        if m is None:
            self.last_nl = data.endswith(b"\n") if data else self.last_nl
            return -1
        return m.start() + 1

    def _take(self, data: bytes | bytearray) -> None:
        if not data:
            return
        at = 0
        if not self.head_done:
            nl = data.find(b"\n")
            part = data if nl < 0 else data[:nl]
            self.head_len += len(part)
            if self.head is not None and self.head_len <= self.limit:
                self.head += part
            else:
                self.head = None
            if nl < 0:
                return
            self.head_done, at = True, nl + 1
            self.breaks += 1
        if self.led is None and at < len(data):
            self.led = data[at] == 9
        self.rest += len(data) - at
        self.breaks += _line_breaks(data[at:] if at else data)


class Reader:
    """Reads one log file; yields `Record`s and collects `BadLine`s as it goes."""

    def __init__(
        self,
        path: Path,
        name: str | None = None,
        on_bad: Callable[[BadLine], None] | None = None,
        verify: bool = True,
        on_chunk: Callable[[int], None] | None = None,
        opener: Opener = open_log,
        span: tuple[int, int, int] | None = None,
    ) -> None:
        self.path = path
        self.opener = opener
        # (start byte, end byte, number of the line at start): read one part of a plain file.
        self.span = span
        self.name = name or path.name
        self.verify = verify
        self.lines = 0
        self.bytes_read = 0
        self.crlf = False
        self._on_bad = on_bad or (lambda b: None)
        self._on_chunk = on_chunk
        self.limit = max_record()

    def bad(self, line: int, reason: str) -> None:
        self._on_bad(BadLine(self.name, line, reason))

    def __iter__(self) -> Iterator[Record]:
        with self.opener(self.path) as f:
            mm = _mapped(f)
            if mm is None:
                yield from self._read(f)
                return
            try:
                yield from self._read_mapped(mm, f.fileno())
            finally:
                mm.close()

    def _read_mapped(self, mm: mmap.mmap, fd: int) -> Iterator[Record]:
        """Read a mapped plain file a window at a time, each unit copied out once."""
        pos, end, line = self.span if self.span is not None else (0, len(mm), 1)
        last = line - 1
        done = pos - pos % mmap.ALLOCATIONGRANULARITY  # start of the pages still mapped in
        while pos < end:
            size = os.fstat(fd).st_size
            if size < end:
                # Cut while read (a log rotated in place): pages past its new end are gone,
                # and touching them would kill the process (SIGBUS). Read up to there.
                self.bad(last + 1, f"the log shrank to {size:,} bytes while tlview read it")
                end = max(pos, size)
                if pos >= end:
                    break
            limit = min(end, pos + WINDOW)
            cut = end
            if limit < end:
                m = _LAST_RECORD_START.match(mm, pos, limit)
                if m is None:  # one record longer than a window: read to the next record
                    m2 = _RECORD_START.search(mm, limit, end)
                    cut = end if m2 is None else m2.start()
                else:
                    cut = m.end() - 1
            final = cut >= end
            # One unit over the bound is read in place (`_at`), NUL bytes and all.
            if cut - pos <= self.limit and mm.find(b"\x00", pos, cut) >= 0:
                # NUL bytes (a crash's leftovers): read this part as the chunked reader does.
                region = _NULS.sub(b"\x00", mm[pos:cut])
                if final and region.endswith(b"\n"):
                    region = region[:-1]
                last = yield from self._units(region, 0, len(region), line)
            else:
                # The last line break ends the last line; it is not a payload's.
                stop = cut - 1 if final and cut > pos and mm[cut - 1 : cut] == b"\n" else cut
                last = yield from self._units(mm, pos, stop, line)
            step = min(cut + 1, end) - pos  # the region and the line break after it
            self.bytes_read += step
            if self._on_chunk is not None:
                self._on_chunk(step)
            pos, line = cut + 1, last + 1
            keep = min(pos, end) - min(pos, end) % mmap.ALLOCATIONGRANULARITY
            if keep > done:
                # Pages behind us leave this process's memory (they stay in the page cache).
                mm.madvise(mmap.MADV_DONTNEED, done, keep - done)
                done = keep
        self.lines = last

    def _chunks(self, f: IO[bytes]) -> Iterator[bytes]:
        raw = getattr(f, "fileobj", None) or f  # progress counts file bytes, also for .gz
        pos = 0
        # read1 returns what one read decompressed: a .gz cut short yields all it holds
        read = getattr(f, "read1", None) or f.read
        compressed = isinstance(f, gzip.GzipFile)
        seen = 0  # lines decompressed so far, to say where damaged compressed data begins
        left = None
        if self.span is not None:
            pos = f.seek(self.span[0])
            left = self.span[1] - self.span[0]
        elif not compressed:
            left = file_size(f)  # a log still growing is read as it was, as a mapped one is
        while True:
            want = CHUNK if left is None else min(CHUNK, left)
            parts: list[bytes] = []
            got, error = 0, None
            while got < want:  # whole chunks: fewer, larger scans
                try:
                    part = read(want - got)
                except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
                    error = e
                    break
                if not part:
                    break
                parts.append(part)
                got += len(part)
            chunk = parts[0] if len(parts) == 1 else b"".join(parts)
            if chunk:
                if compressed:
                    seen += _line_breaks(chunk)
                if left is not None:
                    left -= len(chunk)
                self.bytes_read += len(chunk)
                if b"\x00" in chunk and b"\x00\x00" in chunk:  # memchr first: far cheaper
                    chunk = _NULS.sub(b"\x00", chunk)
                if self._on_chunk is not None:
                    try:
                        now = raw.tell()
                    except OSError:  # a pipe
                        now = pos + len(chunk)
                    self._on_chunk(now - pos)
                    pos = now
                yield chunk
            if error is not None:
                self.bad(seen + 1, f"compressed data is damaged, reading stopped here ({error})")
                return
            if not chunk:
                return

    def _read(self, f: IO[bytes]) -> Iterator[Record]:
        pending = bytearray()
        line = 1 if self.span is None else self.span[2]  # number of the first line in `pending`
        long: _Long | None = None  # a unit over the bound, being gone past
        for chunk in self._chunks(f):
            if long is not None:
                at = long.feed(chunk)
                if at < 0:
                    continue
                rec, line = self._over(long)
                if rec is not None:
                    yield rec
                long, chunk = None, chunk[at:]
            scan_from = max(0, len(pending) - 1)  # new boundaries can only start here
            pending += chunk
            m = _LAST_RECORD_START.match(pending, scan_from)
            if m is not None:
                cut = m.end() - 1  # the newline before the last record line
                region = bytes(pending[:cut])
                del pending[: cut + 1]
                line = (yield from self._units(region, 0, len(region), line)) + 1
            if len(pending) > self.limit:  # one unit, still going on: count it, hold none
                long = _Long(line, self.limit)
                long.feed(pending)
                pending = bytearray()
        if long is not None:
            if long.last_nl:  # the final line break ends the last line, as below
                long.breaks -= 1
                long.rest = max(0, long.rest - 1)
            rec, line = self._over(long)
            if rec is not None:
                yield rec
        last = line - 1
        if pending:
            # The final line break ends the last line; it is not part of a payload.
            tail = bytes(pending[:-1] if pending.endswith(b"\n") else pending)
            last = yield from self._units(tail, 0, len(tail), line)
        self.lines = last

    def _units(
        self, buf: bytes | mmap.mmap, a: int, b: int, line: int
    ) -> Generator[Record, None, int]:
        """Yield the records of buf[a:b], which ends at a unit boundary; return its last line.

        `buf` is a region read in chunks or the mapped file itself: each record line and its
        payload are copied out of it once."""
        start = a
        for m in _RECORD_START.finditer(buf, a, b):
            rec, line = self._at(buf, start, m.start(), line)
            if rec is not None:
                yield rec
            start = m.end()
        rec, line = self._at(buf, start, b, line)
        if rec is not None:
            yield rec
        return line - 1

    def _at(
        self, buf: bytes | mmap.mmap, start: int, end: int, line: int
    ) -> tuple[Record | None, int]:
        """The record of the unit buf[start:end], and the number of the line after it."""
        if end - start > self.limit:  # measured in place, a window at a time: never copied
            long = _Long(line, self.limit)
            for a in range(start, end, WINDOW):
                long.feed(buf[a : min(end, a + WINDOW)])
            return self._over(long)
        nl = buf.find(b"\n", start, end)
        if nl < 0:
            return self._unit(buf[start:end], None, line, 0), line + 1
        rest = buf[nl + 1 : end]
        n = _line_breaks(rest) + 1
        return self._unit(buf[start:nl], rest, line, n), line + n + 1

    def _unit(self, head: bytes, rest: bytes | None, line: int, lines: int) -> Record | None:
        """Read one record line and what follows it: `lines` payload lines (each TAB-led) or None."""
        if head.endswith(b"\r"):
            head = head[:-1]
            self.crlf = True
        led = rest is not None and rest.startswith(b"\t")  # payload lines follow
        if self._headless(head, rest, led, line):
            return None
        rec = self._record(head, line)
        if rec is None:
            if led:
                self.bad(line + 1, "payload of an unreadable record line, skipped")
            return None
        expected = rec.meta.get("has_payload")
        if led:
            assert rest is not None
            rec.payload_lines = lines
            if self.verify and isinstance(expected, str):
                rec.raw, rec.checker = rest, self  # checked when its bytes are asked for
            else:
                self._payload(rec, rest, expected)
        elif expected is not None:
            rec.ok = False
            self.bad(line, "record says it has a payload but none follows (log cut short?)")
        if not led and rest and b"\n\t" in rest:  # TAB lines, but a blank line before them
            self._stray(line, rest, rest.index(b"\n\t") + 1)
        return rec

    def _headless(self, head: bytes, rest: bytes | None, led: bool, line: int) -> bool:
        """Whether the unit has no record line (blank lines, or payload lines with none above
        them, which are a bad line)."""
        if head.startswith(b"\t"):
            self.bad(line, "payload lines with no record line above them")
            return True
        if head and (head[0] not in _SPACE or head.strip()):
            return False
        if led or rest is not None and b"\n\t" in rest:
            self.bad(line, "payload lines with no record line above them")
        return True

    def _over(self, u: _Long) -> tuple[Record | None, int]:
        """The record of a unit over the bound, if its line is within it; the next line."""
        after = u.line + u.breaks + 1
        bound = f"longer than a record may be ({self.limit:,} bytes, ${MAX_RECORD_ENV})"
        if u.head is None:
            self.bad(u.line, f"a line of {u.head_len:,} bytes, {bound}: skipped")
            return None, after
        head = bytes(u.head)
        if head.endswith(b"\r"):
            head = head[:-1]
            self.crlf = True
        if not head.strip() or head.startswith(b"\t"):  # blank or payload lines, no record
            if u.led or head.startswith(b"\t"):
                self.bad(u.line, "payload lines with no record line above them")
            return None, after
        rec = self._record(head, u.line)
        if rec is None:
            return None, after
        rec.ok = u.led is not True and rec.meta.get("has_payload") is None
        if u.led:
            rec.payload_lines = u.breaks
            what = f"payload of {rec.kind}: {u.rest:,} bytes in {u.breaks:,} lines"
            self.bad(u.line + 1, f"{what}, {bound}: not read (its record is)")
        else:
            what = f"{u.breaks:,} lines ({u.rest:,} bytes) after the {rec.kind} record"
            self.bad(u.line + 1, f"{what}, no payload, {bound}: skipped")
        return rec, after

    def _stray(self, line: int, rest: bytes, tab: int) -> None:
        """TAB lines after blank ones, from rest[tab], in what follows the record on `line`."""
        self.bad(line + rest.count(b"\n", 0, tab) + 1, _STRAY)

    def _payload(self, rec: Record, raw: bytes, expected: Any) -> None:
        """A payload with no md5 to check it by: its bytes read now."""
        rec.data = _exact(raw)
        if expected is None:
            self.bad(rec.line + 1, "payload lines under a record without has_payload")
            rec.ok = False
        elif self.verify:
            rec.ok = False
            self.bad(rec.line, f"has_payload is not an md5 string: {_short(expected)}")

    def check(self, rec: Record, raw: bytes, expected: str) -> None:
        """Read a payload's bytes and check them against its md5: a mismatch is a bad line."""
        # With an md5 to check it, the fast way of removing the TABs is safe to try first.
        data = _untab(raw)
        if hashlib.md5(data, usedforsecurity=False).hexdigest() == expected:
            rec.data = data
            return
        exact = _exact(raw)
        if exact != data and hashlib.md5(exact, usedforsecurity=False).hexdigest() == expected:
            rec.data = exact
            return
        data = exact
        for fixed in _repairs(data):
            if hashlib.md5(fixed, usedforsecurity=False).hexdigest() == expected:
                rec.data = fixed
                return
        blank = _BLANK_THEN_TAB.search(raw)
        if blank is not None:  # the payload, then a blank line and TAB lines of no record
            whole = _exact(raw[: blank.start()])
            if hashlib.md5(whole, usedforsecurity=False).hexdigest() == expected:
                rec.data = whole
                self._stray(rec.line, raw, blank.end() - 1)
                return
        rec.data = data
        rec.ok = False
        self.bad(
            rec.line + 1,
            f"payload of {rec.kind} does not match its md5 (cut short or altered); "
            f"{rec.payload_lines} lines kept as they are",
        )

    def _record(self, head: bytes, line: int) -> Record | None:
        m = _PREFIX.match(head)
        if m is None:
            # Junk before a record (NUL bytes, the start of a line cut short): read what follows.
            m = _PREFIX.search(head)
            if m is None:
                self.bad(line, "not a TORCH_TRACE record: no glog prefix" + _peek(head))
                return None
            self.bad(
                line,
                f"{m.start()} bytes before the glog prefix skipped{_peek(head[: m.start()])}; "
                "the record after them was read",
            )
        error = None
        for _ in range(MAX_RETRIES):
            rec, why = self._parse(head, m, line)
            if rec is not None:
                if error is not None:
                    self.bad(line, f"{error}; a record written after it on this line was read")
                return rec
            error = error or why
            # A record cut short and another written after it on the same line (a crashed
            # writer, two processes): read the later one.
            m = _PREFIX.search(head, m.end())
            if m is None:
                break
        self.bad(line, error or "record is not valid JSON")
        return None

    def _parse(self, head: bytes, m: re.Match[bytes], line: int) -> tuple[Record | None, str]:
        """The record whose glog prefix is `m`, or why there is none."""
        j = head.find(b"] {", m.end())
        if j < 0:
            return None, "not a TORCH_TRACE record: no JSON object after the prefix"
        try:
            meta = orjson.loads(head[j + 2 :])
        except orjson.JSONDecodeError as e:
            meta = python_json(head[j + 2 :])
            if meta is NOT_JSON:
                meta = lenient_json(head[j + 2 :])
                if meta is None:
                    return None, f"record is not valid JSON ({json_error(e)})"
                self.bad(line, "record is not valid UTF-8; bad bytes replaced")
        if not isinstance(meta, dict) or not meta:
            return None, "record is not a JSON object with an event kind"
        kind = next(iter(meta))
        rank, time, pid = m.groups()
        rank_v = meta.get("rank")
        if type(rank_v) is not int:
            rank_v = int(rank) if rank else None
        return Record(kind, meta[kind], meta, line, int(pid), time.decode(), rank_v), ""


def _line_breaks(data: bytes | bytearray) -> int:
    """data.count(b"\\n"), more than twice as fast on a payload: CPython's count looks at each
    byte, while removing a byte jumps from one to the next with memchr."""
    if len(data) < 4096:
        return data.count(b"\n")
    return len(data) - len(data.replace(b"\n", b""))


def _exact(raw: bytes) -> bytes:
    """Payload lines without the TAB that starts each of them, and no other."""
    return _NEWLINE_TAB.sub(b"\n", raw)[1:]


def _untab(raw: bytes) -> bytes:
    """Payload lines without the TAB that starts each of them.

    Deleting every TAB is nearly four times as fast as replacing "\n\t" (CPython deletes one
    byte with memchr and memcpy; `translate` goes byte by byte), and right whenever the only
    TABs are the ones that start lines (the usual case); when the md5 then disagrees,
    `_payload` tries the exact replacement before calling the payload damaged.
    """
    return raw.replace(b"\t", b"")


def _mapped(f: IO[bytes]) -> mmap.mmap | None:
    """A read-only map of a plain, non-empty local file, else None (read it in chunks)."""
    if not isinstance(f, io.BufferedReader | io.FileIO) or os.environ.get("TLVIEW_NO_MMAP"):
        return None
    try:
        if os.fstat(f.fileno()).st_size == 0 or not f.seekable():
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _repairs(data: bytes) -> Iterator[bytes]:
    """Payload text as it was before common mangling: CRLF line ends, stray trailing lines."""
    if b"\r" in data:
        lf = data.replace(b"\r\n", b"\n")
        if lf.endswith(b"\r"):
            lf = lf[:-1]
        yield lf
        yield lf.rstrip(b"\n")
    if data.endswith(b"\n"):
        yield data.rstrip(b"\n")


def _short(v: Any, n: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= n else text[: n - 3] + "..."


def _peek(head: bytes) -> str:
    if b"\x00" in head[:200]:
        return " (binary data)"
    return ""


def sniff(path: Path, opener: Opener = open_log) -> str | None:
    """Why `path` is plainly not a log (empty, binary), or None if it may be one."""
    if opener is open_log and path.exists() and not path.is_file():
        return None  # a pipe or device: what is read here would be lost to the reader
    start = b""
    try:
        with opener(path) as f:
            # read1, a part at a time: a .gz cut short yields what it holds, however little
            read = getattr(f, "read1", None) or f.read
            while len(start) < 4096:
                part = read(4096 - len(start))
                if not part:
                    break
                start += part
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        if not start:
            return "not readable as gzip"
    if not start:
        return "empty file"
    # NUL runs are what a crash leaves in a log: judge the bytes around them.
    rest = start.replace(b"\x00", b"")
    if _PREFIX.search(start) is None and rest and _binary(rest):
        return "binary file, not a TORCH_TRACE log"
    return None


def _binary(data: bytes) -> bool:
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + sum(1 for c in text if ord(c) < 32 and c not in "\t\n\r\f")
    return bad > len(text) // 10
