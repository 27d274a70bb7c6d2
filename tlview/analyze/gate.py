"""The `--fail-on` CI gate: limits on a run (report) or on how much worse NEW is than BASE (diff).

A check is `MEASURE` or `MEASURE:LIMIT`, several separated by commas:
- `N` (e.g. `graph-breaks:0`, `compile-time:60s`): the run (NEW for diff) may have at most N;
- `+N` or `+N%` (diff only): NEW may exceed BASE by at most N, or by N percent;
- no limit: `report` allows none (0); `diff` allows no more than BASE.
Compile-time increases smaller than the noise floor (diff.TIME_NOISE_S) never fail a relative
check; an absolute or `+Ns` limit is taken as given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tlview.analyze.diff import TIME_NOISE_S, Diff, change_words
from tlview.analyze.summary import Overview
from tlview.errors import EXIT_USAGE, TlviewError

MEASURES = (
    "graph-breaks",
    "recompiles",
    "failures",
    "compiles",
    "restarts",
    "compile-time",
    "input-changes",
)
_LIMIT = re.compile(r"(\+)?(\d+(?:\.\d+)?)(%|s)?")


@dataclass(frozen=True, slots=True)
class Check:
    """One parsed `--fail-on` item."""

    measure: str
    limit: float | None  # None: no limit given
    relative: bool = False  # "+N": over BASE
    percent: bool = False  # "+N%"
    text: str = ""  # as the user wrote it


def parse_checks(specs: tuple[str, ...] | list[str], against_base: bool) -> list[Check]:
    """Read every `--fail-on` value; a bad one is a usage error naming it."""
    out: list[Check] = []
    for spec in specs:
        for item in spec.split(","):
            item = item.strip()
            if item:
                out.append(_one(item, against_base))
    return out


def _one(item: str, against_base: bool) -> Check:
    name, _, limit = item.partition(":")
    name = name.strip().lower()
    if name not in MEASURES:
        raise TlviewError(
            f"--fail-on {item!r}: unknown measure {name!r}; use one of {', '.join(MEASURES)}",
            EXIT_USAGE,
        )
    if name == "input-changes" and not against_base:
        raise TlviewError(
            f"--fail-on {item!r}: input changes are between two runs; use `tlview diff BASE NEW`",
            EXIT_USAGE,
        )
    if not limit.strip():
        if name == "compile-time" and not against_base:
            raise TlviewError(
                f"--fail-on {item!r}: give a limit in seconds, e.g. compile-time:60s", EXIT_USAGE
            )
        return Check(name, None, text=item)
    m = _LIMIT.fullmatch(limit.strip())
    if not m:
        raise TlviewError(
            f"--fail-on {item!r}: the limit must be N, +N or +N% (compile-time: Ns, +Ns or +N%)",
            EXIT_USAGE,
        )
    plus, number, unit = m.groups()
    if unit == "s" and name != "compile-time":
        raise TlviewError(f"--fail-on {item!r}: only compile-time takes seconds", EXIT_USAGE)
    if unit == "%" and name == "input-changes":
        raise TlviewError(f"--fail-on {item!r}: input-changes takes a count", EXIT_USAGE)
    if unit == "%" and not plus:
        raise TlviewError(f"--fail-on {item!r}: a percentage is over BASE: write +N%", EXIT_USAGE)
    if plus and not against_base:
        raise TlviewError(
            f"--fail-on {item!r}: a +limit is relative to BASE; use `tlview diff BASE NEW`",
            EXIT_USAGE,
        )
    return Check(name, float(number), bool(plus), unit == "%", item)


def value(o: Overview, measure: str) -> float:
    """A run's figure for one measure: failures count compiles that never finished, and with
    compile time, the compiles outside dynamo (AOTInductor, export), whose failure or hour of
    compiling a CI gate is there to catch as much as a frame's."""
    return {
        "graph-breaks": o.graph_breaks,
        "recompiles": o.recompiles,
        "failures": o.failures + o.incomplete + o.outside_failed,
        "compiles": o.compiles,
        "restarts": o.restarts,
        "compile-time": o.compile_time_s + o.outside_s,
    }[measure]


def _show(measure: str, v: float) -> str:
    return f"{v:.2f} s" if measure == "compile-time" else str(int(v))


@dataclass(frozen=True, slots=True)
class Verdict:
    """One check evaluated: its figures in words, and why it failed (None: it passed)."""

    check: Check
    figures: str  # "2 (limit 0)", "3 -> 5 (no more than BASE)"
    failure: str | None  # the line `--fail-on` prints, e.g. "graph-breaks: 2 (limit 0)"

    @property
    def name(self) -> str:
        """The check as the user wrote it (its measure when written bare)."""
        return self.check.text or self.check.measure


def evaluate_report(o: Overview, checks: Sequence[Check]) -> list[Verdict]:
    """Every check on one run, passed or failed, in the order given."""
    out = []
    for c in checks:
        v = value(o, c.measure)
        limit = 0.0 if c.limit is None else c.limit
        figures = f"{_show(c.measure, v)} (limit {_show(c.measure, limit)})"
        out.append(Verdict(c, figures, f"{c.measure}: {figures}" if v > limit else None))
    return out


def check_report(o: Overview, checks: Sequence[Check]) -> list[str]:
    """One line per check the run fails."""
    return [v.failure for v in evaluate_report(o, checks) if v.failure is not None]


def evaluate_diff(d: Diff, checks: Sequence[Check]) -> list[Verdict]:
    """Every check of NEW against BASE, passed or failed, in the order given."""
    return [_diff_verdict(d, c) for c in checks]


def check_diff(d: Diff, checks: Sequence[Check]) -> list[str]:
    """One line per check NEW fails against BASE."""
    return [v.failure for v in evaluate_diff(d, checks) if v.failure is not None]


def _diff_verdict(d: Diff, c: Check) -> Verdict:
    if c.measure == "input-changes":
        inputs = [x for x in d.changes if x.kind == "input"]
        figures = f"{len(inputs)} input change(s) in matched compiles (limit {int(c.limit or 0)})"
        if len(inputs) > (c.limit or 0):
            first = inputs[0]
            why = f"input-changes: {figures}, first: {first.frame}: {change_words(first)}"
            return Verdict(c, figures, why)
        return Verdict(c, figures, None)
    b, n = value(d.base, c.measure), value(d.new, c.measure)
    was = f"{_show(c.measure, b)} -> {_show(c.measure, n)}"
    if c.limit is not None and not c.relative:
        figures = f"{was} (limit {_show(c.measure, c.limit)})"
        return Verdict(c, figures, f"{c.measure}: {figures}" if n > c.limit else None)
    allowed = 0.0 if c.limit is None else (b * c.limit / 100 if c.percent else c.limit)
    if c.measure == "compile-time" and (c.limit is None or c.percent):
        allowed = max(allowed, TIME_NOISE_S - 1e-9)
    extra = f"+{c.limit:g}%" if c.percent else f"+{_show(c.measure, allowed)}"
    why = "no more than BASE" if c.limit is None else f"allowed {extra}"
    if c.measure == "compile-time" and c.limit is None:
        why = f"no more than BASE, {TIME_NOISE_S:g} s noise allowed"
    figures = f"{was} ({why})"
    return Verdict(c, figures, f"{c.measure}: {figures}" if n - b > allowed else None)
