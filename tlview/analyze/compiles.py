"""What each compile means, worked out once: every renderer formats an `Analysis`, none works
out a status, a reason or a stack of its own, so text, JSON, page and Markdown say the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from tlview.analyze.breaks import (
    break_callers,
    break_context,
    break_explanation,
    break_hints,
    break_key,
    break_title,
)
from tlview.analyze.changes import change_text
from tlview.analyze.context import LogContext, log_context
from tlview.analyze.facts import missing_of, origins_of, phases_of
from tlview.analyze.kernels import kernels
from tlview.analyze.missing import Missing, said
from tlview.analyze.names import Refs
from tlview.analyze.origins import Origin
from tlview.analyze.phases import CompilePhases
from tlview.analyze.rare import (
    has_collectives,
    has_subgraphs,
    may_have_bytecode,
    may_have_passes,
)
from tlview.analyze.runtime import CudaGraphs, RunWork, cudagraphs, runtime_work
from tlview.analyze.troubles import TroubleLine, failure_line, troubles
from tlview.index.core import is_torch_file
from tlview.index.recompiles import limit_text
from tlview.model import (
    PHASES,
    Compile,
    CompileId,
    GraphBreak,
    Kernel,
    Report,
    StackFrame,
    Status,
    seconds_of,
    severity,
)
from tlview.units import short_path

if TYPE_CHECKING:  # imported for a compile that has what they read (rare.py)
    from tlview.analyze.bytecode import BytecodePair
    from tlview.analyze.collectives import Parity
    from tlview.analyze.passes import PassStage
    from tlview.analyze.subgraphs import SubgraphGroup

REASON_LINES = 4  # lines of a failure's reason in a table; a compile shown alone shows all
MAX_CHANGES = 8  # input changes a recompile's row lists (then "... N more")
MAX_GUARDS = 5  # failed guards a recompile's row lists


# A compile's phases (model.PHASES); "backward" adds up the inductor time of its backward
# graphs (`bwd_compilation_metrics`).
PHASE_NAMES = (*(name for name, _ in PHASES), "backward")


def phase_times(c: Compile) -> dict[str, float]:
    """A compile's time by phase (PHASE_NAMES), for the phases its metrics give."""
    out: dict[str, float] = {}
    m = c.metrics or {}
    for name, metric in PHASES:
        v = seconds_of(m, metric)
        if v is not None:
            out[name] = v
    for bm in c.bwd_metrics:
        v = seconds_of(bm, "inductor_compile_time_s")
        if v is not None:
            out["backward"] = out.get("backward", 0.0) + v
    return out


def is_recompile(c: Compile) -> bool:
    """A compile of a frame after its first, because guards failed: not a restart, and not a
    retry of a compile that failed (nothing was cached, so no guard could fail)."""
    return (
        c.id is not None and bool(c.id.frame_compile) and c.status != "restarted" and not c.is_retry
    )


def stopped_in(c: Compile) -> str:
    """For a compile that never finished: `, in NAME`, the innermost phase that began and never
    ended (where the process stopped), or "" when its log has no such phase."""
    open_ = [p for p in c.phases if p.dur_us is None]
    if not open_:
        return ""
    last = max(open_, key=lambda p: (p.depth, p.start_us))
    return f", in {last.name}"


def is_library(file: str) -> bool:
    """A frame of torch's own code, which stacks dim or leave out: the one rule of every format
    (installed packages such as transformers are not torch: a user debugs through them)."""
    return is_torch_file(file)


class Frame(NamedTuple):
    """A stack frame as every format shows it: the frame, and whether it is torch's own."""

    frame: StackFrame
    lib: bool


class Break(NamedTuple):
    """One graph break in words: the line naming it, what torch says it is about, its hints,
    its debug context and the user calls that led to it."""

    where: str | None  # "file:line" in the user's code
    line: int  # log line of its record
    title: str
    explanation: str | None
    hints: tuple[str, ...]
    context: str | None
    callers: tuple[StackFrame, ...]  # from the compiled function on, outside torch; () if direct
    key: str  # what makes two breaks the same (summary.break_key)
    reason: str  # as torch worded it
    text: str  # the whole logged message
    attempt: str | None = None  # the key of the attempt that logged it, when one that restarted


class Restart(NamedTuple):
    """A restart of the compile's analysis, in words (a restart that is no graph break, such as
    `TensorifyScalarRestartAnalysis`, said as what it did)."""

    text: str
    reason: str  # as torch logged it
    before: str | None  # the attempt that restarted, when it is not this one (`0/0`)


