"""The HTML page's view model: what each part of the page shows, with the page budget applied."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import orjson

from .. import __version__
from ..model import (
    BadLine,
    Compile,
    Divergence,
    Event,
    GraphBreak,
    Input,
    LogIndex,
    Payload,
    Phase,
    Recompile,
    Report,
    StackFrame,
    StorageDesc,
    Symbol,
    TensorDesc,
)
from ..summary import Overview, break_title, compile_ref, is_recompile, overview

KiB = 1024
MiB = 1024 * KiB
# The page budget (README "HTML report"): payload text kept per payload and over the whole page.
PAYLOAD_BYTES = 64 * KiB
PAGE_PAYLOAD_BYTES = 3 * MiB
METRIC_BYTES = 64 * KiB  # a compilation_metrics value longer than this is cut
DETAIL_COMPILES = 500  # compiles shown with every detail; the rest show status, reasons, inputs
SHARED_METRIC = 200  # a metric value this long that repeats an earlier compile's is linked to it
MAX_LANE_ROWS = 8  # rows of the compile timeline per log; further overlaps share the last row

# Payloads that get the page budget first: what a reader opens to see what compiled.
_FIRST_KINDS = ("dynamo_error", "dynamo_output_graph", "dynamo_cpp_guards_str", "dynamo_guards")
_PY_KINDS = re.compile(r"graph|_code$|runnable|wrapper|forward|backward|prologue|epilogue|guards")
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/!-]")

ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
    "bits8": 1,
    "bits16": 2,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
    "float4_e2m1fn_x2": 1,
}


def itemsize(dtype: str) -> int | None:
    """Bytes per element of a logged dtype repr (`torch.float32`), None when unknown."""
    name = dtype.removeprefix("torch.")
    if name in ITEMSIZE:
        return ITEMSIZE[name]
    if name.startswith("float8"):
        return 1
    if re.fullmatch(r"u?int[1-7]", name):
        return 1
    return None


# -- small formatting helpers, used by the templates too ----------------------------------------
def nbytes(v: object) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "?" if v is None else str(v)
    x = float(v)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{int(x)} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return str(v)


def dims(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return "?" if v is None else str(v)


def seconds(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"


def ms(us: float) -> str:
    v = us / 1000
    return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"


def clock(t: str | None) -> str:
    """'MMDD HH:MM:SS.ffffff' -> 'MM-DD HH:MM:SS' (the log has no year)."""
    if not t:
        return "?"
    return f"{t[:2]}-{t[2:4]} {t[5:13]}" if len(t) >= 13 else t


def short_path(p: str | None, keep: int = 2) -> str:
    if not p:
        return ""
    parts = p.replace("\\", "/").split("/")
    return "/".join(parts[-keep:])


def frame_text(f: StackFrame) -> str:
    return f"{short_path(f.file)}:{f.line} in {f.name}"


def pct(v: float) -> str:
    return f"{max(0.0, min(100.0, v)):.3f}"


# -- view records ---------------------------------------------------------------------------------
@dataclass(slots=True)
class PayloadView:
    """One payload as the page shows it: its text within the budget, and what was cut."""

    p: Payload
    anchor: str
    log: str
    lang: str  # py | json | text
    text: str | None = None
    shown: int = 0  # bytes of text shown
    note: str | None = None  # what was cut or left out, and how to get it
    priority: int = 2

    @property
    def title(self) -> str:
        return self.p.kind

    @property
    def meta_text(self) -> str:
        if not self.p.meta:
            return ""
        return orjson.dumps(self.p.meta, default=str).decode()


@dataclass(slots=True)
class MetricView:
    name: str
    value: str
    same_as: tuple[str, str] | None = None  # (anchor, compile label) that shows the same value
    note: str | None = None

    @property
    def long(self) -> bool:
        return len(self.value) > 120 or "\n" in self.value


@dataclass(slots=True)
class Span:
    """The bytes of a storage one tensor covers: offset * itemsize to the end of its last element."""

    label: str
    detail: str
    start: int | None  # bytes; None when the span is symbolic or the dtype unknown
    end: int | None
    x: str = "0"  # percent of the storage bar
    w: str = "0"
    input: bool = True  # an input of the compile (not only its base or an inner tensor)


@dataclass(slots=True)
class StorageView:
    label: str
    size: int | str | None
    spans: list[Span] = field(default_factory=list)
    alias_group: int | None = None
    note: str | None = None


@dataclass(slots=True)
class InputView:
    i: Input
    size: str
    stride: str
    offset: str
    dtype: str
    device: str
    storage: str
    flags: str
    inner: list[tuple[str, TensorDesc]] = field(default_factory=list)


@dataclass(slots=True)
class Bar:
    """One phase (or one compile, on the page timeline) as a bar in an SVG lane."""

    name: str
    x: str
    w: str
    row: int
    tip: str
    ts: float
    dur: float | None
    status: str = ""
    href: str | None = None


@dataclass(slots=True)
class Timeline:
    bars: list[Bar]
    rows: int
    total: str
    ticks: list[tuple[str, str]] = field(default_factory=list)  # (x percent, label)
    label: str = ""


@dataclass(slots=True)
class BreakView:
    anchor: str
    title: str
    reason: str
    count: int
    where: list[tuple[str, str, int]]  # (short place, full place, count)
    compiles: list[tuple[str, str]]  # (label, anchor)


@dataclass(slots=True)
class TrieNode:
    frames: list[StackFrame]
    compiles: list[CompileView] = field(default_factory=list)
    children: list[TrieNode] = field(default_factory=list)


@dataclass(slots=True)
class CompileView:
    c: Compile
    ref: str  # compile_ref: the id, with its log when the page has several logs
    anchor: str
    log_label: str
    status: str
    log_short: str = ""  # the log's short name, when the page has several logs
    detail: bool = True  # False: beyond the page's DETAIL_COMPILES, shown without the heavy parts
    where: str = ""
    sort_id: str = ""
    reason: str = ""  # one line for the table: fail type, graph break, recompile reason
    inputs: list[InputView] = field(default_factory=list)
    storages: list[StorageView] = field(default_factory=list)
    alias_groups: int = 0
    graphs: list[PayloadView] = field(default_factory=list)
    guards: PayloadView | None = None
    artifacts: list[PayloadView] = field(default_factory=list)
    errors: list[PayloadView] = field(default_factory=list)
    metrics: list[MetricView] = field(default_factory=list)
    null_metrics: list[str] = field(default_factory=list)
    bwd_metrics: list[list[MetricView]] = field(default_factory=list)
    timeline: Timeline | None = None
    breaks: list[tuple[GraphBreak, str]] = field(default_factory=list)  # (break, its anchor)
    recompile: Recompile | None = None
    previous: tuple[str, str] | None = None  # (label, anchor) of the previous compile
    symbols: list[Symbol] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.c.key

    @property
    def label(self) -> str:
        """How the page names the compile: its id, after its log's short name if there are several."""
        return f"{self.log_short} {self.c.key}" if self.log_short else self.c.key

    @property
    def time(self) -> str:
        return seconds(self.c.compile_time_s)

    @property
    def problem(self) -> bool:
        return self.status in ("failed", "incomplete")


