"""The page's vLLM section: each compile call's config and its pieces by range and size, and a
job's calls rank by rank, linked to the compiles' sections; as bounded as the rest of the page.
page.py imports it only for a report with vLLM's calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tlview.analyze.vllm import RankRow, VllmCall, VllmPiece, VllmReport, config_facts
from tlview.units import count, seconds

MAX_CALLS = 20  # calls shown in full (the rest: --format json)
MAX_PIECES = 200  # piece compiles listed per call
MAX_RANK_ROWS = 256  # rows of the ranks table
MAX_ITEMS = 32  # items of a config list
MAX_CONFIG = 32  # config fields listed per call

Anchors = dict[tuple[str, str], str]  # (log, compile key) -> its section on the page


class PieceRow(NamedTuple):
    """A piece compile in its call's table."""

    label: str  # its range or size, on the first row of the range ("" after)
    capture: bool  # the range is a cudagraph capture size
    submod: str
    place: str  # `1/2`: its place among the call's compiled pieces
    compile: str
    anchor: str  # its compile's section ("" when not on the page)
    time: str
    cache: list[tuple[str, str]]  # (cache, hit | miss | bypass)
    passes: int  # graphs vLLM's passes left in its compile


@dataclass(slots=True)
class CallView:
    """One compile call: its title, config, graphs and pieces."""

    title: str
    prefix: str
    log: str
    event: str
    compile: str
    anchor: str
    config: list[tuple[str, str]]
    config_left: int
    graphs: list[str]  # its split graph and pattern graphs, as `tlview show` names them
    figures: str  # `2 pieces, 4 compiles, 4 FX graph cache hits, 1.2 s`
    rows: list[PieceRow] = field(default_factory=list)
    rows_left: int = 0


class RankView(NamedTuple):
    """One rank's figures for one call."""

    call: str  # `1` on the first row of a call ("" after)
    prefix: str
    rank: str
    pieces: int
    compiles: int
    hits: int
    time: str
    differs: str


@dataclass(slots=True)
class VllmView:
    """The section: a headline, the ranks side by side, the calls shown in full."""

    headline: str
    calls: list[CallView]
    calls_left: int
    alike: bool  # the calls left out are other ranks' alike those shown
    ranks: list[RankView]
    ranks_left: int


def listed(items: list[str], most: int = MAX_ITEMS) -> str:
    shown = ", ".join(items[:most])
    return shown + (f", ... {len(items) - most} more" if len(items) > most else "")


def log_name(call: VllmCall) -> str:
    return f"rank {call.rank}" if call.rank is not None else call.log


def vllm_view(v: VllmReport | None, anchors: Anchors) -> VllmView | None:
    """The section for a report's calls (None: vLLM wrote no records)."""
    if v is None:
        return None
    head = f"{count(len(v.calls), 'compile call')}, {count(v.compiles, 'piece compile')}"
    shown = v.distinct()
    calls = [call_view(c, anchors) for c in shown[:MAX_CALLS]]
    rows = rank_views(v.ranks)
    return VllmView(
        f"{head}, {v.hits} FX graph cache hits",
        calls,
        len(v.calls) - len(calls),
        len(shown) <= MAX_CALLS,
        rows[:MAX_RANK_ROWS],
        max(0, len(rows) - MAX_RANK_ROWS),
    )


def call_view(call: VllmCall, anchors: Anchors) -> CallView:
    facts = config_facts(call.config) if call.config is not None else []
    graphs = ([call.split_graph] if call.split_graph else []) + call.patterns
    took = f", {seconds(call.seconds)}" if call.seconds is not None else ""
    figures = (
        f"{count(len(call.submods), 'piece')}, {count(call.compiles, 'compile')}, "
        f"{call.hits} FX graph cache hits{took}"
    )
    view = CallView(
        f"call {call.index + 1} of {log_name(call)}",
        call.prefix or "",
        call.log,
        call.event or "",
        call.ref or "",
        anchors.get((call.log, call.compile or ""), ""),
        [(label, listed(values)) for label, values in facts[:MAX_CONFIG]],
        max(0, len(facts) - MAX_CONFIG),
        graphs[:MAX_ITEMS],
        figures,
    )
    view.rows = piece_rows(call, anchors)
    view.rows_left = call.compiles - len(view.rows)
    return view


def piece_rows(call: VllmCall, anchors: Anchors) -> list[PieceRow]:
    """The call's piece compiles by range or size, the first MAX_PIECES of them."""
    out: list[PieceRow] = []
    for g in call.by_range():
        for k, p in enumerate(g.pieces):
            if len(out) == MAX_PIECES:
                return out
            out.append(piece_row(g.label if k == 0 else "", g.capture_size, p, call.log, anchors))
    return out


def piece_row(label: str, capture: bool, p: VllmPiece, log: str, anchors: Anchors) -> PieceRow:
    place = "" if p.index is None else f"{p.index + 1}" + (f"/{p.total}" if p.total else "")
    took = seconds(p.seconds) + (f" ({p.seconds_from})" if p.seconds_from else "")
    return PieceRow(
        label,
        capture,
        p.submod,
        place,
        p.ref or p.compile,
        anchors.get((log, p.compile), ""),
        took,
        list(p.cache.items()),
        len(p.pass_graphs),
    )


def rank_views(rows: list[RankRow]) -> list[RankView]:
    out = []
    for r in rows:
        for k, x in enumerate(r.cells):
            first = k == 0
            out.append(
                RankView(
                    str(r.index + 1) if first else "",
                    (r.prefix or "") if first else "",
                    "" if x.rank is None else str(x.rank),
                    x.pieces,
                    x.compiles,
                    x.hits,
                    seconds(x.seconds),
                    ", ".join(r.differs) if first else "",
                )
            )
    return out
