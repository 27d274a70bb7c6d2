"""Each payload's share of the page budget, and the payload as its section shows it."""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from dataclasses import dataclass, field
from types import ModuleType

from tlview.analyze.names import listed_artifacts
from tlview.dumps import dumps
from tlview.index.kinds import INDUCTOR_KINDS, PAYLOAD_OPTIONAL
from tlview.inert import command
from tlview.model import Compile, Payload, Report
from tlview.render.html import budget as kept
from tlview.render.html.metrics import METRIC_BYTES
from tlview.render.html.rows import BudgetItem, Row
from tlview.units import nbytes

META_CHARS = 4000  # of a payload's metadata its summary shows (`--format json` has all of it)
PLAIN_BYTES = 2 * kept.KiB  # payloads up to this long are written as text, longer ones packed
MIN_CUT = 64 * kept.KiB  # a payload is cut to what budget is left only if this much is left
MAX_LISTED = 1000  # payloads left out that the page lists one by one (the rest are counted)
GZIP_LEVEL = 6  # zlib's, when ISA-L is not installed
ISAL_LEVEL = 2  # of ISA-L's 0-3: on inductor's code about 100x zlib 6's speed, 18% more bytes
_PY_KINDS = re.compile(r"graph|_code$|runnable|wrapper|forward|backward|prologue|epilogue|guards")
# The compiles whose payloads the page keeps first, in this order (docs/html.md).
COMPILE_TIERS = ("failed", "recompiled, restarted or broken", "slowest", "inductor", "other")


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
    text: str | None = None  # shown as it is (short payloads, errors)
    packed: str | None = None  # gzip, in base64: the page's script shows it when opened
    same: str | None = None  # the id of an equal payload's code, whose packed text it shows
    shown: int = 0  # bytes of text shown
    absent: str | None = None  # why torch logged the record without a payload
    note: str | None = None  # what was cut or left out, and how to get it
    subgraph: str | None = None  # the region of regional inductor it is of

    @property
    def on_page(self) -> bool:
        return self.text is not None or self.packed is not None or self.same is not None


@dataclass(slots=True)
class Missing:
    """A payload the page leaves out, as the page's list of them shows it."""

    label: str  # its compile, as the page names it
    anchor: str  # the payload's place in its compile's section
    ref: str  # its compile, as `tlview show --compile-id` takes it
    name: str  # the artifact, as `tlview show` takes it
    bytes: int
    line: int  # of its compile's log
    why: str  # what left it out: reading (no more text kept) or the page budget


@dataclass(slots=True)
class Budget:
    full: bool
    payloads: int = 0
    cut: int = 0  # payloads shown in part
    left_out: int = 0  # payloads not shown at all
    light: int = 0  # compiles shown without stack, graphs, metrics, timeline (DETAIL_COMPILES)
    shown_bytes: int = 0
    total_bytes: int = 0
    same: int = 0  # payloads shown by the compressed text of an equal one
    metrics_cut: int = 0
    compiles: int = 0  # compiles in the report (records outside any compile included)
    hidden: int = 0  # compiles beyond PAGE_COMPILES: no row, no section
    hidden_problems: int = 0  # of them failed, unfinished or restarted
    hidden_recompiles: int = 0  # of them recompiles
    only: str | None = None  # --compile-id: the page shows this compile alone, whole
    missing: list[Missing] = field(default_factory=list)  # the first MAX_LISTED left out
    missing_bytes: int = 0  # of all left out
    missing_by_tier: list[int] = field(default_factory=lambda: [0] * len(COMPILE_TIERS))

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
    names = {id(p): n for n, p in listed_artifacts(c)}
    out = []
    for pos, (where, p) in enumerate(section_payloads(c)):
        if errors_only and p.kind != "dynamo_error":
            continue
        tier = 0 if p.kind == "dynamo_error" else 1 if where in ("graph", "guards") else 2
        size = None if p.text is None else _utf8_len(p.text)
        digest = _digest(p.text) if p.text is not None and not p.cut else None
        out.append(BudgetItem(pos, p.kind, names[id(p)], tier, p.bytes, size, digest, p.line))
    return out


