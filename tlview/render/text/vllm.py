"""vLLM's compile calls on the terminal: each call's config in a few lines and its pieces by
range and size; a job's calls rank by rank. Every line begins with tlview's own words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from tlview.inert import command
from tlview.render.text.console import T, table
from tlview.render.text.tables import footnote
from tlview.units import count, seconds

if TYPE_CHECKING:  # analyze/vllm.py is imported only for a log with vLLM's records
    from tlview.analyze.vllm import RankRow, VllmCall, VllmPiece, VllmReport

MAX_CALLS = 8  # calls shown in full (the rest: --format json)
MAX_PIECES = 40  # piece compiles listed per call
MAX_RANK_ROWS = 64  # rows of the ranks table
MAX_ITEMS = 8  # items of a config list on its line
MAX_CONFIG = 16  # config fields listed per call


def flat(s: object, most: int = 200) -> str:
    """Log text for a line of its own: on one line, cut to MOST characters."""
    text = " ".join(str(s).split())
    return text if len(text) <= most else text[: most - 3] + "..."


def listed(items: list[str], most: int = MAX_ITEMS) -> str:
    """Items joined, at most MOST of them, then how many more."""
    shown = ", ".join(flat(x, 80) for x in items[:most])
    return shown + (f", ... {len(items) - most} more" if len(items) > most else "")


def vllm(v: VllmReport | None, console: Console) -> None:
    """The vLLM section: a headline, a job's ranks side by side, then each call."""
    if v is None:
        return
    head = f"vLLM: {count(len(v.calls), 'compile call')}, {count(v.compiles, 'piece compile')}"
    console.print(T(f"{head}, {v.hits} FX graph cache hits", "bold"))
    if v.ranks:
        ranks(v.ranks, console)
    shown = v.distinct()
    for call in shown[:MAX_CALLS]:
        one_call(call, console)
    left = len(v.calls) - min(len(shown), MAX_CALLS)
    if left:
        alike = (
            f" (of other ranks, alike {log_name(shown[0])}'s)" if len(shown) <= MAX_CALLS else ""
        )
        footnote(f"... {count(left, 'more vLLM call')}{alike}: --format json lists them", console)


def call_title(call: VllmCall) -> str:
    """`call 1 of LOG: backbone, compile 0/0, fresh_compile`."""
    facts = [flat(call.prefix or "no prefix logged", 80)]
    if call.ref is not None:
        facts.append(f"compile {call.ref}")
    if call.event:
        facts.append(flat(call.event, 40))
    return f"call {call.index + 1} of {log_name(call)}: " + ", ".join(facts)


def log_name(call: VllmCall) -> str:
    """A call's log: `rank 1` when its log says its rank, else the log's file name."""
    return f"rank {call.rank}" if call.rank is not None else flat(call.log, 80)


def config_lines(call: VllmCall, width: int) -> list[str]:
    """The call's config in a few lines: `label: value` items, ` | ` between, fit to WIDTH."""
    if call.config is None:
        return ["  config: not logged"]
    from tlview.analyze.vllm import config_facts

    facts = config_facts(call.config)
    items = [f"{label}: {listed(values)}" for label, values in facts[:MAX_CONFIG]]
    if len(facts) > MAX_CONFIG:
        items.append(f"... {len(facts) - MAX_CONFIG} more fields (--format json)")
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 3 + len(item) <= width:
            lines[-1] += " | " + item
        else:
            lines.append("  config: " + item)
    return lines


def one_call(call: VllmCall, console: Console) -> None:
    console.print(T(call_title(call), "bold"), soft_wrap=True)
    lines = config_lines(call, console.width)
    graphs = [f"split graph {flat(call.split_graph, 80)}"] if call.split_graph else []
    if call.patterns:
        graphs.append("patterns " + listed(call.patterns, 4))
    if graphs:
        lines.append("  graphs: " + "; ".join(graphs))
    console.print(T("\n".join(lines)), soft_wrap=True)  # no line begins with log text
    pieces(call, console)


def piece_row(p: VllmPiece) -> tuple[str, ...]:
    """A piece compile as a row: piece, place, compile, time, cache, pass graphs."""
    place = "" if p.index is None else f"{p.index + 1}" + (f"/{p.total}" if p.total else "")
    took = seconds(p.seconds) + (f" ({p.seconds_from})" if p.seconds_from else "")
    cache = ", ".join(f"{k} {v}" for k, v in p.cache.items())
    return (
        flat(p.submod, 60),
        place,
        p.ref or p.compile,
        took,
        flat(cache, 120),
        str(len(p.pass_graphs)),
    )


def pieces(call: VllmCall, console: Console) -> None:
    """The call's piece compiles, grouped by range or size (each where it first compiled)."""
    if not call.pieces:
        return
    t = table(
        f"vLLM call {call.index + 1}: {count(len(call.submods), 'piece')}, "
        f"{count(call.compiles, 'compile')} by range and size",
        "range or size",
        "piece",
        "#",
        "compile",
        "time",
        "cache",
        "pass graphs",
        console=console,
    )
    shown = 0
    for g in call.by_range():
        label = g.label + (" (cudagraph capture)" if g.capture_size else "")
        for k, p in enumerate(g.pieces):
            if shown < MAX_PIECES:
                t.add_row(T(label if k == 0 else ""), *(T(x) for x in piece_row(p)))
            shown += 1
    console.print(t)
    if shown > MAX_PIECES:
        footnote(f"... {shown - MAX_PIECES} more piece compiles: --format json lists them", console)
    first = call.pieces[0].ref or call.pieces[0].compile
    footnote(
        f"a piece's artifacts: {command('tlview', 'show', 'PATH', '--compile-id', first)}; "
        "its passes as diffs: add --passes",
        console,
    )


def ranks(rows: list[RankRow], console: Console) -> None:
    """Each call across the job's ranks, one row per rank, and what differs between them."""
    t = table(
        "vLLM calls by rank",
        "call",
        "prefix",
        "rank",
        "pieces",
        "compiles",
        "cache hits",
        "time",
        "differs",
        console=console,
    )
    n = 0
    for r in rows:
        for k, cell in enumerate(r.cells):
            if n < MAX_RANK_ROWS:
                t.add_row(
                    T(str(r.index + 1) if k == 0 else ""),
                    T(flat(r.prefix or "", 60) if k == 0 else ""),
                    T("" if cell.rank is None else str(cell.rank)),
                    T(str(cell.pieces)),
                    T(str(cell.compiles)),
                    T(str(cell.hits)),
                    T(seconds(cell.seconds)),
                    T(", ".join(r.differs) if k == 0 else "", "yellow"),
                )
            n += 1
    console.print(t)
    if n > MAX_RANK_ROWS:
        footnote(f"... {n - MAX_RANK_ROWS} more rows: --format json lists them", console)