@dataclass(slots=True)
class LogView:
    log: LogIndex
    label: str


@dataclass(slots=True)
class Figure:
    label: str
    value: str
    status: str | None = None  # clicking the figure filters the compile table by this status
    tone: str = ""


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

    @property
    def limited(self) -> bool:
        return bool(self.cut or self.left_out or self.metrics_cut or self.light)


@dataclass(slots=True)
class Page:
    """Everything the template renders, built once from a Report."""

    title: str
    version: str
    torch_version: str | None
    logs: list[LogView]
    ranks: list[int]
    o: Overview
    figures: list[Figure]
    budget: Budget
    compiles: list[CompileView]
    trie: list[TrieNode]
    breaks: list[BreakView]
    recompiles: list[CompileView]
    problems: list[CompileView]
    divergence: list[Divergence]
    notes: list[str]
    bad_lines: list[BadLine]
    bad_total: int
    lanes: list[Timeline]
    many: bool
    statuses: list[str]
    limits: dict[str, str]


# -- building ---------------------------------------------------------------------------------------
def build(report: Report, full: bool = False) -> Page:
    """The page for a report; `full` shows every payload and metric whole."""
    o = overview(report)
    many = len({log.name for log in report.logs}) > 1
    labels = log_labels(report.logs)
    anchors: dict[tuple[str, str], str] = {}  # (log name, compile key) -> anchor
    used: set[str] = set()
    views: list[CompileView] = []
    for log in report.logs:
        for c in log.compiles:
            ref = compile_ref(c, many)
            anchor = unique(used, "c-" + _ANCHOR_UNSAFE.sub("_", ref))
            anchors.setdefault((c.log, c.key), anchor)
            views.append(
                CompileView(
                    c=c,
                    ref=ref,
                    anchor=anchor,
                    log_label=labels[id(log)],
                    status=c.status,
                    log_short=labels[id(log)] if many or len(report.logs) > 1 else "",
                    where=f"{short_path(c.file)}:{c.firstline}" if c.file else "",
                    sort_id=_sort_id(c, len(views)),
                )
            )
    by_ref = {v.ref: v for v in reversed(views)}
    breaks = break_views(o, by_ref)
    break_anchor = {b.reason: b.anchor for b in breaks}
    shared: dict[tuple[str, str], tuple[str, str]] = {}
    budget = Budget(full=full)
    payloads: list[PayloadView] = []
    if not full:
        for v in sorted(views, key=_detail_order)[DETAIL_COMPILES:]:
            v.detail = False
            budget.light += 1
    for v in views:
        fill(v, anchors, break_anchor, shared, budget, full)
        payloads += v.graphs + v.artifacts + v.errors + ([v.guards] if v.guards else [])
    plan(payloads, budget, full)
    lanes = page_timeline(report, views)
    return Page(
        title=PurePath(report.path).name or report.path,
        version=__version__,
        torch_version=report.torch_version,
        logs=[LogView(log, labels[id(log)]) for log in report.logs],
        ranks=report.ranks,
        o=o,
        figures=figures(o),
        budget=budget,
        compiles=views,
        trie=trie(views),
        breaks=breaks,
        recompiles=[
            v
            for v in views
            if v.recompile is not None or (is_recompile(v.c) and v.c.recompile_reasons)
        ],
        problems=[v for v in views if v.status in ("failed", "incomplete", "restarted")],
        divergence=list(report.divergence),
        notes=list(report.notes) + [f"{log.name}: {n}" for log in report.logs for n in log.notes],
        bad_lines=[b for log in report.logs for b in log.bad_lines],
        bad_total=sum(log.bad_count for log in report.logs),
        lanes=lanes,
        many=many,
        statuses=sorted({v.status for v in views}, key=_status_order),
        limits={
            "payload": nbytes(PAYLOAD_BYTES),
            "page": nbytes(PAGE_PAYLOAD_BYTES),
            "metric": nbytes(METRIC_BYTES),
            "compiles": str(DETAIL_COMPILES),
        },
    )