def _digest(text: str) -> bytes:
    """What identifies a payload's text on the page: a hash tlview computes of it (BLAKE2b,
    256 bits), never the md5 the log claims, which a log can forge or make collide."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=32).digest() + len(data).to_bytes(8, "little")


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "replace"))


def compile_tier(r: Row, slowest: set[str]) -> int:
    """Which of COMPILE_TIERS a compile is in: what a reader opens the page for comes first."""
    if r.problem:
        return 0
    if r.status in ("restarted", "graph_break") or r.listed_recompile:
        return 1
    if r.ref in slowest:
        return 2
    if any(INDUCTOR_KINDS.match(pl.kind) for pl in r.payloads):
        return 3
    return 4


def _deflate() -> tuple[ModuleType, int]:
    """The compressor the page's payloads are packed with, chosen once: ISA-L (`isal`, a
    dependency where it has wheels) when it imports, else zlib. Both write standard gzip
    streams, which the page's script reads alike."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib, GZIP_LEVEL
    return isal_zlib, ISAL_LEVEL


DEFLATE, LEVEL = _deflate()


def pack(text: str) -> str:
    """Text as the page holds it: gzip (no timestamp: the same page for the same log), base64."""
    z = DEFLATE.compressobj(LEVEL, DEFLATE.DEFLATED, 31)  # 31: the gzip format
    data = z.compress(text.encode("utf-8", "replace")) + z.flush()
    return base64.b64encode(data).decode("ascii")


def payload_view(
    p: Payload, pl: BudgetItem, anchor: str, log: str, full: bool, ref: str
) -> PayloadView:
    """A payload with the text the plan gave it, and a note for whatever it could not show."""
    pv = PayloadView(p.kind, p.line, p.lines, p.bytes, p.ok, anchor, log, _lang(p))
    pv.subgraph = p.subgraph
    if p.absent:
        pv.absent = PAYLOAD_OPTIONAL.get(p.kind, "torch wrote this record without one")
    if p.meta:
        meta = dumps(p.meta, default=str).decode()
        pv.meta, pv.meta_more = meta[:META_CHARS], max(0, len(meta) - META_CHARS)
    where = f"line {p.line} of {log}"
    show = f"`{command('tlview', 'show', 'PATH', '--compile-id', ref, pl.name)}` writes it whole"
    if pl.state == "reader":
        pv.note = (
            f"Not on this page: reading kept no more text ({nbytes(kept.READ_BYTES)} a job, "
            "shared by its logs); "
            f"it is at {where}. {show}; `--full` keeps every payload."
        )
    elif pl.state == "spent":
        pv.note = (
            f"Not on this page: the page budget went to the compiles a reader opens first; it "
            f"is at {where}. {show}; `--full` keeps every payload."
        )
    elif pl.state in ("whole", "cut"):
        text = p.text if pl.state == "whole" else pl.text
        assert text is not None
        if pl.same is not None:
            pv.same = pl.same
        elif len(text) <= PLAIN_BYTES or p.kind == "dynamo_error":
            pv.text = text
        else:
            pv.packed = pack(text)
        pv.shown = pl.shown
        if pl.shown < p.bytes:
            pv.note = (
                f"Cut: showing the first {text.count(chr(10)) + 1:,} of {p.lines:,} lines "
                f"({nbytes(pv.shown)} of {nbytes(p.bytes)}); the rest is at {where}. {show}"
                + ("; `--full` keeps every payload whole." if not full else ".")
            )
    return pv


_NOT_SPACE = re.compile(r"\S")


def _lang(p: Payload) -> str:
    m = _NOT_SPACE.search(p.text or "")
    if p.encoding == "json" or (m is not None and m.group() in ("{", "[")):
        return "json"
    if p.meta and p.meta.get("type") == "cpp":
        return "text"  # AOTInductor's C++: Python's colours would mislead
    if _PY_KINDS.search(p.kind):
        return "py"
    return "text"


