"""`tlview repro`'s usage checks, and what it says and exits with after one or all repros."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tlview.commands.funnel import say
from tlview.errors import EXIT_NO_REPRO, EXIT_USAGE, TlviewError

if TYPE_CHECKING:
    from tlview.replay.make import Outcome


def repro_usage(
    compile_id: str | None, all_graphs: bool, output: str | None, run: bool, accuracy: bool
) -> None:
    """The option pairs `repro` refuses, before anything is read."""
    if all_graphs == (compile_id is not None):
        raise TlviewError("give --compile-id ID for one graph, or --all", EXIT_USAGE)
    if output is None and (all_graphs or not run):
        raise TlviewError("give -o DIR: where to write the repro", EXIT_USAGE)
    if accuracy and not run:
        raise TlviewError("--check-accuracy needs --run: it compares values of a run", EXIT_USAGE)


def repro_all_said(path: str, out: Path, outcomes: list[Outcome], run: bool) -> None:
    """`repro --all`'s summary, and its exit status: every graph must give a repro."""
    from tlview.analyze.names import GRAPH_KIND
    from tlview.replay import make

    for line in make.summary_lines(outcomes, run):
        say(line)
    summary = out / make.SUMMARY
    say(f"tlview: wrote {summary}", err=True)
    good = ("ran",) if run else ("ran", "written")
    if not outcomes:  # asked for repros, got none: as much a failure as a skipped graph
        raise TlviewError(
            f"{path}: no {GRAPH_KIND} record in the log: no graph to repro", EXIT_NO_REPRO
        )
    bad = sum(o.status not in good for o in outcomes)
    if bad:
        raise TlviewError(
            f"{path}: {bad} of {len(outcomes)} graph(s) gave no repro that "
            f"{'ran' if run else 'runs here'} (see {summary})",
            EXIT_NO_REPRO,
        )


def repro_said(path: str, out: Path | None, o: Outcome, run: bool) -> None:
    """One repro's notes and where it went, and its exit status."""
    from tlview.replay import script

    ran = run and o.status in ("ran", "mismatch", "inaccurate", "failed")
    for note in [] if ran else o.notes:  # a repro that ran printed its notes itself
        say(f"tlview: note: {note}", err=True)
    if o.status == "skipped":
        raise TlviewError(f"{path}: compile {o.ref}: no repro: {o.reason}", EXIT_NO_REPRO)
    if out is not None:
        say(f"tlview: wrote {out / script.SCRIPT} and {out / script.INPUTS}", err=True)
    if o.status == "blocked":
        raise TlviewError(
            f"{path}: compile {o.ref}: the repro will not run here: {o.reason}", EXIT_NO_REPRO
        )
    if o.status in ("failed", "mismatch", "inaccurate"):
        what = "is inaccurate" if o.status == "inaccurate" else o.status
        raise TlviewError(f"{path}: compile {o.ref}: the repro {what}: {o.reason}", EXIT_NO_REPRO)
