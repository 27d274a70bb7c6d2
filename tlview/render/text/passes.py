"""A compile's regions, pass graphs and bytecode in its detail on the terminal: a few lines
each, and the `tlview show` command that shows them whole. Every line begins with tlview's own
words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from tlview.inert import command
from tlview.render.text.console import T
from tlview.render.text.vllm import flat, listed
from tlview.units import count

if TYPE_CHECKING:
    from tlview.analyze.compiles import Analysis
    from tlview.analyze.passes import PassStage  # imported by Analysis for a compile with passes

MAX_GROUPS = 8  # regions listed per compile
MAX_STAGES = 8  # pass stages listed per compile
MAX_STEPS = 12  # steps of a stage on its line
MAX_PAIRS = 4  # bytecode pairs listed per compile


def compile_facts(a: Analysis, console: Console) -> None:
    """Its regions, pass stages and bytecode pairs, where it has them."""
    lines = subgraph_lines(a) + pass_lines(a) + bytecode_lines(a)
    if lines:
        console.print(T("\n".join(lines)), soft_wrap=True)  # no line begins with log text


def subgraph_lines(a: Analysis) -> list[str]:
    """Each region of regional inductor and its artifacts, as `tlview show` names them."""
    groups = [g for g in a.subgraphs if g.subgraph is not None]
    if not groups:
        return []
    show = command("tlview", "show", "PATH", "--compile-id", a.ref, "NAME[SUBGRAPH]")
    regions = count(len(groups), "region")
    out = [f"  subgraphs: {regions} of regional inductor ({show} writes one)"]
    for g in groups[:MAX_GROUPS]:
        names = [name for name, _ in g.artifacts]
        out.append(f"    subgraph {flat(g.subgraph, 80)}: {listed(names)}")
    if len(groups) > MAX_GROUPS:
        out.append(f"    ... {len(groups) - MAX_GROUPS} more subgraphs: --format json lists them")
    return out


def stage_text(s: PassStage) -> str:
    """A stage on one line: its name, region and steps in order, `>` between them."""
    where = f" [{flat(s.subgraph, 60)}]" if s.subgraph is not None else ""
    steps = [flat(x.pass_name, 60) for x in s.steps[:MAX_STEPS]]
    more = f" > ... {len(s.steps) - MAX_STEPS} more" if len(s.steps) > MAX_STEPS else ""
    return (
        f"    stage {s.stage}{where}, {count(s.passes, 'pass graph')}: " + " > ".join(steps) + more
    )


def pass_lines(a: Analysis) -> list[str]:
    """Each stage of its pass graphs, in the order torch or vLLM ran them."""
    if not a.passes:
        return []
    n = sum(s.passes for s in a.passes)
    show = command("tlview", "show", "PATH", "--compile-id", a.ref, "--passes")
    said = f"{count(len(a.passes), 'stage')}, {count(n, 'pass graph')}"
    out = [f"  passes: {said} ({show} shows each as a diff)"]
    out += [stage_text(s) for s in a.passes[:MAX_STAGES]]
    if len(a.passes) > MAX_STAGES:
        out.append(f"    ... {len(a.passes) - MAX_STAGES} more stages: --passes shows them")
    return out


def bytecode_lines(a: Analysis) -> list[str]:
    """Each function whose bytecode dynamo logged before and after it changed it."""
    if not a.bytecode:
        return []
    show = command("tlview", "show", "PATH", "--compile-id", a.ref, "--bytecode")
    out = [f"  bytecode: {count(len(a.bytecode), 'function')} ({show} diffs each)"]
    for b in a.bytecode[:MAX_PAIRS]:
        logged = [w for w, p in (("original", b.original), ("modified", b.modified)) if p]
        out.append(f"    function {flat(b.co_name, 80)}: {' and '.join(logged)} ({b.where})")
    if len(a.bytecode) > MAX_PAIRS:
        out.append(f"    ... {len(a.bytecode) - MAX_PAIRS} more: --bytecode shows them")
    return out
