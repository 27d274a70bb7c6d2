"""Owners for the records torch logged without a compile id (`-/-`): the compile they belong to
where torch's order makes it certain, else the code that wrote them.

Certain, in one process (one log), means one of:
- written while that compile's span, and no other compile's, was open (index/beside.py);
- a span that lies inside that compile's span, and no other's, by its timestamps;
- written inside the `fullgraph_capture` span that traced that compile and no other (aot_compile,
  precompile, strict export: inductor's work for the trace comes after it, without an id).
Every other record is grouped by what wrote it: the innermost frame of the stack torch logs with
a record that has no compile id, and counted by name; names written by code outside torch (a
third-party backend, vLLM) and record kinds tlview does not read are counted apart.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tlview.analyze.missing import CAPTURE_SPAN
from tlview.aside import Loose
from tlview.model import Compile, LogIndex, Phase

# The spans that bound a compile's own work (dynamo's, AOTInductor's, a lazy backward's).
_BOUNDS = ("dynamo", "entire_frame_compile", "compile_fx_aot", "entire_backward_compile")


@dataclass(frozen=True, slots=True)
class Attached:
    """Records outside any compile id that belong to a compile, counted by name."""

    compile: str
    name: str
    count: int
    how: str  # why it is certain, in a few words


@dataclass(slots=True)
class WriterGroup:
    """Records outside any compile id written by one piece of code, counted by name."""

    writer: str  # "file.py:12 in fn", or "(no stack logged)"
    torch: bool  # the writer is torch's own code
    count: int = 0
    names: dict[str, int] = field(default_factory=dict)
    user: str | None = None  # the user line they come from, when their stack has one


@dataclass(slots=True)
class Owners:
    """Who the records without a compile id of one log belong to."""

    attached: list[Attached]
    groups: list[WriterGroup]  # most records first
    # names tlview does not know: record kinds it does not read, and names written without a
    # compile id by code outside torch (third-party backends, vLLM)
    unknown: dict[str, int]
    spans: list[tuple[Phase, str]]  # spans without an id inside one compile's span, and its key


def _short(f: object) -> str:
    return str(f).replace("\\", "/").rsplit("/", 1)[-1]


def _bounds(compiles: Iterable[Compile]) -> list[tuple[float, float, str]]:
    """Each compile's own spans (start, end, key), by start."""
    out = [
        (p.start_us, p.start_us + p.dur_us, c.key)
        for c in compiles
        if c.id is not None
        for p in c.phases
        if p.dur_us is not None and (p.name in _BOUNDS or p.name.startswith("compile_attempt"))
    ]
    out.sort()
    return out


def span_owners(spans: Sequence[Phase], compiles: Iterable[Compile]) -> list[tuple[Phase, str]]:
    """The spans without an id that lie inside one compile's span (innermost when nested)."""
    bounds = _bounds(compiles)
    done = sorted((p for p in spans if p.dur_us is not None), key=lambda p: p.start_us)
    out: list[tuple[Phase, str]] = []
    active: list[tuple[float, float, str]] = []  # heap by end: the compile spans begun so far
    i = 0
    for p in done:
        while i < len(bounds) and bounds[i][0] <= p.start_us:
            heapq.heappush(active, (bounds[i][1], bounds[i][0], bounds[i][2]))
            i += 1
        while active and active[0][0] < p.start_us:
            heapq.heappop(active)
        key = _around(active, p.start_us + (p.dur_us or 0.0))
        if key is not None:
            out.append((p, key))
    return out


def _around(active: list[tuple[float, float, str]], end: float) -> str | None:
    """The compile whose span holds a span ending at `end`: the only one, or the innermost of
    spans that nest; None when it is not certain."""
    inside = sorted((a for a in active if end <= a[0]), key=lambda a: a[1])
    if not inside:
        return None
    nested = all(a[0] >= b[0] for a, b in zip(inside, inside[1:], strict=False))
    if len({a[2] for a in inside}) == 1 or nested:
        return inside[-1][2]
    return None


def _captures(outside: Compile | None, compiles: Sequence[Compile]) -> dict[float, str]:
    """Each fullgraph_capture span (by its start) that traced exactly one compile: that one."""
    if outside is None:
        return {}
    starts = [(min(p.start_us for p in c.phases), c.key) for c in compiles if c.id and c.phases]
    out = {}
    for p in outside.phases:
        keys = _traced(p, starts) if p.name == CAPTURE_SPAN else set()
        if len(keys) == 1:
            out[p.start_us] = keys.pop()
    return out


def _traced(p: Phase, starts: list[tuple[float, str]]) -> set[str]:
    """The compiles that began inside span `p`."""
    end = p.start_us + (p.dur_us if p.dur_us is not None else -1.0)
    return {k for s, k in starts if p.start_us <= s <= end}


def _owner(x: Loose, captures: dict[float, str]) -> tuple[str, str] | None:
    if x.inside is not None:
        return x.inside, "written while its span alone was open"
    if x.span == CAPTURE_SPAN and x.span_start in captures:
        return captures[x.span_start], f"inside the {CAPTURE_SPAN} that traced it"
    return None


def owners(log: LogIndex) -> Owners:
    """Who the records without a compile id of one log (one process) belong to."""
    compiles = [c for c in log.compiles]
    outside = next((c for c in compiles if c.id is None), None)
    captures = _captures(outside, compiles)
    attached: list[Attached] = []
    groups: dict[str, WriterGroup] = {}
    unknown: dict[str, int] = dict(log.unknown_kinds)
    for x in outside.loose if outside is not None else []:
        if x.writer is not None and not x.torch:
            unknown[x.name] = unknown.get(x.name, 0) + x.count
        got = _owner(x, captures)
        if got is not None:
            attached.append(Attached(got[0], x.name, x.count, got[1]))
        else:
            _group(groups, x)
    spans = span_owners(outside.phases, compiles) if outside is not None else []
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.writer))
    return Owners(attached, ordered, unknown, spans)


def _group(groups: dict[str, WriterGroup], x: Loose) -> None:
    writer = _short(x.writer) if x.writer is not None else "(no stack logged)"
    g = groups.get(writer)
    if g is None:
        g = groups[writer] = WriterGroup(writer, x.torch or x.writer is None)
    g.count += x.count
    g.names[x.name] = g.names.get(x.name, 0) + x.count
    if g.user is None and x.user is not None:
        g.user = _short(x.user)


def owned_spans(o: Owners, key: str) -> list[Phase]:
    """The spans without an id that a compile owns (for phases.compile_phases' `extra`)."""
    return [p for p, k in o.spans if k == key]
