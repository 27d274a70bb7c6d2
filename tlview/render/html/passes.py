"""A compile's regions, pass graphs and bytecode in its section: each region's artifacts, each
pass stage's graphs in the order they ran (the first linked to its payload, each later one a
diff against the one before, folded until opened), the bytecode pairs; bounded per compile.
section.py imports it only for a compile that has one of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tlview.inert import command
from tlview.render.html.payloads import PLAIN_BYTES, pack

if TYPE_CHECKING:
    from tlview.analyze.compiles import Analysis
    from tlview.analyze.passes import PassStage, PassStep, ShownStep

MAX_GROUPS = 64  # regions listed per compile
MAX_NAMES = 64  # artifacts listed per region
MAX_STAGES = 32  # pass stages per compile
MAX_STEPS = 64  # steps per stage
MAX_STEP_LINES = 400  # lines of one step's diff
PASS_BYTES = 64 * 1024  # diff text per compile, in all (docs/html.md)
MAX_DIFFED = 20_000  # lines of a graph the page diffs at most (`tlview show --passes` diffs any)
MAX_PAIRS = 32  # bytecode pairs per compile
SPENT = "not on this page: the page keeps 64 KiB of pass diffs per compile"

Link = tuple[str, str]  # (an artifact's name, its payload's anchor in the section or "")


@dataclass(slots=True)
class StepView:
    """One step of a stage: its graph whole (linked), or its diff against the step before."""

    name: str
    pass_name: str
    role: str
    line: int
    how: str  # whole | diff | unchanged | missing
    against: str | None
    anchor: str  # its payload in the section ("" when not on the page)
    lines: int = 0  # of its diff
    text: str | None = None  # the diff, as it is
    packed: str | None = None  # or gzip in base64, shown by the page's script when opened
    note: str | None = None  # what was cut or left out
    shown: int = 0  # characters of diff on the page


@dataclass(slots=True)
class StageView:
    stage: str
    subgraph: str | None
    passes: int
    steps: list[StepView] = field(default_factory=list)
    steps_left: int = 0


class PairView(NamedTuple):
    co_name: str
    original: Link | None
    modified: Link | None
    where: str


@dataclass(slots=True)
class PassesView:
    """What the section shows of the compile's regions, passes and bytecode."""

    subgraphs: list[tuple[str, list[Link], int]] = field(default_factory=list)  # name, links, left
    subgraphs_left: int = 0
    stages: list[StageView] = field(default_factory=list)
    stages_left: int = 0
    pass_graphs: int = 0
    show_passes: str = ""
    pairs: list[PairView] = field(default_factory=list)
    pairs_left: int = 0
    show_bytecode: str = ""

    @property
    def any(self) -> bool:
        return bool(self.subgraphs or self.stages or self.pairs)


def passes_view(a: Analysis, anchors: dict[int, str], detail: bool) -> PassesView:
    """The compile's facts; ANCHORS: each payload's anchor in the section, by log line.
    A section without details gets its regions and bytecode, not its pass diffs."""
    v = PassesView()
    _subgraphs(v, a, anchors)
    if detail and a.passes:
        _passes(v, a, anchors)
    _bytecode(v, a, anchors)
    return v


def _subgraphs(v: PassesView, a: Analysis, anchors: dict[int, str]) -> None:
    groups = [g for g in a.subgraphs if g.subgraph is not None]
    for g in groups[:MAX_GROUPS]:
        links = [(name, anchors.get(p.line, "")) for name, p in g.artifacts[:MAX_NAMES]]
        v.subgraphs.append((g.subgraph or "", links, max(0, len(g.artifacts) - MAX_NAMES)))
    v.subgraphs_left = max(0, len(groups) - MAX_GROUPS)


def _passes(v: PassesView, a: Analysis, anchors: dict[int, str]) -> None:
    from tlview.analyze.passes import each_step  # imported by Analysis for a compile with passes

    texts = {
        p.line: p.text
        for p in a.compile.payloads()
        if p.text is not None and not p.cut and p.lines <= MAX_DIFFED
    }
    left = PASS_BYTES
    for stage in a.passes[:MAX_STAGES]:
        sv = StageView(stage.stage, stage.subgraph, stage.passes)
        for s in each_step(_first(stage), texts):
            if left <= 0:  # the page's share of diffs is spent: diff no more
                sv.steps.append(_spent(s.step, anchors))
                continue
            step = _step(s, anchors, left)
            left -= step.shown
            sv.steps.append(step)
        sv.steps_left = max(0, len(stage.steps) - MAX_STEPS)
        v.stages.append(sv)
    v.stages_left = max(0, len(a.passes) - MAX_STAGES)
    v.pass_graphs = sum(s.passes for s in a.passes)
    v.show_passes = command("tlview", "show", "PATH", "--compile-id", a.ref, "--passes")


def _spent(x: PassStep, anchors: dict[int, str]) -> StepView:
    view = StepView(x.name, x.pass_name, x.role, x.line, "missing", None, anchors.get(x.line, ""))
    view.note = SPENT
    return view


def _first(stage: PassStage) -> PassStage:
    """The stage with its first MAX_STEPS steps."""
    if len(stage.steps) <= MAX_STEPS:
        return stage
    from tlview.analyze.passes import PassStage

    return PassStage(stage.stage, stage.subgraph, stage.steps[:MAX_STEPS])


def _step(s: ShownStep, anchors: dict[int, str], left: int) -> StepView:
    x = s.step
    view = StepView(x.name, x.pass_name, x.role, x.line, s.how, s.against, anchors.get(x.line, ""))
    if s.how == "missing":
        view.note = "its text is not on this page"
    if s.how != "diff":
        return view
    lines = s.lines[:MAX_STEP_LINES]
    view.lines = len(s.lines)
    text = "\n".join(lines)
    if len(text) > left:
        view.note = SPENT
        return view
    if len(s.lines) > MAX_STEP_LINES:
        view.note = f"the first {MAX_STEP_LINES:,} of {len(s.lines):,} lines of the diff"
    view.shown = len(text)
    if len(text) <= PLAIN_BYTES:
        view.text = text
    else:
        view.packed = pack(text)
    return view


def _bytecode(v: PassesView, a: Analysis, anchors: dict[int, str]) -> None:
    def link(name: str | None, line: int | None) -> Link | None:
        return None if name is None or line is None else (name, anchors.get(line, ""))

    for b in a.bytecode[:MAX_PAIRS]:
        orig = link(b.original_name, b.original.line if b.original else None)
        mod = link(b.modified_name, b.modified.line if b.modified else None)
        v.pairs.append(PairView(b.co_name, orig, mod, b.where))
    v.pairs_left = max(0, len(a.bytecode) - MAX_PAIRS)
    if a.bytecode:
        v.show_bytecode = command("tlview", "show", "PATH", "--compile-id", a.ref, "--bytecode")
