"""Collectives parity: each compile's collective schedule against the calls in its output code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tlview.analyze.rare import has_collectives
from tlview.index.digests import COLLECTIVE_SCHEDULE
from tlview.model import Compile

WAIT = "wait_tensor"
MAX_PROBLEMS = 8  # problems named per compile; the rest are counted


@dataclass(slots=True)
class Parity:
    """What a compile scheduled and what its output code calls, and where the two part."""

    schedule: list[str] = field(default_factory=list)  # ops, all schedules of the compile
    code: list[str] = field(default_factory=list)  # collective and wait calls, all output codes
    problems: list[str] = field(default_factory=list)

    @property
    def matched(self) -> bool:
        return not self.problems

    def text(self) -> str:
        """One line: that it matched, or what is wrong."""
        ops = [op for op in self.schedule if op != WAIT]
        if self.matched:
            return (
                f"{len(ops)} collective{'s' if len(ops) != 1 else ''} "
                f"({', '.join(ops[:6])}{', ...' if len(ops) > 6 else ''}), "
                "each waited on: the output code calls what the schedule says"
            )
        return "; ".join(self.problems)


def parity(c: Compile) -> Parity | None:
    """The parity of one compile, or None when it neither scheduled nor called a collective."""
    if not has_collectives(c):
        return None
    schedules = [p.meta or {} for p in c.artifacts if p.kind == COLLECTIVE_SCHEDULE]
    codes = [
        p.meta or {}
        for p in c.graphs
        if p.kind == "inductor_output_code" and (p.meta or {}).get("calls")
    ]
    out = Parity()
    for m in schedules:
        out.schedule += [str(x) for x in m.get("ops") or ()]
    for m in codes:
        out.code += [str(op) for op, _ in _calls(m)]
    out.problems = _problems(schedules, codes)
    return out


def _problems(schedules: list[dict[str, Any]], codes: list[dict[str, Any]]) -> list[str]:
    """Where each graph's schedule and output code part, at most MAX_PROBLEMS and a count."""
    out = []
    if len(schedules) != len(codes):
        out.append(
            f"{_n(len(schedules), 'collective schedule')}, "
            f"{_n(len(codes), 'output code')} calling collectives"
        )
    for k, (sched, code) in enumerate(zip(schedules, codes, strict=False)):
        where = f"graph {k + 1}: " if len(codes) > 1 else ""
        out += [where + p for p in _pair(sched, code)]
    if len(out) > MAX_PROBLEMS:
        out = out[:MAX_PROBLEMS] + [f"and {len(out) - MAX_PROBLEMS} more"]
    return out


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _calls(m: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(x[0]), str(x[1]))
        for x in m.get("collectives") or ()
        if isinstance(x, list) and len(x) == 2
    ]


def _pair(schedule: dict[str, Any], code: dict[str, Any]) -> list[str]:
    """What differs between one schedule and the output code it was made for."""
    sched = [str(x) for x in schedule.get("ops") or ()]
    calls = _calls(code)
    ops = [op for op, _ in calls]
    whole = len(sched) == schedule.get("collectives") and len(calls) == code.get("calls")
    return _order(sched, ops, whole) + _waits(calls, whole)  # whole: neither list was cut short


def _order(sched: list[str], ops: list[str], whole: bool) -> list[str]:
    """The first collective the two order differently, or the ones only one of them has."""
    for n, (a, b) in enumerate(zip(sched, ops, strict=False)):
        if a != b:
            return [f"collective {n + 1} is {a} in the schedule, {b} in the output code"]
    if not whole or len(sched) == len(ops):
        return []
    longer, name = (sched, "schedule") if len(sched) > len(ops) else (ops, "output code")
    k = min(len(sched), len(ops))
    extra = ", ".join(longer[k:][:4])
    return [
        f"the schedule has {_n(len(sched), 'collective')} and the output code "
        f"{len(ops)}: only the {name} has {extra} (from {k + 1})"
    ]


def _waits(calls: list[tuple[str, str]], whole: bool) -> list[str]:
    """Each collective's buffer is waited on later in the code; each wait is on a collective's."""
    problems = []
    pending: dict[str, tuple[int, str]] = {}
    for n, (op, buf) in enumerate(calls, 1):
        if op != WAIT:
            pending[buf] = (n, op)
        elif pending.pop(buf, None) is None and not _is_input(buf):
            problems.append(f"wait_tensor {n} ({buf}) waits on no collective")
    if whole:
        problems += [f"{op} {n} ({buf}) has no wait_tensor" for buf, (n, op) in pending.items()]
    return problems


def _is_input(buf: str) -> bool:
    """A graph's input: a collective started before this graph (by the caller or another graph)."""
    return buf.startswith(("arg", "primals_", "tangents_"))
