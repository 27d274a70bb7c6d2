"""Figures over a whole report, computed once and shared by every renderer."""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

from tlview.analyze.compiles import PHASE_NAMES, Analysis, Break, analysed, is_recompile
from tlview.analyze.names import Refs
from tlview.analyze.runfacts import FactTally, RunFacts
from tlview.analyze.vllm_records import Gather, LogRef
from tlview.counting import counts_as_compile
from tlview.model import (
    Input,
    Report,
)

if TYPE_CHECKING:
    from tlview.analyze.vllm import VllmReport

MAX_BREAK_COMPILES = 50  # compile keys listed per graph-break reason
MAX_SLOWEST = 5  # compiles listed as the slowest


@dataclass(slots=True)
class BreakSummary:
    """One graph-break reason over a whole log or job, with where and how often it happened."""

    reason: str
    count: int = 0
    where: dict[str, int] = field(default_factory=dict)  # "file:line" -> count
    compiles: list[str] = field(default_factory=list)  # "log#compile" keys, first few
    # Of its first: the line naming it, what torch says it is about, its hints, debug context.
    title: str = ""
    explanation: str | None = None
    hints: tuple[str, ...] = ()
    context: str | None = None


@dataclass(slots=True)
class Slow:
    """One of the slowest compiles: its name and its time by phase (seconds)."""

    ref: str
    function: str | None
    phases: dict[str, float]


@dataclass(slots=True)
class Overview:
    """The headline numbers of a report: what a reader wants before any detail."""

    logs: int = 0
    lines: int = 0
    records: int = 0
    bad_lines: int = 0
    compiles: int = 0  # as torch counts them: no attempt that restarted, no graph export traced
    by_status: dict[str, int] = field(default_factory=dict)
    graph_breaks: int = 0
    recompiles: int = 0
    failures: int = 0
    restarts: int = 0
    incomplete: int = 0
    compile_time_s: float = 0.0
    cache: dict[str, int] = field(default_factory=dict)  # hit / miss / bypass
    inputs: int = 0
    export_issues: int = 0
    outside: int = 0  # compiles outside any compile id (AOTInductor, export): `OutsideCompile`
    outside_s: float = 0.0  # their time, of those that logged one
    outside_timed: bool = False
    outside_failed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    first_time: str | None = None
    last_time: str | None = None
    breaks: list[BreakSummary] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # PHASE_NAMES -> seconds, summed
    slowest: list[Slow] = field(default_factory=list)  # by total time, at most MAX_SLOWEST
    facts: RunFacts = field(default_factory=RunFacts)  # phases, CUDA graphs, owners (facts.py)
    vllm: VllmReport | None = None  # vLLM's compile calls, when it wrote records

    @property
    def timed(self) -> bool:
        """Whether the compile time says something: some compile logged one, or none ran
        (torch logs none for a compile that never finished, and some builds none at all)."""
        return "total" in self.phases or not (self.compiles or self.by_status.get("traced"))


def short(path: str | None) -> str:
    """The file name of a path, the part that survives a move to another checkout."""
    if not path:
        return ""
    return PurePath(path.replace("\\", "/")).name


def short_place(where: str) -> str:
    """A place `FILE:LINE` by its file's name (`f.py:12`), as in `short`."""
    file, _, line = where.rpartition(":")
    return f"{short(file)}:{line}" if file else where


LABEL_FILE = 100


def frame_label(function: str, file: str | None, line: int | None) -> str:
    """A frame by its function and place, `f (f.py:12)`, the same in every run and rank (a file
    name over LABEL_FILE characters by its start and end: a label is written once per frame)."""
    name = short(file)
    if len(name) > LABEL_FILE:
        name = f"{name[:24]}...{name[-(LABEL_FILE - 27) :]}"
    where = name + (f":{line}" if line is not None else "")
    return f"{function} ({where})" if where else function