def _detail_order(v: CompileView) -> int:
    """Which compiles keep every detail when there are too many: problems first."""
    c = v.c
    if v.status in ("failed", "incomplete"):
        return 0
    if c.graph_breaks or c.restart_reasons or c.recompile is not None or c.recompile_reasons:
        return 1
    return 2


def _status_order(s: str) -> int:
    from ..model import STATUSES

    return STATUSES.index(s) if s in STATUSES else len(STATUSES)


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
            label = f"rank {log.rank} {label}"
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


def figures(o: Overview) -> list[Figure]:
    figs = [
        Figure("compiles", f"{o.compiles:,}", "*"),
        Figure("failed", f"{o.failures:,}", "failed", "failed" if o.failures else ""),
        Figure(
            "never finished",
            f"{o.incomplete:,}",
            "incomplete",
            "incomplete" if o.incomplete else "",
        ),
        Figure("graph breaks", f"{o.graph_breaks:,}", "graph_break"),
        Figure("recompiles", f"{o.recompiles:,}"),
        Figure("restarts", f"{o.restarts:,}", "restarted"),
        Figure("compile time", f"{o.compile_time_s:.2f} s"),
        Figure("cache hits", f"{o.cache.get('hit', 0):,}"),
        Figure("cache misses", f"{o.cache.get('miss', 0):,}"),
    ]
    if o.cache.get("bypass"):
        figs.append(Figure("cache bypasses", f"{o.cache['bypass']:,}"))
    figs.append(Figure("inputs", f"{o.inputs:,}"))
    figs.append(Figure("bad lines", f"{o.bad_lines:,}", None, "failed" if o.bad_lines else ""))
    return figs


