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

A log is healthy here when every such record is a compile's, one a process writes without a
compile by nature (torch's version) or one of vLLM's, which the vLLM part of a report reads:
`Owners.unexplained` says when it is not, and reports show a log's owners only then.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tlview.analyze.missing import CAPTURE_SPAN
from tlview.analyze.vllm_records import read_by_vllm_view
from tlview.aside import Loose
from tlview.model import Compile, LogIndex, Phase
from tlview.runtime.store import CompileList, Marks, marks

OUTSIDE = "-/-"  # the key of a log's records without a compile id
# Records a process writes without a compile id by nature: no compile lacks them.
PROCESS_RECORDS = frozenset({"torch_version"})


def needs_owner(name: str) -> bool:
    """Whether a record of this name, without a compile id, is one a compile should own: not
    the process's own (`PROCESS_RECORDS`), nor one of vLLM's, which the vLLM part reads."""
    return name not in PROCESS_RECORDS and not read_by_vllm_view(name)


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

    @property
    def unowned(self) -> int:
        """Records that belong to no compile and should (`needs_owner`)."""
        return sum(k for g in self.groups for name, k in g.names.items() if needs_owner(name))

    @property
    def unexplained(self) -> bool:
        """Whether some records are unowned or of names tlview does not read: what makes a
        report show this log's owners (else they are all a compile's, torch's version or
        vLLM's)."""
        return bool(self.unowned or self.unknown)


def _short(f: object) -> str:
    return str(f).replace("\\", "/").rsplit("/", 1)[-1]


def log_marks(log: LogIndex) -> Sequence[Marks]:
    """Each compile's marks (where its own spans lie, its breaks, its code states), in order,
    without reading a compile back from disk."""
    cl = log.compiles
    return cl.marks if isinstance(cl, CompileList) else [marks(c) for c in cl]


def _bounds(marked: Iterable[Marks]) -> list[tuple[float, float, str]]:
    """Each compile's own spans (start, end, key), by start."""
    out = [(s, e, m.key) for m in marked if m.key != OUTSIDE for s, e in m.spans]
    out.sort()
    return out


def span_owners(spans: Sequence[Phase], marked: Iterable[Marks]) -> list[tuple[Phase, str]]:
    """The spans without an id that lie inside one compile's span (innermost when nested)."""
    bounds = _bounds(marked)
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


def _captures(outside: Compile | None, marked: Sequence[Marks]) -> dict[float, str]:
    """Each fullgraph_capture span (by its start) that traced exactly one compile: that one."""
    if outside is None:
        return {}
    starts = [(m.begins, m.key) for m in marked if m.key != OUTSIDE and m.begins is not None]
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
    marked = log_marks(log)
    outside = log.compiles[0] if marked and marked[0].key == OUTSIDE else None
    return owners_of(outside, marked, log.unknown_kinds)


def owners_of(outside: Compile | None, marked: Sequence[Marks], kinds: dict[str, int]) -> Owners:
    """Who the records of a log's `-/-` compile belong to, given every compile's marks and the
    record kinds tlview does not read (`kinds`)."""
    captures = _captures(outside, marked)
    attached: list[Attached] = []
    groups: dict[str, WriterGroup] = {}
    unknown: dict[str, int] = dict(kinds)
    for x in outside.loose if outside is not None else []:
        if x.writer is not None and not x.torch and not read_by_vllm_view(x.name):
            unknown[x.name] = unknown.get(x.name, 0) + x.count
        got = _owner(x, captures)
        if got is not None:
            attached.append(Attached(got[0], x.name, x.count, got[1]))
        else:
            _group(groups, x)
    spans = span_owners(outside.phases, marked) if outside is not None else []
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
