"""Each payload's share of the page budget, and the payload as its section shows it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tlview.dumps import dumps
from tlview.model import Compile, Payload, Report
from tlview.render.html import budget as kept
from tlview.render.html.metrics import METRIC_BYTES
from tlview.render.html.rows import BudgetItem, Row
from tlview.units import nbytes

META_CHARS = 4000  # of a payload's metadata its summary shows (`--format json` has all of it)
# Payloads that get the page budget first: what a reader opens to see what compiled.
_FIRST_KINDS = ("dynamo_error", "dynamo_output_graph", "dynamo_cpp_guards_str", "dynamo_guards")
_PY_KINDS = re.compile(r"graph|_code$|runnable|wrapper|forward|backward|prologue|epilogue|guards")


@dataclass(slots=True)
class PayloadView:
    """One payload as the page shows it: its text within the budget, and what was cut."""

    kind: str
    line: int
    lines: int
    bytes: int
    ok: bool  # its md5 matched (or there was none to check)
    anchor: str
    log: str
    lang: str  # py | json | text
    meta: str = ""  # its metadata as JSON, the first META_CHARS characters of it
    meta_more: int = 0  # characters of the metadata past those
    text: str | None = None
    shown: int = 0  # bytes of text shown
    note: str | None = None  # what was cut or left out, and how to get it


@dataclass(slots=True)
class Budget:
    full: bool
    payloads: int = 0
    cut: int = 0  # payloads shown in part
    left_out: int = 0  # payloads not shown at all
    light: int = 0  # compiles shown without stack, graphs, metrics, timeline (DETAIL_COMPILES)
    shown_bytes: int = 0
    total_bytes: int = 0
    metrics_cut: int = 0
    compiles: int = 0  # compiles in the report (records outside any compile included)
    hidden: int = 0  # compiles beyond PAGE_COMPILES: no row, no section
    hidden_problems: int = 0  # of them failed, unfinished or restarted
    hidden_recompiles: int = 0  # of them recompiles
    only: str | None = None  # --compile-id: the page shows this compile alone, whole

    @property
    def limited(self) -> bool:
        cut = self.cut or self.left_out or self.metrics_cut or self.light
        return bool(cut or self.hidden and self.only is None)


def section_payloads(c: Compile) -> list[tuple[str, Payload]]:
    """A compile's payloads in the order its section shows them, with where each goes."""
    kinds = [("graph", p) for p in c.graphs] + [("artifact", p) for p in c.artifacts]
    return kinds + [("guards", p) for p in c.guards]


def budget_items(c: Compile, errors_only: bool) -> list[BudgetItem]:
    """What the budget needs of the payloads a compile's section shows (light: its errors)."""
    problem = c.status in ("failed", "incomplete")
    out = []
    for pos, (_, p) in enumerate(section_payloads(c)):
        if errors_only and p.kind != "dynamo_error":
            continue
        first = p.kind in _FIRST_KINDS
        size = None if p.text is None else _utf8_len(p.text)
        out.append(BudgetItem(pos, p.kind, (0 if problem else 1) if first else 2, p.bytes, size))
    return out


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "replace"))


def payload_view(p: Payload, pl: BudgetItem, anchor: str, log: str, full: bool) -> PayloadView:
    """A payload with the text the plan gave it, and a note for whatever it could not show."""
    pv = PayloadView(p.kind, p.line, p.lines, p.bytes, p.ok, anchor, log, _lang(p))
    if p.meta:
        meta = dumps(p.meta, default=str).decode()
        pv.meta, pv.meta_more = meta[:META_CHARS], max(0, len(meta) - META_CHARS)
    where = f"line {p.line} of {log}"
    if pl.state == "reader":
        pv.note = (
            f"Not on this page: the reader kept no more text; it is at {where}. "
            "`--full` keeps every payload."
        )
    elif pl.state == "spent":
        pv.note = (
            f"Not on this page: the page budget was spent before it; it is at {where}. "
            "`--full` keeps every payload."
        )
    elif pl.state in ("whole", "cut"):
        pv.text = p.text if pl.state == "whole" else pl.text
        pv.shown = pl.shown
        if pl.shown < p.bytes and pv.text is not None:
            pv.note = (
                f"Cut: showing the first {pv.text.count(chr(10)) + 1:,} of {p.lines:,} lines "
                f"({nbytes(pv.shown)} of {nbytes(p.bytes)}); the rest is at {where}. "
                + (
                    "`--full` keeps every payload whole."
                    if not full
                    else "tlview keeps at most this much of this payload."
                )
            )
    return pv


_NOT_SPACE = re.compile(r"\S")


def _lang(p: Payload) -> str:
    m = _NOT_SPACE.search(p.text or "")
    if p.encoding == "json" or (m is not None and m.group() in ("{", "[")):
        return "json"
    if _PY_KINDS.search(p.kind):
        return "py"
    return "text"


def share_budget(report: Report, rows: list[Row], budget: Budget, full: bool) -> None:
    """Give payloads their share of the page budget: problems and dynamo's graphs first."""
    payloads = [(r, pl) for r in rows for pl in r.payloads]
    order = sorted(range(len(payloads)), key=lambda k: (payloads[k][1].priority, k))
    left = kept.PAGE_PAYLOAD_BYTES
    for k in order:
        r, pl = payloads[k]
        budget.payloads += 1
        budget.total_bytes += pl.bytes
        if pl.size is None:
            if pl.bytes:
                budget.left_out += 1
                pl.state = "reader"
            continue
        cap = pl.size if full else min(kept.PAYLOAD_BYTES, left)
        if cap <= 0 and pl.size:
            budget.left_out += 1
            pl.state = "spent"
            continue
        if pl.size > cap:
            pl.state = "cut"
            pl.text = _cut(_text_of(report, r, pl), cap)
            pl.shown = _utf8_len(pl.text)
        else:
            pl.state = "whole"
            pl.shown = pl.size
        left -= pl.shown
        budget.shown_bytes += pl.shown
        if pl.shown < pl.bytes:
            budget.cut += 1
    if full:
        return  # every metric value is shown whole
    seen: dict[tuple[str, bytes], str] = {}
    for r in rows:
        for name, d, n in r.long_metrics:
            if n > METRIC_BYTES and seen.setdefault((name, d), r.anchor) == r.anchor:
                budget.metrics_cut += 1


def _text_of(report: Report, r: Row, pl: BudgetItem) -> str:
    """The kept text of a payload the page cuts: its compile is read once more, for it alone."""
    li, k = r.at
    p = section_payloads(report.logs[li].compiles[k])[pl.pos][1]
    assert p.text is not None and p.kind == pl.kind
    return p.text


def _cut(text: str, cap: int) -> str:
    data = text.encode("utf-8", "replace")[:cap]
    head = data.decode("utf-8", "ignore")
    nl = head.rfind("\n")
    return head[:nl] if nl > len(head) // 2 else head