class Failure(NamedTuple):
    """Why a compile failed or never finished, in words."""

    type: str | None
    reason: str  # the whole reason, stripped ("" when torch gave none)
    where: str | None
    lines: tuple[str, ...]  # the reason's first REASON_LINES lines, and how to see the rest
    first: str  # its first line, or what an unfinished compile says instead


class RecompileFacts(NamedTuple):
    """Why a frame compiled again, in words: its failed guards and what changed in its inputs."""

    previous: str | None
    guards: tuple[str, ...]  # the guards that failed, as torch logged them
    changes: tuple[str, ...]  # each input change in words (change_text)
    compared: bool  # both compiles described their inputs, so `changes` is whole
    limit: str | None  # `recompile_limit (8)` when dynamo gave up on the frame here
    listed: bool  # a recompile the report lists (not a retry after a failure)

    def changed(self, most: int = MAX_CHANGES) -> list[str]:
        """What changed, for a row: at most `most`, or why nothing is listed."""
        out = list(self.changes[:most])
        if len(self.changes) > most:
            out.append(f"... {len(self.changes) - most} more")
        if not out:
            out.append(
                f"no tensor input changed since {self.previous}"
                if self.compared
                else "inputs not logged"
            )
        return out


class Analysis:
    """One compile as every format shows it, worked out when first asked for: a pass that only
    counts pays for what it counts.

    A compile is what torch counts as one (a `compilation_metrics` record, or a failure): its
    last attempt. The attempts before it that restarted (`0/0` before `0/0_1`) are analysed
    too, apart (`counted` False), and handed to it as `earlier`: their graph breaks are its."""

    def __init__(self, c: Compile, ref: str, n: int = 0, at: tuple[int, int] = (0, 0)) -> None:
        self.compile = c
        self.ref = ref  # how the report names it (analyze.names.Refs)
        self.n = n  # its place among the report's attempts
        self.at = at  # (its log's place in the report, its place in that log)
        self.status: Status = c.status
        # A compile or a graph export traced, not the records outside any compile, nor an
        # attempt that restarted (the attempt after it is the compile, and has its row).
        self.counted = c.id is not None and c.status != "restarted"
        self.earlier: list[Analysis] = []  # the attempts of this compile that restarted
        self.context: LogContext | None = None  # what its log's other compiles tell it

    @cached_property
    def severity(self) -> int:
        return severity(self.status)

    @cached_property
    def where(self) -> str:
        c = self.compile
        return f"{short_path(c.file)}:{c.source_line}" if c.file else ""

    @cached_property
    def inputs(self) -> int:
        return len(self.compile.inputs)

    @cached_property
    def alias_groups(self) -> int:
        return len({i.alias_group for i in self.compile.inputs if i.alias_group})

    @cached_property
    def breaks(self) -> list[Break]:
        """Its graph breaks, those its restarted attempts found first."""
        own = [_break(g, self.compile) for g in self.compile.graph_breaks]
        found = [b._replace(attempt=a.compile.key) for a in self.earlier for b in a.breaks]
        return found + own

    @cached_property
    def restarts(self) -> list[Restart]:
        return _restarts(self.compile, self.ref)

    @cached_property
    def failure(self) -> Failure | None:
        return _failure(self.compile, self.ref)

    @cached_property
    def recompile(self) -> RecompileFacts | None:
        return _recompile(self.compile)

    @cached_property
    def listed_recompile(self) -> bool:
        return _listed_recompile(self.compile)

    @cached_property
    def listed_reasons(self) -> list[str]:
        return self.compile.recompile_reasons if self.listed_recompile else []

    @cached_property
    def problem(self) -> int:
        return _problem_order(self.compile)

    @cached_property
    def reason(self) -> str:
        return _reason(self)

    @property
    def status_text(self) -> str:
        """The status, with the failure's type and the restarts before it: `failed
        (BackendCompilerFailed)`, `graph_break, 1 restart`."""
        c = self.compile
        n = len(self.earlier)
        restarts = f", {n} restart{'s' if n != 1 else ''}" if n else ""
        return c.status + (f" ({c.fail_type})" if c.fail_type else "") + restarts

    @property
    def inputs_text(self) -> str:
        """How many inputs, and in how many alias groups: `3 (1 alias group)`."""
        g = self.alias_groups
        return f"{self.inputs}" + (f" ({g} alias group{'s' if g > 1 else ''})" if g else "")

    @cached_property
    def stack(self) -> list[Frame]:
        return [Frame(f, is_library(f.file)) for f in self.compile.stack]

    def user_stack(self, most: int | None = 3) -> tuple[list[StackFrame], int]:
        """The frames outside torch, innermost last: with `most`, the outermost (the user's
        script, when a library made the call) and the innermost others; and how many are left
        out between them."""
        user = [f.frame for f in self.stack if not f.lib]
        if most is None or len(user) <= most:
            return user, 0
        return [user[0], *user[-(most - 1) :]], len(user) - most

    @cached_property
    def times(self) -> dict[str, float]:
        """Its compile time by phase (summary.PHASE_NAMES), for the phases its metrics give."""
        c = self.compile
        return phase_times(c) if c.metrics is not None or c.bwd_metrics else {}

    @cached_property
    def kernels(self) -> list[Kernel]:
        return kernels(self.compile)

    @cached_property
    def parity(self) -> Parity | None:
        if not has_collectives(self.compile):
            return None
        from tlview.analyze.collectives import parity

        return parity(self.compile)

    # Where its time went, its run-time work, CUDA graphs, guard origins, what it lacks and
    # its failure artifacts (analyze/facts.py).
    @cached_property
    def phases(self) -> CompilePhases:
        return phases_of(self.compile, self.context, [e.compile for e in self.earlier])

    @cached_property
    def runtime(self) -> list[RunWork]:
        return runtime_work(self.compile)

    @cached_property
    def cudagraphs(self) -> CudaGraphs:
        return cudagraphs(self.compile)

    @cached_property
    def origins(self) -> list[Origin]:
        return origins_of(self.compile, self.context)

    @cached_property
    def missing(self) -> list[Missing]:
        return missing_of(self.compile, self.context)

    @property
    def missing_line(self) -> str | None:
        return said(self.missing)

    @cached_property
    def troubles(self) -> list[TroubleLine]:
        return troubles(self.compile)

    @cached_property
    def failure_line(self) -> str | None:
        return failure_line(self.compile)

    @property
    def took(self) -> tuple[float | None, bool]:
        """Its compile time, and whether only its spans give it: a compile whose
        compilation_metrics give none (AOTInductor's build under an export's id)."""
        t = self.compile.compile_time_s
        if t is not None or self.compile.id is None or not self.phases.spans_s:
            return t, False
        return self.phases.spans_s, True

    @cached_property
    def subgraphs(self) -> list[SubgraphGroup]:
        """Its artifacts by regional inductor's region; [] when none names a region."""
        c = self.compile
        if not has_subgraphs(c):
            return []
        from tlview.analyze.subgraphs import by_subgraph

        return by_subgraph(c)

    @cached_property
    def passes(self) -> list[PassStage]:
        """Its graphs pass by pass, stage by stage, when some pass left a graph (a stage's
        graphs before and after its passes alone say nothing of them); else []."""
        if not may_have_passes(self.compile):
            return []
        from tlview.analyze.passes import pass_stages

        stages = pass_stages(self.compile)
        return stages if any(s.passes for s in stages) else []

    @cached_property
    def bytecode(self) -> list[BytecodePair]:
        """Its frame's bytecode before and after dynamo, from it or an attempt that restarted."""
        attempts = [self.compile, *(e.compile for e in self.earlier)]
        if not any(may_have_bytecode(x) for x in attempts):
            return []
        from tlview.analyze.bytecode import pairs_of

        return pairs_of(attempts)

    def names(self) -> Iterator[str]:
        yield self.ref


