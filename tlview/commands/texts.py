"""The exact texts of a few payloads of a log, for `tlview show`'s diffs: the log read once to
find them, then again keeping only those (never every payload of a kind)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tlview.analyze.names import find_compile
from tlview.index.keep import Keep
from tlview.model import Compile, Report

if TYPE_CHECKING:
    from tlview.logs.progress import BarLike

WHOLE = 1 << 62


def read(path: str, progress: bool | BarLike | None, keep: Keep | None = None) -> Report:
    import tlview

    return tlview.read(path, keep=keep, progress=progress)


def texts_at(
    path: str, ref: str, lines: Iterable[int], progress: bool | BarLike | None
) -> dict[int, str]:
    """The exact texts of the payloads at these lines of compile REF (a second read of the log
    that keeps only those), by line; a payload torch logged without text is left out."""
    keep = Keep(WHOLE, WHOLE, exact=True, lines=frozenset(lines), line=-1)
    report = read(path, progress, keep)
    return kept(find_compile(report, ref))


def kept(*compiles: Compile) -> dict[int, str]:
    """The texts a read kept of these compiles' payloads, by line."""
    out: dict[int, str] = {}
    for c in compiles:
        for p in c.payloads():
            if p.data is not None and not p.absent:
                out[p.line] = p.data.decode("utf-8", errors="replace")
    return out