class Tally:
    """Builds an Overview one compile at a time, so a renderer needs one pass over the compiles."""

    def __init__(self, report: Report) -> None:
        o = self.o = Overview(logs=len(report.logs))
        self.vllm = Gather()
        self.vllm_logs = [LogRef.of(log) for log in report.logs]
        self.refs = Refs.of(report)
        self.cache: Counter[str] = Counter()
        self.status: Counter[str] = Counter()
        self.breaks: dict[str, BreakSummary] = {}
        # Each phase's times (the compile time is "total"), added up in order at the end,
        # however the pass was split.
        self.phases: dict[str, list[float]] = {}
        self.slow: list[tuple[float, str, Slow]] = []  # min-heap of the slowest, by (total, ref)
        self.facts = FactTally()
        kinds: Counter[str] = Counter()
        unknown: Counter[str] = Counter()
        times = [log.first_time for log in report.logs if log.first_time]
        ends = [log.last_time for log in report.logs if log.last_time]
        o.first_time = min(times) if times else None
        o.last_time = max(ends) if ends else None
        for log in report.logs:
            o.lines += log.lines
            o.records += log.records
            o.bad_lines += log.bad_count
            kinds.update(log.kinds)
            unknown.update(log.unknown_kinds)
        o.kinds = dict(kinds.most_common())
        o.unknown_kinds = dict(unknown.most_common())

    def add(self, a: Analysis) -> None:
        c = a.compile
        o = self.o
        self.facts.add(a)
        self.vllm.add(c)
        o.export_issues += len(c.export_issues)
        if c.id is None:
            self._outside(a)
            return
        self.cache.update(ev.outcome for ev in c.cache)
        if not a.counted:  # an attempt that restarted: the compile after it counts
            o.restarts += 1
        else:
            self._compile(a)

    def _outside(self, a: Analysis) -> None:
        """The records outside any compile: the compiles outside dynamo, added up."""
        c, o = a.compile, self.o
        o.inputs += len(c.inputs)
        o.outside += len(c.outside)
        o.outside_failed += sum(x.fail_type is not None for x in c.outside)
        if (took := c.compile_time_s) is not None:
            o.outside_s += took
            o.outside_timed = True

    def _compile(self, a: Analysis) -> None:
        c, o = a.compile, self.o
        o.compiles += counts_as_compile(c)
        self.status[c.status] += 1
        o.inputs += sum(1 for i in c.inputs if not i.superseded)
        o.recompiles += is_recompile(c)
        times = a.times
        for name, v in times.items():
            self.phases.setdefault(name, []).append(v)
        if times.get("total"):
            self._slow((times["total"], a.ref, Slow(a.ref, c.function, times)))
        for b in a.breaks:
            self._break(b, a.ref)

    def _break(self, b: Break, ref: str) -> None:
        """One graph break, under the breaks that are the same (summary.break_key)."""
        self.o.graph_breaks += 1
        s = self.breaks.get(b.key)
        if s is None:
            s = self.breaks[b.key] = BreakSummary(
                b.reason, title=b.title, explanation=b.explanation, hints=b.hints,
                context=b.context,
            )  # fmt: skip
        s.count += 1
        if b.where:
            s.where[b.where] = s.where.get(b.where, 0) + 1
        if len(s.compiles) < MAX_BREAK_COMPILES and ref not in s.compiles:
            s.compiles.append(ref)

    def _slow(self, item: tuple[float, str, Slow]) -> None:
        if len(self.slow) < MAX_SLOWEST:
            heapq.heappush(self.slow, item)
        elif item[:2] > self.slow[0][:2]:
            heapq.heapreplace(self.slow, item)

    def merge(self, later: Tally) -> None:
        """Take in a tally of the compiles after these (rendered by another process), as if
        this one had gone on to count them."""
        o, lo = self.o, later.o
        self.facts.merge(later.facts)
        self.vllm.merge(later.vllm)
        o.compiles += lo.compiles
        o.restarts += lo.restarts
        o.inputs += lo.inputs
        o.recompiles += lo.recompiles
        o.graph_breaks += lo.graph_breaks
        o.export_issues += lo.export_issues
        o.outside += lo.outside
        o.outside_s += lo.outside_s
        o.outside_timed |= lo.outside_timed
        o.outside_failed += lo.outside_failed
        for name, vs in later.phases.items():
            self.phases.setdefault(name, []).extend(vs)
        for item in later.slow:
            self._slow(item)
        self.status.update(later.status)
        self.cache.update(later.cache)
        for reason, b in later.breaks.items():
            s = self.breaks.get(reason)
            if s is None:
                self.breaks[reason] = b
                continue
            s.count += b.count
            for w, n in b.where.items():
                s.where[w] = s.where.get(w, 0) + n
            for ref in b.compiles:  # b holds the first MAX_BREAK_COMPILES: enough to fill s
                if len(s.compiles) < MAX_BREAK_COMPILES and ref not in s.compiles:
                    s.compiles.append(ref)

    def done(self) -> Overview:
        o = self.o
        o.phases = {name: sum(self.phases[name]) for name in PHASE_NAMES if name in self.phases}
        o.compile_time_s = o.phases.get("total", 0.0)
        o.slowest = [s for _, _, s in sorted(self.slow, key=lambda e: (-e[0], e[1]))]
        o.by_status = dict(self.status)
        o.failures = self.status.get("failed", 0)
        o.incomplete = self.status.get("incomplete", 0)
        o.cache = dict(self.cache)
        o.breaks = sorted(self.breaks.values(), key=lambda s: -s.count)
        o.facts = self.facts.done()
        o.vllm = self._vllm()
        return o

    def _vllm(self) -> VllmReport | None:
        """vLLM's calls, log by log; analyze/vllm.py is imported only when some log holds
        vLLM's records (its classes cost every other report's start-up)."""
        if not self.vllm.logs:
            return None
        from tlview.analyze.vllm import vllm_report

        return vllm_report(self.vllm, self.vllm_logs, self.refs)