def _break(g: GraphBreak, c: Compile) -> Break:
    return Break(
        g.where,
        g.line,
        break_title(g.reason),
        break_explanation(g.reason),
        tuple(break_hints(g.reason)),
        break_context(g.reason),
        tuple(_callers(g, c)),
        break_key(g.reason),
        g.reason,
        g.text or g.reason,
    )


def _callers(g: GraphBreak, c: Compile) -> list[StackFrame]:
    """The calls that led to a break deeper than the compiled function (in a helper or a
    library's code): from the compiled function on, outside torch (the compile's stack has the
    frames above it); none when it broke in the compiled function itself."""
    calls = break_callers(g.text)
    own = next((i for i, f in enumerate(calls) if f.name == c.function and f.file == c.file), None)
    inner = [] if own is None else [f for f in calls[own:] if not is_library(f.file)]
    return inner if len(inner) > 1 else []


def _restarts(c: Compile, ref: str) -> list[Restart]:
    """Each restart of the compile: in the attempt that restarted, or (for a later attempt) the
    attempt before it that holds where it broke."""
    out = []
    for i, r in enumerate(c.restart_reasons):
        before = None
        if c.status != "restarted" and c.id is not None and i < c.id.attempt:
            before = ref[: len(ref) - len(c.key)] + str(c.id._replace(attempt=i))
        out.append(Restart(break_title(r), r, before))
    return out