def break_views(o: Overview, by_ref: dict[str, CompileView]) -> list[BreakView]:
    out = []
    for n, s in enumerate(o.breaks, 1):
        out.append(
            BreakView(
                anchor=f"gb-{n}",
                title=break_title(s.reason),
                reason=s.reason,
                count=s.count,
                where=[(short_path(w, 3), w, k) for w, k in s.where.items()],
                compiles=[
                    (by_ref[ref].label, by_ref[ref].anchor) if ref in by_ref else (ref, "")
                    for ref in s.compiles
                ],
            )
        )
    return out


def fill(
    v: CompileView,
    anchors: dict[tuple[str, str], str],
    break_anchor: dict[str, str],
    shared: dict[tuple[str, str], tuple[str, str]],
    budget: Budget,
    full: bool,
) -> None:
    """Everything one compile's section shows."""
    c = v.c
    v.inputs = [input_view(i) for i in c.inputs]
    v.alias_groups = len({i.alias_group for i in c.inputs if i.alias_group})
    v.breaks = [(g, break_anchor.get(g.reason, "")) for g in c.graph_breaks]
    v.recompile = c.recompile
    if c.recompile is not None and c.recompile.previous:
        prev = anchors.get((c.log, c.recompile.previous))
        if prev:
            v.previous = (c.recompile.previous, prev)
    priority = 0 if v.problem else 1
    kinds = [("graph", p) for p in c.graphs] + [("artifact", p) for p in c.artifacts]
    if c.guards is not None:
        kinds.append(("guards", c.guards))
    for n, (where, p) in enumerate(kinds):
        if not v.detail and p.kind != "dynamo_error":
            continue
        pv = PayloadView(p, f"{v.anchor}-p{n}", c.log, _lang(p))
        pv.priority = priority if p.kind in _FIRST_KINDS else 2
        if where == "guards":
            v.guards = pv
        elif p.kind == "dynamo_error":
            v.errors.append(pv)
        elif where == "graph":
            v.graphs.append(pv)
        else:
            v.artifacts.append(pv)
    if not v.detail:
        v.reason = _reason(c)
        return
    v.storages = storages(c)
    v.symbols = c.symbols
    v.events = c.events
    if c.metrics:
        v.metrics, v.null_metrics = metric_views(c.metrics, v, shared, budget, full)
    v.bwd_metrics = [metric_views(m, v, shared, budget, full)[0] for m in c.bwd_metrics]
    v.timeline = compile_timeline(c.phases)
    v.reason = _reason(c)


def _reason(c: Compile) -> str:
    if c.fail_type:
        lines = [ln.strip() for ln in (c.fail_reason or "").splitlines() if ln.strip()]
        return f"{c.fail_type}: {' '.join(lines[:2])}" if lines else c.fail_type
    if c.status == "incomplete":
        return "never finished: no compilation_metrics (the process stopped during this compile)"
    if c.graph_breaks:
        return "graph break: " + break_title(c.graph_breaks[0].reason)
    if c.restart_reasons:
        return "restarted: " + break_title(c.restart_reasons[0])
    if c.recompile is not None and c.recompile.reasons:
        return "recompiled: " + c.recompile.reasons[0]
    if c.recompile_reasons:
        return "recompiled: " + c.recompile_reasons[0]
    return ""


def _lang(p: Payload) -> str:
    if p.encoding == "json" or (p.text or "").lstrip()[:1] in ("{", "["):
        return "json"
    if _PY_KINDS.search(p.kind):
        return "py"
    return "text"