def overview(report: Report) -> Overview:
    tally = Tally(report)
    for a in analysed(report):
        tally.add(a)
    return tally.done()


def input_names(inputs: list[Input]) -> dict[tuple[int, int], str]:
    """Each input's source by (describer, tensor id): a view's flag names its base by it."""
    return {(i.describer, i.tensor.id): i.source for i in inputs}


def input_flags(i: Input, names: Mapping[tuple[int, int], str]) -> str:
    """What sets an input apart, in a few words: param, grad, non-leaf, view, subclass, ...
    A view names its base by `names` (`input_names` of its compile), or says it is none."""
    f = i.tensor.fields  # read directly: the page asks this of every input it shows
    out = [word for key, word in _FLAG_WORDS if f.get(key)]
    if not f.get("is_leaf") and f:
        out.append("non-leaf")
    if f.get("is_view"):
        out.append(_view_of(i, names))
    if i.grad is not None:
        out.append(".grad")
    out += _type_words(i)
    layout = f.get("layout", "torch.strided")
    if layout != "torch.strided":
        out.append(str(layout).replace("torch.", ""))
    if not _RARE_FLAGS.isdisjoint(f):
        out += [name.removeprefix("is_") for name in _RARE_FLAGS_ORDER if f.get(name)]
    if i.superseded:
        out.append("superseded")
    return " ".join(out)


_FLAG_WORDS = (("is_parameter", "param"), ("requires_grad", "grad"))


def _view_of(i: Input, names: Mapping[tuple[int, int], str]) -> str:
    """What a view is a view of: an input by its source, its own inner tensor, or neither."""
    base = i.base.id if i.base is not None else i.tensor.base
    if base is None:
        return "view"
    named = names.get((i.describer, base))
    inner = next((n for n, d in i.inner.items() if d.id == base), None)
    if named:
        return f"view of {named}"
    if inner is not None:  # a jagged tensor is a view of its own ._values
        return f"view of its .{inner}"
    # no source: a base the graph does not take, or one torch logged no source for
    return f"view of tensor {base} (no source names it)"


def _type_words(i: Input) -> list[str]:
    """A subclass's short type name, and a DTensor's layout over its mesh."""
    t = i.tensor
    if "type" not in t.fields or not t.type_name:
        return []
    out = [t.type_name.rsplit(".", 1)[-1]]
    if t.type_name.endswith(".DTensor"):
        out += _dtensor_layout(t.fields)
    return out


_RARE_FLAGS_ORDER = ("is_conj", "is_neg", "is_inference", "is_functional", "is_nested")
_RARE_FLAGS = frozenset(_RARE_FLAGS_ORDER)


_MESH = re.compile(r"^DeviceMesh\((\([^)]*\))")


def _dtensor_layout(f: Mapping[str, object]) -> list[str]:
    """How a DTensor lies over its mesh, from the repr torch logs of it: its placements (its
    `ctx`) and its mesh's shape (`opaque_attrs`), e.g. ["Shard(dim=0)", "on mesh (2,)"]."""
    out = []
    ctx = f.get("ctx")
    placements = _first_tuple(ctx) if isinstance(ctx, str) and ctx.startswith("((") else None
    if placements:
        out.append(placements)
    attrs = f.get("opaque_attrs")
    mesh = attrs.get("device_mesh") if isinstance(attrs, dict) else None
    m = _MESH.match(mesh) if isinstance(mesh, str) else None
    if m:
        out.append(f"on mesh {m.group(1)}")
    return out


def _first_tuple(text: str) -> str | None:
    """What the tuple that opens at text[1] holds: `((Shard(dim=0),), ...` -> `Shard(dim=0)`."""
    depth = 0
    for i in range(1, min(len(text), 2000)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[2:i].rstrip(", ") or None
    return None
