"""The `--fail-on` CI gate: limits on a run (report) or on how much worse NEW is than BASE (diff).

A check is `MEASURE` or `MEASURE:LIMIT`, several separated by commas:
- `N` (e.g. `graph-breaks:0`, `compile-time:60s`): the run (NEW for diff) may have at most N;
- `+N` or `+N%` (diff only): NEW may exceed BASE by at most N, or by N percent;
- no limit: `report` allows none (0); `diff` allows no more than BASE.
`phase:NAME` is the run's time in one compile phase: the spans torch named NAME (`inductor_compile`,
`backend_compile`, `code_gen`, ...; analyze/phases.py), else the metrics column torch times it in,
else one of tlview's metric times (`triton_compile`, `autotune`, ...); its limits are those of
compile-time (`Ns`, `+Ns`, `+N%`), and `report --baseline BASE` gives it a BASE.
Time increases smaller than the noise floor (diff.TIME_NOISE_S) never fail a relative check; an
absolute or `+Ns` limit is taken as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tlview.analyze.diff import TIME_NOISE_S, Diff, change_words
from tlview.analyze.phases import span_totals
from tlview.analyze.summary import Overview, overview
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.model import Compile, Report

MEASURES = (
    "graph-breaks",
    "recompiles",
    "failures",
    "compiles",
    "restarts",
    "compile-time",
    "input-changes",
)
PHASE = "phase"  # `phase:NAME`: a compile phase's time (the measure is `phase:NAME`)
TIMES = ("compile-time", PHASE)  # measures in seconds
_LIMIT = re.compile(r"(\+)?(\d+(?:\.\d+)?)(%|s)?")
_PHASE_NAME = re.compile(r"[\w.<>-]{1,200}")


@dataclass(frozen=True, slots=True)
class Check:
    """One parsed `--fail-on` item."""

    measure: str
    limit: float | None  # None: no limit given
    relative: bool = False  # "+N": over BASE
    percent: bool = False  # "+N%"
    text: str = ""  # as the user wrote it
    new: float | None = None  # `phase:NAME`: its seconds in the run (NEW), once measured
    base: float | None = None  # the figure in BASE (`report --baseline`), once measured

    @property
    def phase(self) -> str | None:
        """The phase a `phase:NAME` check measures (None for another measure)."""
        return self.measure.partition(":")[2] or None if self.measure.startswith(PHASE) else None


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
    if name == PHASE:
        phase, _, limit = limit.partition(":")
        if not _PHASE_NAME.fullmatch(phase.strip()):
            raise TlviewError(
                f"--fail-on {item!r}: name the phase, e.g. phase:inductor_compile:+20%",
                EXIT_USAGE,
            )
        name = f"{PHASE}:{phase.strip()}"
    elif name not in MEASURES:
        raise TlviewError(
            f"--fail-on {item!r}: unknown measure {name!r}; use one of "
            f"{', '.join(MEASURES)}, {PHASE}:NAME",
            EXIT_USAGE,
        )
    if name == "input-changes" and not against_base:
        raise TlviewError(
            f"--fail-on {item!r}: input changes are between two runs; use `tlview diff BASE NEW`",
            EXIT_USAGE,
        )
    if not limit.strip():
        if _kind(name) in TIMES and not against_base:
            raise TlviewError(
                f"--fail-on {item!r}: give a limit in seconds, e.g. {name}:60s", EXIT_USAGE
            )
        return Check(name, None, text=item)
    return _limited(item, name, limit.strip(), against_base)


def _kind(measure: str) -> str:
    """A measure's kind: `phase` for every `phase:NAME`, else the measure itself."""
    return PHASE if measure.startswith(f"{PHASE}:") else measure


def _limited(item: str, name: str, limit: str, against_base: bool) -> Check:
    """A check with a limit, the limit read and checked against what the measure takes."""
    m = _LIMIT.fullmatch(limit)
    if not m:
        raise TlviewError(
            f"--fail-on {item!r}: the limit must be N, +N or +N% (times: Ns, +Ns or +N%)",
            EXIT_USAGE,
        )
    plus, number, unit = m.groups()
    if unit == "s" and _kind(name) not in TIMES:
        raise TlviewError(
            f"--fail-on {item!r}: only compile-time takes seconds (and {PHASE}:NAME)", EXIT_USAGE
        )
    if unit == "%" and name == "input-changes":
        raise TlviewError(f"--fail-on {item!r}: input-changes takes a count", EXIT_USAGE)
    if unit == "%" and not plus:
        raise TlviewError(f"--fail-on {item!r}: a percentage is over BASE: write +N%", EXIT_USAGE)
    if plus and not against_base:
        raise TlviewError(
            f"--fail-on {item!r}: a +limit is relative to BASE; use `tlview diff BASE NEW` "
            "or `tlview report --baseline BASE`",
            EXIT_USAGE,
        )
    return Check(name, float(number), bool(plus), unit == "%", item)


