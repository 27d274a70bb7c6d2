"""The page as a whole: its parts, built in one pass over the compiles, put together."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, NamedTuple

from tlview.analyze.breaks import break_key
from tlview.analyze.names import names_text
from tlview.analyze.summary import MAX_BREAK_COMPILES, Overview
from tlview.model import STATUSES, Divergence, LogIndex, Report
from tlview.render import Split, split_of
from tlview.render.html import budget as kept
from tlview.render.html import pick as picking
from tlview.render.html.figures import (
    BreakView,
    HeadFigure,
    TimeView,
    Totals,
    break_views,
    figures,
    time_view,
    totals,
)
from tlview.render.html.fmt import clock
from tlview.render.html.metrics import METRIC_BYTES, first_shown
from tlview.render.html.payloads import COMPILE_TIERS, MAX_LISTED, Budget, share_budget
from tlview.render.html.phases import RunView, run_view
from tlview.render.html.pick import PROBLEMS, FirstPass, Found, Picked
from tlview.render.html.rows import IssueView, Row
from tlview.render.html.timeline import Timeline, page_timeline
from tlview.render.html.trie import TrieNode, trie
from tlview.strings import Names
from tlview.units import count, nbytes
from tlview.version import __version__

if TYPE_CHECKING:
    from tlview.analyze.vllm import VllmReport
    from tlview.render.html.vllm import VllmView


class LogView(NamedTuple):
    """One log read, as a row of the page's table of logs."""

    name: str
    rank: str
    pid: str
    torch_version: str
    size: str
    lines: str
    records: str
    bad: int
    first: str  # the time of its first record
    last: str


def log_view(log: LogIndex) -> LogView:
    return LogView(
        log.name,
        names_text([log.process]) if log.process else "" if log.rank is None else str(log.rank),
        str(log.pid) if log.pid else "",
        log.torch_version or "",
        nbytes(log.size) if log.size else "",
        f"{log.lines:,}",
        f"{log.records:,}",
        log.bad_count,
        clock(log.first_time),
        clock(log.last_time),
    )


class DivergenceView(NamedTuple):
    """Where the ranks' logs differ, as a row of its table."""

    kind: str
    ranks: str
    detail: str


@dataclass(slots=True)
class Page:
    """Everything the template renders: built in one pass over the compiles, except each
    compile's section, which `section.compile_views` builds as the compile is read again."""

    report: Report
    split: Split  # what runs the passes over the compiles; their sections too
    names: Names  # the long names shown so far, by number (tlview/strings.py)
    full: bool
    title: str
    version: str
    torch_version: str | None
    logs: list[LogView]
    ranks: list[int]
    rank_text: str  # `0-1023`, `0, 0#2` (a second log of rank 0)
    o: Overview  # for the caller (--fail-on); the templates read `totals`
    totals: Totals
    figures: list[HeadFigure]
    budget: Budget
    compiles: list[Row]  # in log order
    trie: list[TrieNode]
    breaks: list[BreakView]
    recompiles: list[Row]
    problems: list[Row]
    issues: list[tuple[Row, IssueView]]
    divergence: list[DivergenceView]
    notes: list[str]
    bad_lines: list[tuple[str, int, str]]  # (log, line, what is wrong)
    bad_total: int
    lanes: list[Timeline]
    many: bool
    statuses: list[str]
    limits: dict[str, str]
    break_anchor: dict[str, str]  # graph-break reason -> its row in the graph-break table
    time: TimeView | None = None  # where the compile time went
    run_facts: RunView | None = None  # by phase; CUDA graph skips; records without an id
    left_out_by: list[tuple[str, int]] = field(default_factory=list)  # (compile tier, payloads)
    # (metric, digest of a long value) -> (anchor, label) of the first section that shows it
    shared: dict[tuple[str, bytes], tuple[str, str]] = field(default_factory=dict)
    vllm: VllmView | None = None  # vLLM's compile calls, when it wrote records


JOB_PAGE_PROCESSES = 8  # a job of more processes shows rank 0's compiles and those that differ


def job_shown(report: Report) -> tuple[Picked | None, str | None]:
    """Which compiles a job's page shows: with many processes, those of the lowest rank and of
    every process that differs from the others (the rest agree with it in every check)."""
    procs = [log.process for log in report.logs if log.process]
    if len(procs) <= JOB_PAGE_PROCESSES:
        return None, None
    differ = {name for d in report.divergence for name in d.processes}
    keep = {procs[0], *differ}
    by_log = {(log.name, log.pid) for log in report.logs if log.process in keep}
    rest = len(procs) - len(keep)
    note = (
        f"this page shows the compiles of {count(len(keep), 'process')} "
        f"({names_text(sorted(keep, key=procs.index))}): the other {rest} agree with "
        f"{procs[0].replace('rank', 'rank ')} in every check (`--format json` has every compile)"
    )
    return (lambda c: (c.log, c.pid) in by_log), note


def _anchors(rows: list[Row]) -> dict[tuple[str, str], str]:
    """Each compile's section on the page, by its log and key."""
    anchors: dict[tuple[str, str], str] = {}
    for r in rows:
        anchors.setdefault((r.log, r.key), r.anchor)
    return anchors


