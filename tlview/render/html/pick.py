"""Which compiles the page shows, and which in full: picked as the compiles go by."""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from tlview.analyze.compiles import Analysis
from tlview.analyze.facts import guard_origins, made_at
from tlview.analyze.summary import Tally
from tlview.model import Compile, LogIndex, Report, StackFrame
from tlview.render.html.metrics import long_metrics
from tlview.render.html.payloads import Budget, budget_items
from tlview.render.html.rows import Row, issue_view, recompile_view

DETAIL_COMPILES = 500  # compiles shown with every detail; the rest show status, reasons, inputs
PAGE_COMPILES = 1000  # compiles with a row and a section; the rest are counted in a note
MAX_ROW_CHANGES = 6  # input changes a recompile shows in the Recompiles table
MAX_ROW_ISSUES = 100  # export issues of one compile in the page's Export issues table
_REASON_CHARS = 1000  # of a compile's one-line reason kept for the table (which shows 140)
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/!@-]")
PROBLEMS = ("failed", "incomplete")  # and a compile that restarted: `is_problem`
Picked = Callable[[Compile], bool]  # --compile-id: whether the page shows a compile


@dataclass(slots=True)
class Found:
    """The figures and the rows the first pass found in a run of compiles."""

    tally: Tally
    pick: Pick

    def __getstate__(self) -> tuple[Tally, Pick]:
        self.pick.frames = {}  # for sharing StackFrames among rows here; no use elsewhere
        return self.tally, self.pick

    def __setstate__(self, state: tuple[Tally, Pick]) -> None:
        self.tally, self.pick = state


class FirstPass(NamedTuple):
    """Counts the figures and picks the rows, a compile at a time (a `render.Pass`)."""

    report: Report
    full: bool
    only: Picked | None

    def start(self, later: bool) -> Found:
        return Found(Tally(self.report), Pick(self.report, self.full, later, self.only))

    def run(self, found: Found, compiles: Iterator[Analysis]) -> Iterator[str]:
        for a in compiles:
            found.tally.add(a)
            found.pick.add(a)
        return iter(())

    def merge(self, found: Found, later: Found) -> None:
        found.tally.merge(later.tally)
        found.pick.merge(later.pick)


@dataclass(slots=True)
class _Gone:
    """A row the other process made and dropped: it still holds its place until dropped here."""

    problem: bool
    listed_recompile: bool