def plan(payloads: list[PayloadView], budget: Budget, full: bool) -> None:
    """Give payloads their share of the page budget: problems and dynamo's graphs first."""
    order = sorted(range(len(payloads)), key=lambda k: (payloads[k].priority, k))
    left = PAGE_PAYLOAD_BYTES
    for k in order:
        pv = payloads[k]
        p = pv.p
        budget.payloads += 1
        budget.total_bytes += p.bytes
        where = f"line {p.line} of {pv.log}"
        if p.text is None:
            if p.bytes:
                budget.left_out += 1
                pv.note = (
                    f"Not on this page: the reader kept no more text; it is at {where}. "
                    "`--full` keeps every payload."
                )
            continue
        text = p.text
        size = len(text.encode("utf-8", "replace"))
        cap = size if full else min(PAYLOAD_BYTES, left)
        if cap <= 0:
            budget.left_out += 1
            pv.note = (
                f"Not on this page: the page budget was spent before it; it is at {where}. "
                "`--full` keeps every payload."
            )
            continue
        if size > cap:
            text = _cut(text, cap)
        pv.text = text
        pv.shown = len(text.encode("utf-8", "replace"))
        left -= pv.shown
        budget.shown_bytes += pv.shown
        if pv.shown < p.bytes:
            budget.cut += 1
            pv.note = (
                f"Cut: showing the first {pv.text.count(chr(10)) + 1:,} of {p.lines:,} lines "
                f"({nbytes(pv.shown)} of {nbytes(p.bytes)}); the rest is at {where}. "
                + (
                    "`--full` keeps every payload whole."
                    if not full
                    else "tlview keeps at most this much of this payload."
                )
            )


def _cut(text: str, cap: int) -> str:
    data = text.encode("utf-8", "replace")[:cap]
    head = data.decode("utf-8", "ignore")
    nl = head.rfind("\n")
    return head[:nl] if nl > len(head) // 2 else head


def metric_views(
    m: dict[str, Any],
    v: CompileView,
    shared: dict[tuple[str, str], tuple[str, str]],
    budget: Budget,
    full: bool,
) -> tuple[list[MetricView], list[str]]:
    """Every field of a metrics record; long values seen in an earlier compile are linked."""
    out, nulls = [], []
    for k, val in m.items():
        if val is None:
            nulls.append(str(k))
            continue
        text = _metric_text(val)
        mv = MetricView(str(k), text)
        if len(text) >= SHARED_METRIC:
            seen = shared.get((str(k), text))
            if seen is not None and seen[0] != v.anchor:
                mv.same_as = seen
                mv.value = ""
            else:
                shared.setdefault((str(k), text), (v.anchor, v.label))
        if not full and len(mv.value) > METRIC_BYTES:
            mv.note = (
                f"Cut: {nbytes(METRIC_BYTES)} of {nbytes(len(text))} shown. "
                "`--full` shows every value whole."
            )
            mv.value = mv.value[:METRIC_BYTES]
            budget.metrics_cut += 1
        out.append(mv)
    return out, nulls