def _vllm(v: VllmReport | None, rows: list[Row]) -> VllmView | None:
    """The vLLM section, its module imported only for a report with vLLM's calls."""
    if v is None:
        return None
    from tlview.render.html.vllm import vllm_view

    return vllm_view(v, _anchors(rows))


def _link_previous(rows: list[Row]) -> None:
    """Link each recompile's row to the row of the compile before it, when the page has it."""
    anchors = _anchors(rows)
    for r in rows:
        if r.recompile is not None and r.recompile.previous:
            prev = anchors.get((r.log, r.recompile.previous))
            if prev:
                r.previous = (r.recompile.previous, prev)


def _divergence(d: Divergence) -> DivergenceView:
    who = names_text(d.processes) if d.processes else ", ".join(map(str, d.ranks))
    return DivergenceView(d.kind, who, d.detail)


def _notes(report: Report, job_note: str | None) -> list[str]:
    """The report's notes, the job's, then each log's."""
    logs = [f"{log.name}: {n}" for log in report.logs for n in log.notes]
    return list(report.notes) + ([job_note] if job_note else []) + logs


def _limits() -> dict[str, str]:
    """The page's bounds, as its notes say them."""
    return {
        "payload": nbytes(kept.PAYLOAD_BYTES),
        "page": nbytes(kept.PAGE_PAYLOAD_BYTES),
        "read": nbytes(kept.READ_BYTES),
        "listed": f"{MAX_LISTED:,}",
        "metric": nbytes(METRIC_BYTES),
        "compiles": str(picking.DETAIL_COMPILES),
        "rows": str(picking.PAGE_COMPILES),
        "break_compiles": str(MAX_BREAK_COMPILES),
    }


def _first_pass(
    report: Report, full: bool, only: tuple[str, Picked] | None, split: Split
) -> tuple[Found, str | None]:
    """The figures and the rows: one pass over the compiles, on two cores when it pays; and
    the note of a job's page that shows some of its processes."""
    shown, job_note = (None, None) if full or only else job_shown(report)
    p = FirstPass(report, full or only is not None, only[1] if only else shown)
    # One compile shown alone (`only`) is never worth a second core.
    return split.fold(p, scale=1 << 30 if only else 2), job_note


def _log_parts(report: Report, job_note: str | None) -> dict[str, Any]:
    """What the page says of the logs: their table, ranks, notes and bad lines."""
    return {
        "logs": [log_view(log) for log in report.logs],
        "ranks": report.ranks,
        "rank_text": names_text(log.process for log in report.logs if log.process),
        "divergence": [_divergence(d) for d in report.divergence],
        "notes": _notes(report, job_note),
        "bad_lines": [(b.log, b.line, b.reason) for log in report.logs for b in log.bad_lines],
        "bad_total": sum(log.bad_count for log in report.logs),
    }


def _row_parts(rows: list[Row], o: Overview, budget: Budget) -> dict[str, Any]:
    """The page-wide parts made of the rows: tables, trie, timeline, links."""
    breaks = break_views(o, {r.ref: r for r in reversed(rows)})
    statuses: list[str] = sorted({r.status for r in rows}, key=STATUSES.index)
    tiers = zip(COMPILE_TIERS, budget.missing_by_tier, strict=True)
    return {
        "compiles": rows,
        "trie": trie(rows),
        "breaks": breaks,
        "break_anchor": {break_key(b.reason): b.anchor for b in breaks},
        "recompiles": [r for r in rows if r.listed_recompile],
        "problems": [r for r in rows if r.status in PROBLEMS or r.restarts],
        "issues": [(r, x) for r in rows for x in r.export_issues],
        "lanes": page_timeline(rows),
        "statuses": statuses,
        "totals": totals(o, statuses),
        "time": time_view(o, {r.ref: r for r in rows}),
        "left_out_by": [(t, n) for t, n in tiers if n],
        "shared": first_shown(rows),
    }


def build(
    report: Report,
    full: bool = False,
    only: tuple[str, Picked] | None = None,
    split: Split | None = None,
) -> Page:
    """The page for a report; `full` shows every compile, payload and metric whole; `only`
    (--compile-id, and what it picks) shows those compiles alone, whole, and counts them all."""
    split = split_of(report, split)
    found, job_note = _first_pass(report, full, only, split)
    o = found.tally.done()
    rows, budget = found.pick.done()
    budget.only = only[0] if only else None
    share_budget(report, rows, budget, budget.full, {s.ref for s in o.slowest})
    _link_previous(rows)
    return Page(
        report=report,
        split=split,
        names=Names(),
        full=budget.full,
        title=PurePath(report.path).name or report.path,
        version=__version__,
        torch_version=report.torch_version,
        o=o,
        figures=figures(o),
        budget=budget,
        many=found.pick.many,
        limits=_limits(),
        run_facts=run_view(o),
        vllm=_vllm(o.vllm, rows),
        **_log_parts(report, job_note),
        **_row_parts(rows, o, budget),
    )
