"""A compile's graphs pass by pass: the graph each of torch's or vLLM's passes left, in the
order they ran, grouped into stages that each begin with the graph before their first pass."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from tlview.analyze.names import artifact_names
from tlview.model import Compile, Payload

Role = Literal["before", "pass", "after"]

# The graphs that begin and end each of inductor's stages (torch/_inductor/compile_fx.py):
# kind -> (stage, role). `inductor_pre_grad_graph` is older torch's graph before pre-grad passes.
_BOUNDS: dict[str, tuple[str, Role]] = {
    "before_pre_grad_graph": ("pre_grad", "before"),
    "inductor_pre_grad_graph": ("pre_grad", "before"),
    "after_pre_grad_graph": ("pre_grad", "after"),
    "before_joint_graph": ("joint", "before"),
    "after_joint_graph": ("joint", "after"),
    "before_post_grad_graph": ("post_grad", "before"),
    "inductor_post_grad_graph": ("post_grad", "after"),
}
# The graph a pass left, as torch and vLLM name it: `{pass}_pre_grad` and `{pass}_post_grad`
# (inductor's pattern passes, logged when they changed the graph), `optimus_{Fusion}` and
# `cff_{Fusion}` (its batch fusions), `vllm_post_grad.<i>.<Pass>[.<stage>]` (vLLM's passes).
_VLLM_PASS = re.compile(r"vllm_post_grad\.(?:(\d{1,9})\.)?([^.]+)(?:\.(.+))?")
_TORCH_PASS = re.compile(r"(?!before_|after_|inductor_)(\w+)_(pre_grad|post_grad)")
_FUSION = re.compile(r"(?:optimus|cff)_(\w+)")


@dataclass(frozen=True, slots=True)
class PassStep:
    """One graph of a stage: the graph before its passes, one a pass left, or the one after."""

    name: str  # the artifact's name, as `tlview show` takes it (KIND, KIND#2)
    line: int
    role: Role
    stage: str  # pre_grad, joint, post_grad
    pass_name: str  # the pass (`FusionPass`, `merge_splits_pass`), else the graph's kind
    subgraph: str | None = None  # regional inductor's region
    index: int | None = None  # vLLM's place of the pass in its pipeline


@dataclass(slots=True)
class PassStage:
    """A stage's graphs in the order they were logged: each later one diffs against the one
    before it."""

    stage: str
    subgraph: str | None
    steps: list[PassStep] = field(default_factory=list)

    @property
    def passes(self) -> int:
        return sum(1 for s in self.steps if s.role == "pass")


def pass_step(name: str, p: Payload) -> PassStep | None:
    """The payload as a step of a stage, or None when it is no pass graph."""
    kind = p.kind
    bound = _BOUNDS.get(kind)
    if bound is not None:
        return PassStep(name, p.line, bound[1], bound[0], kind, p.subgraph)
    m = _VLLM_PASS.fullmatch(kind)
    if m is not None:
        index = int(m.group(1)) if m.group(1) else None
        return PassStep(name, p.line, "pass", "post_grad", m.group(2), p.subgraph, index)
    m = _TORCH_PASS.fullmatch(kind)
    if m is not None:
        return PassStep(name, p.line, "pass", m.group(2), m.group(1), p.subgraph)
    m = _FUSION.fullmatch(kind)
    if m is not None:  # its stage by its name where that says (else the open stage's: "")
        fusion = m.group(1)
        stage = "pre_grad" if "PreGrad" in fusion else "post_grad" if "PostGrad" in fusion else ""
        return PassStep(name, p.line, "pass", stage, kind, p.subgraph)
    return None


def pass_stages(c: Compile) -> list[PassStage]:
    """A compile's pass graphs, stage by stage in log order: a stage begins at its `before`
    graph (or at a pass graph of another stage or region than the open one), and ends at its
    `after` graph."""
    stages: list[PassStage] = []
    open_: PassStage | None = None
    for name, p in artifact_names(c):
        step = pass_step(name, p)
        if step is None:
            continue
        if not step.stage:
            step = replace(step, stage=open_.stage if open_ else "post_grad")
        if open_ is None or _starts_new(open_, step):
            open_ = PassStage(step.stage, step.subgraph)
            stages.append(open_)
        open_.steps.append(step)
        if step.role == "after":
            open_ = None
    return stages


def _starts_new(stage: PassStage, step: PassStep) -> bool:
    """Whether a step cannot follow the open stage: a `before` graph always begins one."""
    return step.role == "before" or (step.stage, step.subgraph) != (stage.stage, stage.subgraph)


def pass_lines(stages: list[PassStage]) -> frozenset[int]:
    """The log lines of every step: the payloads `tlview show --passes` reads whole."""
    return frozenset(s.line for st in stages for s in st.steps)


Shown = Literal["whole", "diff", "unchanged", "missing"]


@dataclass(frozen=True, slots=True)
class ShownStep:
    """A step as `tlview show --passes` (and a page) shows it: the first graph of a stage whole,
    each later one as a unified diff against the graph before it, or said to be unchanged."""

    step: PassStep
    how: Shown
    lines: list[str]  # whole: the graph's lines; diff: the unified diff's lines
    against: str | None = None  # the step it was diffed against


def unified(a: str, b: str, a_name: str, b_name: str, context: int = 3) -> list[str]:
    """The unified diff of two texts, line ends dropped; [] when they are the same."""
    if a == b:
        return []
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            a.splitlines(), b.splitlines(), a_name, b_name, n=context, lineterm=""
        )
    ]


def shown_steps(stage: PassStage, texts: Mapping[int, str]) -> list[ShownStep]:
    """A stage's steps against the text of each (by log line): the first one with a text whole,
    each later one diffed against the last one before it that had a text."""
    return list(each_step(stage, texts))


def each_step(stage: PassStage, texts: Mapping[int, str]) -> Iterator[ShownStep]:
    """`shown_steps` one at a time: a reader that stops early diffs no more."""
    prev: PassStep | None = None
    for step in stage.steps:
        text = texts.get(step.line)
        if text is None:
            yield ShownStep(step, "missing", [])
            continue
        if prev is None:
            yield ShownStep(step, "whole", text.splitlines())
        else:
            lines = unified(texts[prev.line], text, prev.name, step.name)
            yield ShownStep(step, "diff" if lines else "unchanged", lines, prev.name)
        prev = step