def measure(
    checks: Sequence[Check], new: Iterable[Compile], base: Report | None = None
) -> list[Check]:
    """The checks with what they need that an overview lacks: each `phase:NAME`'s time in the
    run (one pass over its compiles, none when no check names a phase), and with `base` (`report
    --baseline`) every check's figure in BASE, so any renderer's evaluate_report has them."""
    names = [c.phase for c in checks if c.phase is not None]
    got = span_totals(new, names) if names else {}
    if base is None:
        return [_measured(c, got) for c in checks]
    was = span_totals(base.attempts, names) if names else {}
    o = overview(base)
    return [
        replace(_measured(c, got), base=was.get(c.phase, 0.0))
        if c.phase is not None
        else replace(c, base=value(o, c.measure))
        for c in checks
    ]


def _measured(c: Check, got: dict[str, float]) -> Check:
    return replace(c, new=got.get(c.phase, 0.0)) if c.phase is not None else c


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


def _value(o: Overview, c: Check) -> float:
    """A check's figure in the run: a phase's measured time, else the overview's."""
    if c.phase is None:
        return value(o, c.measure)
    if c.new is None:
        raise ValueError(f"{c.measure} was not measured (gate.measure)")
    return c.new


def _show(measure: str, v: float) -> str:
    return f"{v:.2f} s" if _kind(measure) in TIMES else str(int(v))


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
    """Every check on one run, passed or failed, in the order given; a check measured against
    a baseline (`measure`) is over it, as in `diff`, when it is +N, +N% or bare."""
    out = []
    for c in checks:
        if c.base is not None and (c.relative or c.limit is None):
            out.append(_relative(c, c.base, _value(o, c)))
            continue
        v = _value(o, c)
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
        return _input_changes(d, c)
    if c.phase is not None:
        f = d.spans.get(c.phase)
        b, n = (f.base or 0.0, f.new or 0.0) if f is not None else (0.0, 0.0)
    else:
        b, n = value(d.base, c.measure), value(d.new, c.measure)
    return _relative(c, b, n)


def _input_changes(d: Diff, c: Check) -> Verdict:
    inputs = [x for x in d.changes if x.kind == "input"]
    figures = f"{len(inputs)} input change(s) in matched compiles (limit {int(c.limit or 0)})"
    if len(inputs) > (c.limit or 0):
        first = inputs[0]
        why = f"input-changes: {figures}, first: {first.frame}: {change_words(first)}"
        return Verdict(c, figures, why)
    return Verdict(c, figures, None)


def _relative(c: Check, b: float, n: float) -> Verdict:
    """A check of NEW's figure `n` against BASE's `b`: an absolute limit, +N, +N% or no more."""
    was = f"{_show(c.measure, b)} -> {_show(c.measure, n)}"
    if c.limit is not None and not c.relative:
        figures = f"{was} (limit {_show(c.measure, c.limit)})"
        return Verdict(c, figures, f"{c.measure}: {figures}" if n > c.limit else None)
    allowed, why = _allowed(c, b)
    figures = f"{was} ({why})"
    return Verdict(c, figures, f"{c.measure}: {figures}" if n - b > allowed else None)


def _allowed(c: Check, b: float) -> tuple[float, str]:
    """How much more than BASE's `b` a +N, +N% or bare check allows, and that in words. A time
    is allowed the noise floor (diff.TIME_NOISE_S) unless the limit is +Ns."""
    allowed = 0.0 if c.limit is None else (b * c.limit / 100 if c.percent else c.limit)
    timed = _kind(c.measure) in TIMES
    if timed and (c.limit is None or c.percent):
        allowed = max(allowed, TIME_NOISE_S - 1e-9)
    if c.limit is None:
        noise = f", {TIME_NOISE_S:g} s noise allowed" if timed else ""
        return allowed, f"no more than BASE{noise}"
    extra = f"+{c.limit:g}%" if c.percent else f"+{_show(c.measure, allowed)}"
    return allowed, f"allowed {extra}"