class Pick:
    """Chooses, as the compiles go by, the ones the page shows (PAGE_COMPILES) and the ones it
    shows in full (DETAIL_COMPILES): failures first, then graph breaks, restarts and recompiles,
    then the rest, each in log order. Only the rows still in the running are kept."""

    def __init__(
        self, report: Report, full: bool, later: bool = False, only: Picked | None = None
    ) -> None:
        self.full = full
        self.only = only
        self.many = len({log.name for log in report.logs}) > 1
        self.labels = log_labels(report.logs)
        self.short = self.many or len(report.logs) > 1
        self.names = [self.labels[id(log)] for log in report.logs]
        self.cap = PAGE_COMPILES
        self.detail_cap = min(DETAIL_COMPILES, PAGE_COMPILES)
        # Min-heaps of (-order, -n, row): the first entry is the worst row kept.
        self.rows: list[tuple[int, int, Row | _Gone]] = []
        self.detailed: list[tuple[int, int, Row | _Gone]] = []
        self.used: set[str] = set()
        self.frames: dict[StackFrame, StackFrame] = {}
        self.n = 0
        self.total = 0  # compiles, and records outside any compile, picked from
        self.hidden_problems = 0
        self.hidden_recompiles = 0
        # Picking from later compiles in another process: each row made, in order, as (n,
        # -order, anchor base, problem, listed recompile), and the compiles turned away before
        # any row was made (problems, recompiles), so `merge` can replay them exactly.
        self.made: list[tuple[int, int, str, bool, bool]] | None = [] if later else None
        self.skipped = [0, 0]

    def add(self, a: Analysis) -> None:
        n = a.n
        self.n = n + 1
        c = a.compile
        if c.id is not None and not a.counted:
            return  # an attempt that restarted: its compile (the attempt after it) has the row
        self.total += 1
        if self.only is not None and not any(self.only(x.compile) for x in (a, *a.earlier)):
            return
        key = (-a.problem, -n)
        if self.full:
            self.rows.append((*key, self.row(a, True)))
            return
        if self._turned_away(key):
            self._hide_count(is_problem(a), a.listed_recompile)
            self.skipped[0] += is_problem(a)
            self.skipped[1] += a.listed_recompile
            return
        in_detail = self._in_detail(key)
        self._keep(key, self.row(a, in_detail), in_detail)

    def _turned_away(self, key: tuple[int, int]) -> bool:
        return self.cap <= 0 or (len(self.rows) >= self.cap and key < self.rows[0][:2])

    def _in_detail(self, key: tuple[int, int]) -> bool:
        return len(self.detailed) < self.detail_cap or (
            self.detail_cap > 0 and key > self.detailed[0][:2]
        )

    def _keep(self, key: tuple[int, int], r: Row | _Gone, in_detail: bool) -> None:
        heapq.heappush(self.rows, (*key, r))
        if len(self.rows) > self.cap:
            out = heapq.heappop(self.rows)[2]
            self._hide_count(out.problem, out.listed_recompile)
        if in_detail:
            heapq.heappush(self.detailed, (*key, r))
            if len(self.detailed) > self.detail_cap:
                out = heapq.heappop(self.detailed)[2]
                if isinstance(out, Row):
                    _lighten(out)

    def merge(self, later: Pick) -> None:
        """Go on as if this pick had seen the compiles another process picked from (the ones
        after its own): each row it made is replayed in order against these caps, so the same
        rows are kept, in full or not, under the same anchors as in one pass."""
        assert later.made is not None
        self.n = later.n
        self.total += later.total
        self.hidden_problems += later.skipped[0]
        self.hidden_recompiles += later.skipped[1]
        theirs = {e[2].n: e[2] for e in later.rows if isinstance(e[2], Row)}
        for n, neg_order, base, problem, recompile in later.made:
            key = (neg_order, -n)
            r = theirs.get(n)
            if self.full:
                assert r is not None  # nothing is dropped from a full page
                r.anchor = unique(self.used, base)
                self.rows.append((*key, r))
                continue
            if self._turned_away(key):
                self._hide_count(problem, recompile)
                continue
            in_detail = self._in_detail(key)
            anchor = unique(self.used, base)  # taken even by a row dropped later, as in one pass
            if r is None:
                self._keep(key, _Gone(problem, recompile), in_detail)
                continue
            # A row the other process kept in full may lose that here; one it made light was
            # beaten by rows that are here too, and will be dropped from the detailed ones.
            r.anchor = anchor
            if r.detail and not in_detail:
                _lighten(r)
            self._keep(key, r, in_detail)

    def _hide_count(self, problem: bool, recompile: bool) -> None:
        self.hidden_problems += problem
        self.hidden_recompiles += recompile

    def row(self, a: Analysis, detail: bool) -> Row:
        c, n = a.compile, a.n
        base = "c-" + _ANCHOR_UNSAFE.sub("_", a.ref)
        anchor = unique(self.used, base)
        if self.made is not None:
            self.made.append((n, -a.problem, base, is_problem(a), a.listed_recompile))
        ph = c.phases
        li = a.at[0]
        r = Row(
            n=n,
            at=a.at,
            ref=a.ref,
            anchor=anchor,
            key=c.key,
            log=c.log,
            log_label=self.names[li],
            log_short=self.names[li] if self.short else "",
            status=c.status,
            pid=c.pid,
            function=c.function,
            file=c.file,
            where=a.where,
            sort_id=_sort_id(c, n),
            ops=c.graph_ops,
            time_s=a.took[0],
            inputs=a.inputs,
            alias_groups=a.alias_groups,
            breaks=len(a.breaks),
            reason=a.reason[:_REASON_CHARS],
            stack=tuple(self.frames.setdefault(f, f) for f in c.stack) if c.id else (),
            span=(
                min(p.start_us for p in ph),
                max([p.start_us + (p.dur_us or 0.0) for p in ph]),
            )
            if ph
            else None,
            detail=detail,
        )
        r.export_issues = [issue_view(x) for x in c.export_issues[:MAX_ROW_ISSUES]]
        r.restarts = [x.text for x in a.restarts]
        if c.status in PROBLEMS:
            r.fail_type, r.fail_where = c.fail_type, c.fail_where
            r.fail_reason = c.fail_reason if c.fail_type else None
        rc = c.recompile
        if rc is not None:
            r.recompile = recompile_view(rc, MAX_ROW_CHANGES)
            r.changes = len(rc.input_changes)
        r.recompile_reasons = a.listed_reasons
        _facts(r, a)
        r.payloads = budget_items(c, not detail)
        if detail:
            r.long_metrics = long_metrics(c)
        return r

    def done(self) -> tuple[list[Row], Budget]:
        rows = sorted((e[2] for e in self.rows if isinstance(e[2], Row)), key=lambda r: r.n)
        budget = Budget(full=self.full, compiles=self.total, hidden=self.total - len(rows))
        budget.hidden_problems = self.hidden_problems
        budget.hidden_recompiles = self.hidden_recompiles
        budget.light = sum(not r.detail for r in rows)
        return rows, budget


