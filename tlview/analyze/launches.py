"""Which logs of a folder are one launch of a program: torch keeps adding logs to a reused
TORCH_TRACE folder, and two programs' logs added up would read as one run.

A launch is the ranks of one job (every log that names a rank: a job's ranks run one program,
whatever their clocks say), or logs with no rank that ran one program on one torch build,
each started before, or within GAP_S of, the end of another: the processes a driver starts one
after another. Logs of another program or torch build, or started longer after, are another
launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tlview.errors import EXIT_USAGE, TlviewError
from tlview.model import LogIndex
from tlview.units import number

GAP_S = 60.0  # seconds between one log's last record and the next's first that still join


@dataclass(slots=True)
class Launch:
    """Logs of one launch, by their place in the folder's list."""

    logs: list[int] = field(default_factory=list)
    program: str | None = None  # the file of the outermost frame of its first stack
    torch: str | None = None
    start: float | None = None  # seconds into the year, as the logs' clocks read
    end: float | None = None
    first: str | None = None  # its first record's time, as the log writes it
    ranked: bool = False


def program_of(log: LogIndex) -> str | None:
    """The program a log's process ran: the outermost frame of its first compile's stack."""
    for c in log.compiles:
        if c.stack:
            return c.stack[0].file
    return None


def seconds_of(t: str | None) -> float | None:
    """`MMDD HH:MM:SS.ffffff` (glog's time, no year) as seconds into the year, months of 31
    days: enough to order logs and measure the gaps between them."""
    if not t or len(t) < 13:
        return None
    parts = [number(t[:2]), number(t[2:4]), number(t[5:7]), number(t[8:10]), number(t[11:13])]
    if any(p is None for p in parts):
        return None
    month, day, h, m, s = (p or 0 for p in parts)
    frac = float("0" + t[13:]) if t[13:14] == "." and t[14:].isdigit() else 0.0
    return ((month * 31 + day) * 24 + h) * 3600.0 + m * 60 + s + frac


def launches(logs: Sequence[LogIndex]) -> list[Launch]:
    """The launches of a folder's logs, in the order they started."""
    ranked = Launch(ranked=True)
    found: list[Launch] = []
    order = sorted(range(len(logs)), key=lambda k: (seconds_of(logs[k].first_time) or 0.0, k))
    for k in order:
        log = logs[k]
        if log.rank is not None:
            _add(ranked, log, k)
            continue
        home = next((g for g in [ranked, *found] if g.logs and _joins(g, log)), None)
        if home is None:
            home = Launch()
            found.append(home)
        _add(home, log, k)
    out = ([ranked] if ranked.logs else []) + found
    return sorted(out, key=lambda g: (g.start or 0.0, g.logs[0]))


def _add(g: Launch, log: LogIndex, k: int) -> None:
    g.logs.append(k)
    g.program = g.program or program_of(log)
    g.torch = g.torch or log.torch_version
    start, end = seconds_of(log.first_time), seconds_of(log.last_time)
    if start is not None and (g.start is None or start < g.start):
        g.start, g.first = start, log.first_time
    if end is not None and (g.end is None or end > g.end):
        g.end = end


def _joins(g: Launch, log: LogIndex) -> bool:
    """Whether a log with no rank is of launch G: one program, one torch build, and started
    before G's last record or within GAP_S after it."""
    prog = program_of(log)
    if prog and g.program and prog != g.program:
        return False
    if log.torch_version and g.torch and log.torch_version != g.torch:
        return False
    start = seconds_of(log.first_time)
    return start is None or g.end is None or start <= g.end + GAP_S


def apart(a: Launch, b: Launch) -> str:
    """What tells launch B from launch A, in a few words."""
    if a.program and b.program and a.program != b.program:
        return "another program"
    if a.torch and b.torch and a.torch != b.torch:
        return "another torch build"
    if a.end is not None and b.start is not None:
        return f"started {_duration(b.start - a.end)} after the one before ended"
    return "another launch"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.0f} h"


def described(g: Launch) -> str:
    """A launch in a few words: `train.py at 11-29 18:20:02 (2 ranks)`."""
    who = (g.program or "").replace("\\", "/").rsplit("/", 1)[-1] or "a program"
    when = f" at {g.first[:2]}-{g.first[2:4]} {g.first[5:13]}" if g.first else ""
    n = len(g.logs)
    many = f"{n} ranks" if g.ranked and n > 1 else f"{n} log{'s' if n > 1 else ''}"
    return f"{who}{when} ({many})"


def one_launch(path: str, logs: Sequence[LogIndex], pick: int | None) -> tuple[list[int], str]:
    """The logs of a folder to read, and a note when they are one launch of several: the launch
    PICK (1 for the first to start), or the only one there is. Several launches and no PICK, or
    a PICK that names none, is a usage error that lists them (tlview adds no launches up)."""
    found = launches(logs)
    if pick is None and len(found) < 2:
        return list(range(len(logs))), ""
    listed = "; ".join(f"{n}: {described(g)}" for n, g in enumerate(found, 1))
    if pick is None:
        why = ", ".join(sorted({apart(a, b) for a, b in zip(found, found[1:], strict=False)}))
        raise TlviewError(
            f"{path}: {len(found)} launches in one folder, not one job ({why}): {listed}; "
            "read one with --launch N (or --latest: the newest log alone)",
            EXIT_USAGE,
        )
    if not 1 <= pick <= len(found):
        raise TlviewError(
            f"{path}: no launch {pick}: the folder holds {len(found)} ({listed})",
            EXIT_USAGE,
        )
    g = found[pick - 1]
    note = f"launch {pick} of {len(found)} in this folder: {described(g)}" if len(found) > 1 else ""
    return sorted(g.logs), note
