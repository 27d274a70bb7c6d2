"""One compile as the page-wide parts show it: kept for the whole page, where its compile is not."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import NamedTuple

from tlview.analyze.changes import change_what
from tlview.model import ExportIssue, InputChange, Recompile, StackFrame, Status
from tlview.units import seconds, short_path


@dataclass(slots=True)
class BudgetItem:
    """A payload's share of the page budget, decided before any compile section is written."""

    pos: int  # its place among the compile's graphs, artifacts and guards
    kind: str
    name: str  # as `tlview show` names it: its kind, KIND#N for the Nth of a kind
    tier: int  # what a reader opens first: 0 a failure's error, 1 graphs, code, guards, 2 the rest
    bytes: int  # the whole payload
    size: int | None  # bytes of text the reader kept (None: none)
    digest: builtins.bytes | None = (
        None  # of the text kept, as tlview computes it: equal texts written once
    )
    line: int = 0  # of the log
    state: str = ""  # whole | cut | reader (no text kept) | spent (the page budget was) | none
    shown: int = 0
    text: str | None = None  # the text shown, when the page cut it
    same: str | None = None  # the anchor of an equal payload, whose compressed text it shows


class IssueView(NamedTuple):
    """An export issue, in its compile's section and in the page's table of them."""

    kind: str
    subject: str
    detail: str
    file: str  # of the user's frame that caused it ("" when none was logged)
    at: str | None  # that frame's short file:line, None when none was logged
    loc: str | None


def issue_view(x: ExportIssue) -> IssueView:
    w = x.where
    if w is None:
        return IssueView(x.kind, x.subject, x.detail, "", None, None)
    return IssueView(x.kind, x.subject, x.detail, w.file, f"{short_path(w.file)}:{w.line}", w.loc)


class ChangeView(NamedTuple):
    """One input that changed since the compile before, in words."""

    source: str
    what: str
    before: str | None  # None: the input was not there
    after: str | None


class RecompileView(NamedTuple):
    """Why a compile was compiled again, and which of its inputs changed."""

    previous: str | None  # key of the previous compile of the same frame
    reasons: list[str]  # the guards that failed
    input_changes: list[ChangeView]
    limit_hit: bool
    compared: bool  # both compiles described their inputs, so input_changes is whole


def recompile_view(rc: Recompile, most: int | None = None) -> RecompileView:
    """A recompile as the page shows it: with the first `most` input changes, or all."""
    changes = rc.input_changes if most is None else rc.input_changes[:most]
    return RecompileView(
        rc.previous, rc.reasons, [_change(ch) for ch in changes], rc.limit_hit, rc.compared
    )


def _change(ch: InputChange) -> ChangeView:
    before = None if ch.before is None else str(ch.before)
    after = None if ch.after is None else str(ch.after)
    return ChangeView(ch.source, change_what(ch), before, after)


@dataclass(slots=True)
class Row:
    """One compile as the page-wide parts show it (table, stacks, failures, recompiles, timeline).

    Made while the figures are tallied; it keeps none of the compile's records, so the page
    holds one of these per compile it shows and reads each compile again for its section.
    """

    n: int  # place among the report's compiles
    at: tuple[int, int]  # (log, place in the log): where to read the compile again
    ref: str  # compile_ref: the id, with its log when the page has several logs
    anchor: str
    key: str
    log: str
    log_label: str
    log_short: str  # the log's short name, when the page has several logs
    status: Status
    pid: int | None
    function: str | None
    file: str | None
    where: str
    sort_id: str
    ops: int | None
    time_s: float | None
    inputs: int
    alias_groups: int
    breaks: int
    reason: str  # one line for the table: fail type, graph break, recompile reason
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_where: str | None = None
    restarts: list[str] = field(default_factory=list)  # problems only: each restart in words
    export_issues: list[IssueView] = field(default_factory=list)
    recompile: RecompileView | None = None  # with at most MAX_ROW_CHANGES input changes
    changes: int = 0  # input changes in all
    recompile_reasons: list[str] = field(default_factory=list)  # recompiles only
    stack: tuple[StackFrame, ...] = ()
    span: tuple[float, float] | None = None  # first and last chromium_event, for the timeline
    payloads: list[BudgetItem] = field(default_factory=list)  # those its section shows
    # (name, digest, length) of its metric values of SHARED_METRIC or more, in the order its
    # section shows them: for linking repeats, and for counting those cut (over METRIC_BYTES)
    long_metrics: list[tuple[str, bytes, int]] = field(default_factory=list)
    detail: bool = True  # False: beyond DETAIL_COMPILES, shown without the heavy parts
    previous: tuple[str, str] | None = None  # (label, anchor) of the previous compile

    @property
    def label(self) -> str:
        """How the page names the compile: its id, after its log's short name if there are several."""
        return f"{self.log_short} {self.key}" if self.log_short else self.key

    @property
    def time(self) -> str:
        return seconds(self.time_s)

    @property
    def problem(self) -> bool:
        return self.status in ("failed", "incomplete")

    @property
    def listed_recompile(self) -> bool:
        return self.recompile is not None or bool(self.recompile_reasons)