def _facts(r: Row, a: Analysis) -> None:
    """What a row says of its compile's time from spans, and where its failed guards were made."""
    r.time_spans = a.took[1]
    if r.listed_recompile:
        r.made = [made_at(o) for o in guard_origins(a.origins)]


def _lighten(r: Row) -> None:
    """A row pushed out of the detailed ones by a compile that matters more."""
    r.detail = False
    r.payloads = [p for p in r.payloads if p.kind == "dynamo_error"]
    r.long_metrics = []


def is_problem(a: Analysis) -> bool:
    """A compile the page lists under Failures and restarts."""
    return a.status in PROBLEMS or bool(a.earlier)


def unique(used: set[str], anchor: str) -> str:
    out, n = anchor, 1
    while out in used:
        n += 1
        out = f"{anchor}~{n}"
    used.add(out)
    return out


def _sort_id(c: Compile, n: int) -> str:
    if c.id is None:
        return f"{n:06d}:-"
    return f"{n:06d}:" + ".".join(f"{k + 1:06d}" for k in c.id.sort_key)


def log_labels(logs: list[LogIndex]) -> dict[int, str]:
    """A short name per log: its rank when ranks tell logs apart, else what differs in its name."""
    ranks = [log.rank for log in logs]
    if len(logs) > 1 and None not in ranks and len(set(ranks)) == len(ranks):
        return {id(log): f"rank {log.rank}" for log in logs}
    names = [log.name for log in logs]
    short = dict(zip(names, _distinct(sorted(set(names))), strict=False))
    out = {}
    for log in logs:
        label = short.get(log.name, log.name)
        if names.count(log.name) > 1:
            label += f" pid {log.pid}"
        if log.rank is not None:
            # Ranks that several logs share (a job run twice into one directory): the rank,
            # then which log, apart from the compile id the label is put before.
            label = f"rank {log.rank} ({label})"
        out[id(log)] = label
    return out


def _distinct(names: list[str]) -> list[str]:
    """Names without the prefix and suffix they all share (cut at a separator), if still distinct."""
    if len(names) < 2:
        return names
    pre = os.path.commonprefix(names)
    suf = os.path.commonprefix([n[::-1] for n in names])[::-1]
    pre = pre[: max((pre.rfind(ch) for ch in "_-. /"), default=-1) + 1]
    k = min((suf.find(ch) for ch in "_-. /" if ch in suf), default=len(suf))
    suf = suf[k:]
    out = [n[len(pre) : len(n) - len(suf)] for n in names]
    if all(out) and len(set(out)) == len(out):
        return out
    return names
