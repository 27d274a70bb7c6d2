"""Where in the user's source each problem is: a graph break, a recompile's failed guard, a failed
compile, at the line torch names (the break's, the guard's, the error's) when it is the user's,
else the innermost frame outside torch of the compile's stack; deduplicated, for annotations."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tlview.analyze.compiles import Analyser, Analysis
from tlview.analyze.diff import Diff, norm
from tlview.analyze.names import Refs
from tlview.analyze.summary import short
from tlview.index.core import innermost_user, is_torch_file
from tlview.model import Compile, Report, StackFrame
from tlview.units import number

# The most annotations of each level written: GitHub shows 10 errors and 10 warnings of a step.
MAX_PER_LEVEL = 10
_PLACE = re.compile(r"(.+):(\d+)$")
# A frame of the stack torch adds under a failed guard (torch 2.9 on): where the guard came from.
_GUARD_COMMENT = re.compile(r"\s+#\s.*")  # the source torch quotes after a guard: its line says it
_GUARD_FRAME = re.compile(r'^\s*File "([^"\n]+)", line (\d+), in ', re.M)


@dataclass(slots=True)
class Site:
    """One problem at one line: what it is, how often, and in which compiles."""

    level: str  # "error" (a failed compile) or "warning"
    kind: str  # graph-break | recompile | failure
    file: str
    line: int
    title: str
    message: str
    count: int = 0
    compiles: list[str] = field(default_factory=list)


def user_frame(stack: list[StackFrame]) -> StackFrame | None:
    """The innermost frame of a compile's stack outside torch that names a file."""
    return innermost_user([f for f in stack if f.file])


def _place(where: str | None, c: Compile) -> tuple[str, int] | None:
    """A place torch named (`file:line`) when it is the user's, else the compile's user frame,
    else the first line of the frame it compiled (torch logged no stack)."""
    m = _PLACE.match(where or "")
    line = number(m.group(2)) if m else None  # a line of 5,000 digits is no line
    if m and line is not None and not is_torch_file(m.group(1)):
        return m.group(1), line
    f = user_frame(c.stack)
    if f is not None:
        return f.file, f.line
    if c.file and c.source_line is not None and not is_torch_file(c.file):  # a stack not logged
        return c.file, c.source_line
    return None


def _guard_place(reason: str) -> str | None:
    """The user line a failed guard came from (`file:line`), the innermost of the stack torch
    logged under it outside torch; None when it logged none."""
    user = [f"{m[1]}:{m[2]}" for m in _GUARD_FRAME.finditer(reason) if not is_torch_file(m[1])]
    return user[-1] if user else None


def _first(text: str | None) -> str:
    return (text or "").strip().partition("\n")[0]


Problem = tuple[str, str, str | None, str, str]  # (level, kind, place torch named, title, message)


def problems(a: Analysis) -> Iterable[Problem]:
    """A compile's problems: its graph breaks (those of its attempts that restarted too), its
    recompile's failed guard, its failure."""
    c = a.compile
    fn = c.function or "?"
    for b in a.breaks:
        yield "warning", "graph-break", b.where, f"graph break in {fn}", b.title
    yield from _recompile(c, fn)
    yield from _failure(c, fn)


def _recompile(c: Compile, fn: str) -> Iterable[Problem]:
    r = c.recompile
    if r is None or c.id is None or c.is_retry:
        return
    guard = _GUARD_COMMENT.sub("", norm(_first(r.reasons[0]))) if r.reasons else "none logged"
    where = _guard_place(r.reasons[0]) if r.reasons else None
    yield "warning", "recompile", where, f"recompile of {fn}", f"failed guard: {guard}"


def _failure(c: Compile, fn: str) -> Iterable[Problem]:
    if c.status == "failed":
        why = f"{c.fail_type or 'failed'}: {_first(c.fail_reason)}".rstrip(": ")
        yield "error", "failure", c.fail_where, f"compile of {fn} failed", why
    elif c.status == "incomplete":
        yield "error", "failure", None, f"compile of {fn} never finished", "the run stopped"


def sites(report: Report) -> list[Site]:
    """Every problem of the report at its user line, one Site per (kind, line, title,
    message), most frequent first; problems with no user frame are left out."""
    return sites_of(report.attempts, Refs.of(report))


def added(d: Diff) -> list[Site]:
    """The sites of NEW with nothing of their kind at that line (by file name) in BASE: what
    a change brought, for `tlview diff --annotations`."""
    base = sites_of(c for p in d.frames if p.base for c in p.base.attempts)
    had = {(s.kind, short(s.file), s.line) for s in base}
    new = sites_of(c for p in d.frames if p.new for c in p.new.attempts)
    return [s for s in new if (s.kind, short(s.file), s.line) not in had]


def sites_of(
    compiles: Iterable[Compile], refs: Callable[[Compile], str] | None = None
) -> list[Site]:
    """The sites of these compiles, in order (named by REFS, else by their keys): an attempt
    that restarted is its compile's, as every format says."""
    out: dict[tuple[str, str, int, str, str], Site] = {}
    analyse = Analyser(refs or _key)
    for c in compiles:
        a = analyse(c)
        if c.id is not None and not a.counted:
            continue
        for level, kind, where, title, message in problems(a):
            place = _place(where, c)
            if place is None:
                continue
            key = (kind, *place, title, message)
            s = out.get(key)
            if s is None:
                s = out[key] = Site(level, kind, place[0], place[1], title, message)
            s.count += 1
            if len(s.compiles) < 8:
                s.compiles.append(a.ref)
    return sorted(out.values(), key=lambda s: (s.level != "error", -s.count))


def _key(c: Compile) -> str:
    return c.key


def relative(file: str, root: str | None = None) -> str:
    """FILE as a path under ROOT (default: the current directory) when it is under it, which
    is how a CI system names a file of the checkout; else as logged."""
    try:
        return Path(file).relative_to(Path(root or os.getcwd())).as_posix()
    except ValueError:
        return file