def _failure(c: Compile, ref: str) -> Failure | None:
    if c.status not in ("failed", "incomplete"):
        return None
    reason = (c.fail_reason or "").strip()
    lines = reason.splitlines()
    shown = lines[:REASON_LINES]
    if len(lines) > REASON_LINES:
        while shown and (not shown[-1].strip() or shown[-1].endswith(":")):
            shown.pop()  # a heading ("User stack:") or a gap whose lines are cut
        from tlview.inert import command

        shown.append(
            f"... {len(lines) - len(shown)} more lines: {command('--compile-id', ref)} shows them"
        )
    unfinished = (
        f"no compilation_metrics: the run stopped during this compile{stopped_in(c)}"
        if c.status == "incomplete"
        else ""
    )
    first = lines[0] if lines else unfinished
    return Failure(c.fail_type, reason, c.fail_where, tuple(shown) or (unfinished,), first)


def _listed_recompile(c: Compile) -> bool:
    """A recompile the report lists: one explained by the index (not a retry of a failure), or
    a later compile of a frame with the reasons torch logged for it."""
    return (c.recompile is not None and not c.is_retry) or (
        is_recompile(c) and bool(c.recompile_reasons)
    )


def _recompile(c: Compile) -> RecompileFacts | None:
    r = c.recompile
    if r is None:
        return None
    return RecompileFacts(
        r.previous,
        tuple(r.reasons),
        tuple(change_text(x) for x in r.input_changes),
        r.compared,
        limit_text(c) if r.limit_hit else None,
        c.id is not None and not c.is_retry,
    )


def _problem_order(c: Compile) -> int:
    """Which compiles a report shows first when it cannot show them all: failures (0), then
    graph breaks, restarts and recompiles (1), then the rest (2)."""
    if severity(c.status) <= severity("incomplete"):
        return 0
    if c.graph_breaks or c.restart_reasons or c.recompile is not None or c.recompile_reasons:
        return 1
    return 2


def _reason(a: Analysis) -> str:
    """Why the compile is not plainly ok, in one line (for a table's cell)."""
    c = a.compile
    if c.fail_type:
        lines = [ln.strip() for ln in (c.fail_reason or "").splitlines() if ln.strip()]
        return f"{c.fail_type}: {' '.join(lines[:2])}" if lines else c.fail_type
    if c.status == "incomplete":
        return (
            "never finished: no compilation_metrics (the process stopped during this "
            f"compile{stopped_in(c)})"
        )
    return _why(a)


def _why(a: Analysis) -> str:
    """A compile that finished: why it restarted, broke or compiled again ("" when none)."""
    restarted = "restarted: " + a.restarts[0].text if a.restarts else ""
    if a.status == "restarted" and restarted:
        return restarted
    if a.breaks:
        return "graph break: " + a.breaks[0].title
    r = a.compile.recompile
    guards = (r.reasons if r is not None else []) or a.compile.recompile_reasons
    return restarted or ("recompiled: " + guards[0] if guards else "")


@dataclass(slots=True)
class Analyser:
    """Analyses a report's attempts one at a time, in order, naming each as the report does and
    handing a compile the attempts before it that restarted (they come just before it)."""

    refs: Callable[[Compile], str]  # how the report names a compile (analyze.names.Refs)
    seen: int = 0
    restarted: dict[tuple[str, int | None, CompileId], list[Analysis]] = field(default_factory=dict)
    report: Report | None = None  # whose logs' contexts its compiles read
    contexts: dict[int, LogContext] = field(default_factory=dict)  # by the log's place

    @classmethod
    def of(cls, report: Report) -> Analyser:
        return cls(Refs.of(report), report=report)

    def context(self, li: int) -> LogContext | None:
        """The context of the report's li-th log (analyze/context.py)."""
        if self.report is None or li >= len(self.report.logs):
            return None
        got = self.contexts.get(li)
        if got is None:
            got = self.contexts[li] = log_context(self.report.logs[li])
        return got

    def __call__(self, c: Compile, n: int | None = None, at: tuple[int, int] = (0, 0)) -> Analysis:
        if n is None:
            n = self.seen
        self.seen = n + 1
        a = Analysis(c, self.refs(c), n, at)
        a.context = self.context(at[0])
        if c.id is not None:
            key = (c.log, c.pid, c.id.base)
            if c.status == "restarted":
                self.restarted.setdefault(key, []).append(a)
            else:
                a.earlier = self.restarted.pop(key, [])
        return a


def analysed(report: Report, start: int = 0, stop: int | None = None) -> Iterator[Analysis]:
    """The report's attempts [start, stop), analysed in order, in this process: each compile
    handed the attempts before it that restarted, also when they come before `start`."""
    from tlview.runtime.split import part

    return part(report, Analyser.of(report), start, stop, restarted)


def restarted(c: Compile) -> bool:
    """An attempt that restarted: the attempt after it is the compile torch counts."""
    return c.status == "restarted"
