"""The tail of a large report on both cores: a forked copy renders the later compiles to a temp
file while this process renders the earlier ones; the parts are joined in order."""

from __future__ import annotations

import codecs
import contextlib
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import IO, Any

from tlview.model import Compile, Report
from tlview.runtime.cores import spare_core
from tlview.runtime.fork import Forked
from tlview.runtime.store import CompileList, cost, temp_dir

# Pickled bytes of compiles below which one process renders them all: a fork costs more.
MIN_COST = 1 << 20
# The copy's share of the work: it starts by faulting in its own copy of every page it
# writes to (reference counts), so an even split ends later in the copy (page of 220 MB log:
# 67 ms here, 97 ms in the copy).
LATER_SHARE = 0.45
COPY_CHUNK = 1 << 16  # bytes of the copy's output read at a time


def costs(report: Report) -> list[int]:
    """What rendering each compile of the report costs, in report order, without loading any."""
    out: list[int] = []
    for log in report.logs:
        cl = log.compiles
        out.extend(map(cost, cl.entries if isinstance(cl, CompileList) else cl))
    return out


def middle(costs: Sequence[int], scale: int = 1) -> int | None:
    """The index the later half starts at, for the copy to end with this process (see
    LATER_SHARE); None: one process.

    `scale`: how many times MIN_COST the work must come to (a pass that only counts is cheaper
    a byte than one that renders)."""
    total = sum(costs)
    if len(costs) < 2 or total < MIN_COST * scale or not spare_core():
        return None
    acc = 0
    mine = total * (1 - LATER_SHARE)
    for i, c in enumerate(costs):
        if acc + c / 2 >= mine:
            return min(max(i, 1), len(costs) - 1)
        acc += c
    return len(costs) - 1


def compiles(report: Report, start: int, stop: int | None = None) -> Iterator[Compile]:
    """The report's compiles [start, stop), in order, loading only those."""
    return (c for _, _, c in places(report, start, stop))


def places(
    report: Report, start: int, stop: int | None = None
) -> Iterator[tuple[int, int, Compile]]:
    """(log index, index in the log, compile) of the report's compiles [start, stop)."""
    n = 0
    for li, log in enumerate(report.logs):
        cl = log.compiles
        size = len(cl)
        lo = max(start - n, 0)
        hi = size if stop is None else min(stop - n, size)
        if lo < hi:
            got = islice(cl.iter_from(lo), hi - lo) if isinstance(cl, CompileList) else cl[lo:hi]
            for k, c in enumerate(got, lo):
                yield li, k, c
        n += size
        if stop is not None and n >= stop:
            return


class Later:
    """The forked renderer of the later compiles: where its output goes and what it returns."""

    def __init__(self, job: Callable[[IO[bytes]], Any]) -> None:
        import tempfile

        fd, self.path = tempfile.mkstemp(prefix="tlview-", suffix=".part", dir=temp_dir())

        def run() -> Any:
            with os.fdopen(fd, "wb") as f:
                return job(f)

        try:
            self.copy = Forked(run, cleanup=self.discard)
        finally:
            os.close(fd)
        # Whatever stops this process first, the copy's output goes (Forked stops the copy).
        self._final: weakref.finalize[Any, Any] = weakref.finalize(self, _unlink, self.path)

    def result(self) -> tuple[bool, Any]:
        """Wait for the copy: (True, what its job returned) or (False, why it failed)."""
        ok, value = self.copy.result()
        if not ok:
            self.discard()
            if os.environ.get("TLVIEW_DEBUG"):
                print(f"tlview: rendering in one process: {value}", file=sys.stderr)
        return ok, value

    def _open(self) -> IO[bytes]:
        """The copy's output, its name already removed: nothing is left behind, whatever stops
        the reading (a closed pipe, ^C). Where fork exists, an open file outlives its name."""
        f = open(self.path, "rb")  # noqa: SIM115 - closed by the caller
        self.discard()
        return f

    def copy_to(self, out: IO[bytes]) -> None:
        with self._open() as f:
            done = _send(f, out)
            f.seek(done)
            while data := f.read(COPY_CHUNK):
                out.write(data)

    def text(self) -> Iterator[str]:
        """The output as text, CHUNK bytes at a time."""
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        with self._open() as f:
            while data := f.read(COPY_CHUNK):
                yield decode(data)
        yield decode(b"", True)

    def discard(self) -> None:
        _unlink(self.path)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _send(f: IO[bytes], out: IO[bytes]) -> int:
    """Copy f into out in the kernel where both are files (or out a pipe); bytes copied."""
    try:
        dest = out.fileno()
        size = os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # a BytesIO (tests), a closed stream
        return 0
    out.flush()
    done = 0
    with contextlib.suppress(OSError):  # not supported here: the rest is copied by hand
        while done < size:
            n = os.sendfile(dest, f.fileno(), done, size - done)
            if n <= 0:
                break
            done += n
    return done
