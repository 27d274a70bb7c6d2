"""The one driver of split rendering: a renderer's pass over a large report runs on both cores,
a forked copy taking the later compiles; their output is joined in order, their states merged.
Renderers hand it passes (`render.Pass`) and never cut, fork or join themselves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Any, Generic, Protocol, TypeVar

from tlview.model import Compile, Report
from tlview.runtime import halves

S = TypeVar("S")
A = TypeVar("A")


class _Pass(Protocol[S]):
    def start(self, later: bool) -> S: ...
    def run(self, state: S, compiles: Iterator[Any]) -> Any: ...
    def merge(self, state: S, later: S) -> None: ...


class Forking(Generic[A]):
    """A `render.Split` over a report: a pass whose compiles cost more than `halves.MIN_COST`
    runs in two parts when a second core is spare, else here in one."""

    def __init__(
        self,
        report: Report,
        analyser: Callable[[], Callable[[Compile, int, tuple[int, int]], A]],
        lead_in: Callable[[Compile], bool] = lambda c: False,
    ) -> None:
        self.report = report
        self.analyser = analyser  # a fresh analyser for each part: what it was given is read
        # Whether a compile just before a part still goes to the part's analyser (not to its
        # pass): the attempts that restarted into the part's first compile.
        self.lead_in = lead_in
        self._costs: list[int] | None = None

    @property
    def costs(self) -> list[int]:
        if self._costs is None:
            self._costs = halves.costs(self.report)
        return self._costs

    def _analysed(self, start: int, stop: int | None = None) -> Iterator[A]:
        return part(self.report, self.analyser(), start, stop, self.lead_in)

    def fold(self, p: _Pass[S], scale: int = 1) -> S:
        return self._run(p, halves.middle(self.costs, scale), None)

    def write(self, p: _Pass[S], out: IO[bytes]) -> S:
        return self._run(p, halves.middle(self.costs), out)

    def _run(self, p: _Pass[S], cut: int | None, out: IO[bytes] | None) -> S:
        state = p.start(False)
        if cut is None:
            _drain(p.run(state, self._analysed(0)), out)
            return state

        def later(f: IO[bytes]) -> S:
            mine = p.start(True)
            _drain(p.run(mine, self._analysed(cut)), None if out is None else f)
            return mine

        copy = halves.Later(later)
        _drain(p.run(state, self._analysed(0, cut)), out)
        ok, value = copy.result()
        if not ok:  # the copy failed: the later part is run here, going on from this state
            _drain(p.run(state, self._analysed(cut)), out)
            return state
        if out is None:
            copy.discard()
        else:
            copy.copy_to(out)
        p.merge(state, value)
        return state

    def text(
        self, p: _Pass[S], span: tuple[int, int], weigh: Callable[[int, int], int]
    ) -> Iterator[str]:
        first, stop = span
        weights = [weigh(first + i, c) for i, c in enumerate(self.costs[first:stop])]
        cut = halves.middle(weights)
        if cut is None:
            yield from p.run(p.start(False), self._analysed(first, stop))
            return
        at = first + cut

        def later(f: IO[bytes]) -> None:
            for piece in p.run(p.start(True), self._analysed(at, stop)):
                f.write(piece.encode("utf-8", "replace"))

        copy = halves.Later(later)
        yield from p.run(p.start(False), self._analysed(first, at))
        ok, _ = copy.result()
        yield from copy.text() if ok else p.run(p.start(False), self._analysed(at, stop))


def part(
    report: Report,
    analyse: Callable[[Compile, int, tuple[int, int]], A],
    start: int,
    stop: int | None = None,
    lead_in: Callable[[Compile], bool] = lambda c: False,
) -> Iterator[A]:
    """The report's compiles [start, stop), analysed in order, each compile read once; the
    compiles just before `start` that `lead_in` keeps go to `analyse` first, unyielded."""
    for li, k, n, c in _before(report, start, lead_in):
        analyse(c, n, (li, k))
    for li, k, n, c in _numbered(report, start, stop):
        yield analyse(c, n, (li, k))


def _before(
    report: Report, start: int, lead_in: Callable[[Compile], bool]
) -> list[tuple[int, int, int, Compile]]:
    """The compiles just before `start` that `lead_in` keeps, in order."""
    out: list[tuple[int, int, int, Compile]] = []
    n = start - 1
    while n >= 0:
        got = next(_numbered(report, n, n + 1))
        if not lead_in(got[3]):
            break
        out.append(got)
        n -= 1
    return out[::-1]


def _drain(pieces: Any, out: IO[bytes] | None) -> None:
    for piece in pieces:
        if out is not None:
            out.write(piece)


def _numbered(
    report: Report, start: int, stop: int | None
) -> Iterator[tuple[int, int, int, Compile]]:
    """(log index, index in the log, place in the report, compile) of compiles [start, stop)."""
    for n, (li, k, c) in enumerate(halves.places(report, start, stop), start):
        yield li, k, n, c
