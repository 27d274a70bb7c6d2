"""A report written in any format: the format's renderer, its passes run by the one split
driver (`runtime/split.py`) over the analysed compiles (`analyze/compiles.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlview.analyze.compiles import Analyser, Analysis, restarted
from tlview.render import REPORT_FORMATS, Options
from tlview.runtime.output import Output
from tlview.runtime.split import Forking

if TYPE_CHECKING:
    from tlview.analyze.summary import Overview
    from tlview.model import Report


def forking(report: Report) -> Forking[Analysis]:
    """The split that runs a renderer's passes over REPORT's analysed compiles, on two cores
    when they are worth it."""
    return Forking(report, lambda: Analyser.of(report), restarted)


def write_report(report: Report, fmt: str, out: Output, opts: Options) -> Overview | None:
    """Write REPORT as FMT (a name of `render.REPORT_FORMATS`) to OUT; its figures, when the
    renderer counted them on its pass (for `--fail-on`)."""
    return REPORT_FORMATS[fmt].renderer()(report, out, opts, forking(report))
