"""`tlview show`'s diffs: a compile's graphs pass by pass, two artifacts against each other, an
artifact against the frame's previous compile, and a frame's bytecode before and after dynamo."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tlview.analyze.names import find_artifact, find_compile
from tlview.analyze.passes import ShownStep, pass_lines, pass_stages, shown_steps, unified
from tlview.analyze.vllm import pieces_by_artifact
from tlview.commands.funnel import say  # say: text from the log, made inert
from tlview.commands.texts import WHOLE, kept, read, texts_at
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.index.keep import Keep
from tlview.inert import command
from tlview.model import Compile, Payload, Report
from tlview.runtime.output import stdout

if TYPE_CHECKING:
    from tlview.logs.progress import BarLike


def show_passes(path: str, ref: str, progress: bool | BarLike | None = False) -> None:
    """Each stage's first graph whole, then each pass's graph as a diff against the one before
    it, in the order torch or vLLM ran them; a pass that changed nothing in one line."""
    stdout()
    report = read(path, progress)
    c = find_compile(report, ref)
    stages = pass_stages(c)
    if not stages:
        say(f"compile {ref} of {path}: no pass graphs (torch logs them from inductor's passes)")
        return
    texts = texts_at(path, ref, pass_lines(stages), progress)
    pieces = pieces_by_artifact(report, c)
    for k, stage in enumerate(stages, 1):
        where = f" [{stage.subgraph}]" if stage.subgraph else ""
        of = pieces.get(stage.steps[0].name)
        piece = f" (vLLM {of[0].prefix or 'call'} {of[1].submod}, {of[1].label})" if of else ""
        say(
            f"== stage {k}/{len(stages)}: {stage.stage}{where}, {stage.passes} pass graph(s)"
            + piece
        )
        for shown in shown_steps(stage, texts):
            _say_step(shown)


def _say_step(shown: ShownStep) -> None:
    s = shown.step
    head = f">> {s.name} (line {s.line})"
    if shown.how == "whole":
        say(f"{head}, whole:")
        for line in shown.lines:
            say(line)
    elif shown.how == "unchanged":
        say(f"{head}: unchanged from {shown.against}")
    elif shown.how == "missing":
        say(f"{head}: no text in the log")
    else:
        say(f"{head}, against {shown.against}:")
        _say_diff(shown.lines)


def _say_diff(lines: list[str]) -> None:
    for line in lines:
        say(line)


def resolve(report: Report, c: Compile, name: str) -> tuple[str, Payload]:
    """The artifact NAME names (`KIND`, `KIND#N`, `KIND[SUBGRAPH]`); a usage error otherwise."""
    return find_artifact(report, c, name)


def show_diff(path: str, ref: str, a: str, b: str, progress: bool | BarLike | None = False) -> None:
    """Artifact B of a compile as a unified diff against its artifact A."""
    stdout()
    report = read(path, progress)
    c = find_compile(report, ref)
    (na, pa), (nb, pb) = resolve(report, c, a), resolve(report, c, b)
    texts = texts_at(path, ref, (pa.line, pb.line), progress)
    _say_pair(ref, (na, pa, texts.get(pa.line)), (nb, pb, texts.get(pb.line)))


def _say_pair(
    ref: str, a: tuple[str, Payload, str | None], b: tuple[str, Payload, str | None]
) -> None:
    (na, pa, ta), (nb, pb, tb) = a, b
    for n, text in ((na, ta), (nb, tb)):
        if text is None:
            raise TlviewError(f"compile {ref}: {n} has no text in the log (no payload)", EXIT_USAGE)
    assert ta is not None and tb is not None
    lines = unified(ta, tb, f"{na} (line {pa.line})", f"{nb} (line {pb.line})")
    if not lines:
        say(f"{na} (line {pa.line}) and {nb} (line {pb.line}) are the same")
    _say_diff(lines)


def previous(report: Report, c: Compile) -> Compile:
    """The compile of the same frame before this one (its recompile's previous), in its log."""
    want = c.recompile.previous if c.recompile is not None else None
    if want is None and c.id is not None and c.id.frame_compile:
        base = c.id.base
        want = f"{base.frame}/{base.frame_compile - 1}" if base.frame_compile else None
    found = [x for x in report.attempts if x.key == want and (x.log, x.pid) == (c.log, c.pid)]
    if not found:
        raise TlviewError(
            f"{report.path}: compile {c.key} has no previous compile of its frame", EXIT_USAGE
        )
    return found[0]


def show_diff_previous(
    path: str, ref: str, name: str, progress: bool | BarLike | None = False
) -> None:
    """An artifact against the same artifact (kind and place) of the frame's previous compile:
    what a recompile changed."""
    stdout()
    report = read(path, progress)
    c = find_compile(report, ref)
    nb, pb = resolve(report, c, name)
    before = previous(report, c)
    na, pa = resolve(report, before, nb)
    keep = Keep(WHOLE, WHOLE, exact=True, lines=frozenset((pa.line, pb.line)), line=-1)
    again = read(path, progress, keep)
    texts = kept(find_compile(again, ref), _same(again, before))
    say(f"compile {before.key} -> {c.key}: {nb}")
    _say_pair(
        ref,
        (f"{before.key}:{na}", pa, texts.get(pa.line)),
        (f"{c.key}:{nb}", pb, texts.get(pb.line)),
    )


def _same(report: Report, c: Compile) -> Compile:
    """The compile of a second read that is `c` of the first."""
    return next(x for x in report.attempts if (x.key, x.log, x.pid) == (c.key, c.log, c.pid))


def hint(path: str, ref: str) -> str:
    """The command that lists a compile's artifact names, for messages."""
    return command("tlview", "show", path, "--compile-id", ref)


@dataclass(frozen=True, slots=True)
class Asked:
    """Which of `show`'s diffs the command line asked for."""

    passes: bool = False
    diff_with: str | None = None
    diff_previous: bool = False
    bytecode: bool = False


def show(
    path: str, ref: str, artifact: str | None, asked: Asked, progress: bool | BarLike | None = False
) -> None:
    """The one diff asked for, after checking the options go together."""
    _check(asked, artifact)
    if asked.passes:
        show_passes(path, ref, progress)
    elif asked.bytecode:
        from tlview.commands.bytecode import show_bytecode

        show_bytecode(path, ref, progress)
    elif asked.diff_with is not None and artifact is not None:
        show_diff(path, ref, artifact, asked.diff_with, progress)
    elif artifact is not None:
        show_diff_previous(path, ref, artifact, progress)


def _check(asked: Asked, artifact: str | None) -> None:
    """A usage error unless one diff is asked, with an ARTIFACT exactly where it needs one."""
    many = asked.passes + (asked.diff_with is not None) + asked.diff_previous + asked.bytecode
    if many > 1:
        raise TlviewError("give one of --passes, --diff, --diff-previous, --bytecode", EXIT_USAGE)
    needs = asked.diff_with is not None or asked.diff_previous
    if needs and artifact is None:
        raise TlviewError("--diff and --diff-previous need an ARTIFACT to diff", EXIT_USAGE)
    if not needs and artifact is not None:
        raise TlviewError(
            "--passes and --bytecode show a whole compile: give no ARTIFACT", EXIT_USAGE
        )