def share_budget(
    report: Report, rows: list[Row], budget: Budget, full: bool, slowest: set[str]
) -> None:
    """Give payloads their share of the page budget: the graphs and code of failed, recompiled,
    slowest and inductor compiles first, then their other artifacts, then the rest's; a payload
    equal to one already given its share (same md5) shows that one's text, for nothing."""
    tiers = [compile_tier(r, slowest) for r in rows]
    payloads = [(ri, pl) for ri, r in enumerate(rows) for pl in r.payloads]
    order = sorted(
        range(len(payloads)),
        key=lambda k: (
            payloads[k][1].tier == 2,
            tiers[payloads[k][0]],
            payloads[k][1].tier,
            k,
        ),
    )
    share = _Share(report, budget, full, kept.PAGE_PAYLOAD_BYTES)
    for k in order:
        ri, pl = payloads[k]
        share.give(rows[ri], pl, tiers[ri])
    if not full:  # a full page shows every metric value whole
        _count_cut_metrics(rows, budget)


@dataclass(slots=True)
class _Share:
    """The page budget as it is given out, payload by payload, in `share_budget`'s order."""

    report: Report
    budget: Budget
    full: bool
    left: int  # bytes of text the page may still show
    holders: dict[bytes, str] = field(default_factory=dict)  # digest -> anchor with its text

    def give(self, r: Row, pl: BudgetItem, tier: int) -> None:
        budget = self.budget
        budget.payloads += 1
        budget.total_bytes += pl.bytes
        if pl.size is None:
            if pl.bytes:
                _leave_out(budget, r, pl, "reader", tier)
            else:
                pl.state = "none"  # torch wrote it without a payload, or an empty one
            return
        holder = self.holders.get(pl.digest) if pl.digest is not None else None
        if holder is not None:
            pl.state, pl.shown, pl.same = "whole", pl.size, holder
            budget.same += 1
            budget.shown_bytes += pl.shown
            return
        cap = pl.size if self.full else min(kept.PAYLOAD_BYTES, self.left)
        if pl.size > cap and (cap < MIN_CUT or pl.size <= kept.PAYLOAD_BYTES) and not self.full:
            _leave_out(budget, r, pl, "spent", tier)
            return
        self._show(r, pl, cap)

    def _show(self, r: Row, pl: BudgetItem, cap: int) -> None:
        """Show the payload whole, or its first CAP bytes."""
        assert pl.size is not None
        if pl.size > cap:
            pl.state = "cut"
            pl.text = _cut(_text_of(self.report, r, pl), cap)
            pl.shown = _utf8_len(pl.text)
        else:
            pl.state = "whole"
            pl.shown = pl.size
            if pl.digest is not None and pl.size > PLAIN_BYTES and pl.kind != "dynamo_error":
                self.holders[pl.digest] = f"{r.anchor}-p{pl.pos}-z"
        self.left -= pl.shown
        self.budget.shown_bytes += pl.shown
        if pl.shown < pl.bytes:
            self.budget.cut += 1


def _count_cut_metrics(rows: list[Row], budget: Budget) -> None:
    """Long metric values cut on the page, each counted once where it is first shown."""
    seen: dict[tuple[str, bytes], str] = {}
    for r in rows:
        for name, d, n in r.long_metrics:
            if n > METRIC_BYTES and seen.setdefault((name, d), r.anchor) == r.anchor:
                budget.metrics_cut += 1


def _leave_out(budget: Budget, r: Row, pl: BudgetItem, why: str, tier: int) -> None:
    pl.state = why
    budget.left_out += 1
    budget.missing_bytes += pl.bytes
    budget.missing_by_tier[tier] += 1
    if len(budget.missing) < MAX_LISTED:
        budget.missing.append(
            Missing(
                r.label,
                f"{r.anchor}-p{pl.pos}",
                r.ref,
                pl.name,
                pl.bytes,
                pl.line,
                "reading" if why == "reader" else "the page budget",
            )
        )


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
