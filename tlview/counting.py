"""What torch counts as a compile, and `Report.compiles`: those compiles as a sequence.

Typed by what it reads of a compile and a log (protocols), so the model can import it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, TypeVar, overload


class Id(Protocol):
    """What `counts_as_compile` reads of a compile's id (`model.CompileId`)."""

    @property
    def frame(self) -> int | None: ...
    @property
    def autograd(self) -> int | None: ...


class Attempt(Protocol):
    """What `is_counted` reads of a compile attempt (`model.Compile`)."""

    @property
    def id(self) -> Id | None: ...
    @property
    def status(self) -> str: ...


A = TypeVar("A", bound=Attempt)
A_co = TypeVar("A_co", bound=Attempt, covariant=True)


class Log(Protocol[A_co]):
    """What `Counted` reads of a log (`model.LogIndex`): its attempts, in log order."""

    @property
    def compiles(self) -> Sequence[A_co]: ...


def is_counted(c: Attempt) -> bool:
    """A compile torch counts, or an export's traced id: an id, and not an attempt that
    restarted (the compile that followed it is the one counted)."""
    return c.id is not None and c.status != "restarted"


def counts_as_compile(c: Attempt) -> bool:
    """A compile the headline counts, as torch counts them (a `compilation_metrics` record):
    not an export's traced id, nor compiled autograd's captured graph (`!0`, an id with no
    frame: dynamo compiles that graph as `!0/0/0`, which is the one counted)."""
    cid = c.id
    if cid is None or not is_counted(c) or c.status == "traced":
        return False
    return cid.frame is not None or cid.autograd is None


class Counted(Sequence[A], Generic[A]):
    """`Report.compiles`: the counted compiles of the logs, found once on first use (from the
    marks a read keeps of each compile, without reading it back, where there are any)."""

    def __init__(self, logs: Sequence[Log[A]]) -> None:
        self._logs = logs
        self._at: list[tuple[int, int]] | None = None

    def _places(self) -> list[tuple[int, int]]:
        if self._at is None:
            self._at = []
            for li, log in enumerate(self._logs):
                marks = getattr(log.compiles, "marks", None)
                flags = (
                    [m.counted for m in marks]
                    if marks is not None
                    else [is_counted(c) for c in log.compiles]
                )
                self._at += [(li, k) for k, yes in enumerate(flags) if yes]
        return self._at

    def __len__(self) -> int:
        return len(self._places())

    @overload
    def __getitem__(self, i: int) -> A: ...
    @overload
    def __getitem__(self, i: slice) -> list[A]: ...
    def __getitem__(self, i: int | slice) -> A | list[A]:
        at = self._places()
        if isinstance(i, slice):
            return [self._logs[li].compiles[k] for li, k in at[i]]
        li, k = at[i]
        return self._logs[li].compiles[k]

    def __iter__(self) -> Iterator[A]:
        for li, k in self._places():
            yield self._logs[li].compiles[k]