def _metric_text(v: Any) -> str:
    if isinstance(v, str):
        s = v.strip()
        if s[:1] == "{" and s[-1:] == "}" and len(s) > 120:
            try:
                return orjson.dumps(orjson.loads(s), option=orjson.OPT_INDENT_2).decode()
            except orjson.JSONDecodeError:
                return v
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "\n".join(v)
    return orjson.dumps(v, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


# -- inputs and the aliasing picture --------------------------------------------------------------
def flags(i: Input) -> str:
    t = i.tensor
    out = []
    if t.flag("is_parameter"):
        out.append("param")
    if t.flag("requires_grad"):
        out.append("grad")
    if not t.flag("is_leaf") and t.fields:
        out.append("non-leaf")
    if t.flag("is_view"):
        out.append("view")
    if i.grad is not None:
        out.append(".grad")
    if t.type_name:
        out.append(t.type_name.rsplit(".", 1)[-1])
    if t.get("layout") != "torch.strided":
        out.append(str(t.get("layout")).replace("torch.", ""))
    for name in ("is_conj", "is_neg", "is_inference", "is_functional", "is_nested"):
        if t.flag(name):
            out.append(name.removeprefix("is_"))
    if i.superseded:
        out.append("superseded")
    return " ".join(out)


def input_view(i: Input) -> InputView:
    t = i.tensor
    st = i.storage
    return InputView(
        i=i,
        size=dims(t.size),
        stride=dims(t.stride),
        offset=str(t.storage_offset),
        dtype=t.dtype.replace("torch.", ""),
        device=t.device,
        storage="" if st is None else nbytes(st.size),
        flags=flags(i),
        inner=list(i.inner.items()),
    )


def span(t: TensorDesc) -> tuple[int | None, int | None]:
    """Bytes [start, end) of its storage a tensor covers, or (None, None) when symbolic."""
    size, stride, off = t.size, t.stride, t.storage_offset
    isz = itemsize(t.dtype)
    if isz is None or size is None or stride is None or len(size) != len(stride):
        return None, None
    sizes = [d for d in size if isinstance(d, int)]
    strides = [d for d in stride if isinstance(d, int)]
    if not isinstance(off, int) or len(sizes) != len(size) or len(strides) != len(stride):
        return None, None
    if 0 in sizes:
        return off * isz, off * isz
    lo = hi = off
    for d, s in zip(sizes, strides, strict=True):
        step = (d - 1) * s
        if step < 0:
            lo += step
        else:
            hi += step
    return lo * isz, (hi + 1) * isz


def _span_text(t: TensorDesc, start: int | None, end: int | None) -> str:
    shape = f"{dims(t.size)} stride {dims(t.stride)} offset {t.storage_offset} {t.dtype.replace('torch.', '')}"
    if start is None or end is None:
        return f"{shape}: span not computable (symbolic or unknown dtype)"
    return f"{shape}: bytes {start:,} to {end:,}"


def storages(c: Compile) -> list[StorageView]:
    """Each storage under the compile's inputs, with the span each tensor on it covers."""
    by_key: dict[str, StorageView] = {}
    seen: set[tuple[str, int]] = set()
    described: dict[tuple[int, int], StorageDesc] = {}
    for s in c.input_sets:
        for sid, sd in s.storages.items():
            described[(s.describer, sid)] = sd

    def add(t: TensorDesc, describer: int, label: str, is_input: bool, group: int | None) -> None:
        if t.storage is None:
            return
        key = f"{describer}:{t.storage}"
        if (key, t.id) in seen:
            return
        seen.add((key, t.id))
        sv = by_key.get(key)
        if sv is None:
            sd = described.get((describer, t.storage))
            sv = by_key[key] = StorageView(
                label=f"storage {t.storage}", size=None if sd is None else sd.size
            )
        if group:
            sv.alias_group = group
        start, end = span(t)
        sv.spans.append(Span(label, _span_text(t, start, end), start, end, input=is_input))

    for i in c.inputs:
        add(i.tensor, i.describer, i.source, True, i.alias_group)
    for i in c.inputs:
        if i.base is not None:
            add(i.base, i.describer, f"base of {i.source}", False, None)
        for name, t in i.inner.items():
            add(t, i.describer, f"{i.source}.{name}", False, None)
    out = list(by_key.values())
    for sv in out:
        _scale(sv)
    out.sort(key=lambda s: (s.alias_group is None, s.alias_group or 0))
    return out


def _scale(sv: StorageView) -> None:
    ends = [s.end for s in sv.spans if s.end is not None]
    size = sv.size if isinstance(sv.size, int) and not isinstance(sv.size, bool) else None
    total = size or max(ends, default=0)
    if size is not None and ends and max(ends) > size:
        sv.note = f"tensors reach byte {max(ends):,} of a {size:,}-byte storage" + (
            " (resized to zero, as FSDP does)" if size == 0 else ""
        )
        total = max(ends)
    elif isinstance(sv.size, str):
        sv.note = f"symbolic storage size {sv.size}; drawn to the furthest tensor"
    for s in sv.spans:
        if s.start is None or s.end is None or total <= 0:
            s.x, s.w = "0", "0"
            continue
        s.x = pct(100 * s.start / total)
        s.w = pct(max(0.4, 100 * (s.end - s.start) / total))


# -- timelines -----------------------------------------------------------------------------------------
def compile_timeline(phases: list[Phase]) -> Timeline | None:
    """The phases of one compile as bars, one row per nesting depth."""
    if not phases:
        return None
    t0 = min(p.start_us for p in phases)
    ends = [p.start_us + p.dur_us for p in phases if p.dur_us is not None]
    t1 = max(ends + [p.start_us for p in phases])
    total = max(t1 - t0, 1.0)
    depths = sorted({p.depth for p in phases})
    row_of = {d: k for k, d in enumerate(depths)}
    bars = []
    for p in sorted(phases, key=lambda p: (p.depth, p.start_us)):
        dur = p.dur_us if p.dur_us is not None else t1 - p.start_us
        tip = f"{p.name}: {ms(dur)} at +{ms(p.start_us - t0)}"
        if p.dur_us is None:
            tip += " (began and never ended)"
        bars.append(
            Bar(
                name=p.name,
                x=pct(100 * (p.start_us - t0) / total),
                w=pct(max(0.2, 100 * dur / total)),
                row=row_of[p.depth],
                tip=tip,
                ts=p.start_us,
                dur=p.dur_us,
                status="" if p.dur_us is not None else "open",
            )
        )
    return Timeline(bars, len(depths), ms(total), ticks(total))


def ticks(total_us: float, n: int = 4) -> list[tuple[str, str]]:
    return [(pct(100 * k / n), ms(total_us * k / n)) for k in range(1, n)]


def page_timeline(report: Report, views: list[CompileView]) -> list[Timeline]:
    """One lane per log: each compile as a bar from its first phase to its last."""
    by_log: dict[str, list[tuple[float, float, CompileView]]] = {}
    lane_logs: dict[str, str] = {}
    for v in views:
        ph = v.c.phases
        if not ph:
            continue
        start = min(p.start_us for p in ph)
        end = max([p.start_us + (p.dur_us or 0.0) for p in ph])
        key = f"{v.c.log}#{v.c.pid}"
        by_log.setdefault(key, []).append((start, end, v))
        lane_logs[key] = v.log_label
    if not by_log:
        return []
    longest = max(
        max(e for _, e, _ in spans) - min(s for s, _, _ in spans) for spans in by_log.values()
    )
    longest = max(longest, 1.0)
    lanes = []
    for key, spans in by_log.items():
        t0 = min(s for s, _, _ in spans)
        rows: list[float] = []
        bars = []
        for start, end, v in sorted(spans, key=lambda x: x[0]):
            row = next((k for k, r in enumerate(rows) if r <= start), None)
            if row is None:
                if len(rows) < MAX_LANE_ROWS:
                    rows.append(end)
                    row = len(rows) - 1
                else:
                    row = len(rows) - 1
            rows[row] = max(rows[row], end)
            bars.append(
                Bar(
                    name=v.c.key,
                    x=pct(100 * (start - t0) / longest),
                    w=pct(max(0.3, 100 * (end - start) / longest)),
                    row=row,
                    tip=f"{v.label} {v.c.function or ''} [{v.status}]: "
                    f"{ms(end - start)} at +{ms(start - t0)}",
                    ts=start,
                    dur=end - start,
                    status=v.status,
                    href=v.anchor,
                )
            )
        lanes.append(Timeline(bars, max(1, len(rows)), ms(longest), ticks(longest), lane_logs[key]))
    return lanes


# -- the compile stack trie ----------------------------------------------------------------------------
def trie(views: Iterable[CompileView]) -> list[TrieNode]:
    """The user stacks that triggered compiles, common prefixes merged, as tlparse shows them."""
    root = TrieNode([])
    index: dict[int, dict[tuple[str, int, str], TrieNode]] = {}
    nostack = TrieNode([])
    for v in views:
        if v.c.id is None:
            continue
        if not v.c.stack:
            nostack.compiles.append(v)
            continue
        node = root
        for f in v.c.stack:
            kids = index.setdefault(id(node), {})
            k = (f.file, f.line, f.name)
            nxt = kids.get(k)
            if nxt is None:
                nxt = kids[k] = TrieNode([f])
                node.children.append(nxt)
            node = nxt
        node.compiles.append(v)
    out = [_squash(n) for n in root.children]
    if nostack.compiles:
        out.append(nostack)
    return out


def _squash(node: TrieNode) -> TrieNode:
    """Merge chains of single-child frames into one node, so the tree branches only where stacks do."""
    while len(node.children) == 1 and not node.compiles:
        child = node.children[0]
        node.frames.extend(child.frames)
        node.compiles = child.compiles
        node.children = child.children
    node.children = [_squash(n) for n in node.children]
    return node
