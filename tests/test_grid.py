"""The terminal report's tables (render/grid.py): widths, wrapping, styles, what a cell may hold."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from helpers import only_log, run_cli
from rich.console import Console

from tlview.render.text.console import T
from tlview.render.text.grid import Grid, Kind, wrap

LONG = "L['self']._modules['enc']._modules['layers']._modules['0']._modules['self_attn']"
KINDS = (Kind.NAME, Kind.KEEP, Kind.TEXT)  # source, size, flags


def draw(g: Grid, width: int, terminal: bool = False) -> str:
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        force_terminal=terminal,
        color_system="standard" if terminal else None,
        legacy_windows=False,
    )
    console.print(g, crop=False)  # as tlview's consoles: nothing past the width is lost
    return out.getvalue()


def test_columns_as_wide_as_their_widest_cell_when_they_fit() -> None:
    g = Grid("Inputs", "source", "size", "dtype", ascii_box=True)
    g.add_row(T("L['x']"), T("[4, 8, 32]"), T("float32"))
    g.add_row(T("L['weight']"), T("[96]"), T("float16"))
    assert g.widths(100) == [11, 10, 7]
    assert draw(g, 60).splitlines() == [
        "Inputs",
        "source      | size       | dtype",
        "------------+------------+--------",
        "L['x']      | [4, 8, 32] | float32",
        "L['weight'] | [96]       | float16",
    ]


def test_prose_wraps_at_its_words_and_its_wrapped_lines_are_indented() -> None:
    g = Grid("Breaks", "count", "reason", ascii_box=True, kinds=[Kind.KEEP, Kind.TEXT])
    g.add_row(T("2"), T("Call to `torch._dynamo.graph_break()` User-inserted graph break."))
    lines = draw(g, 50).splitlines()
    assert max(len(x) for x in lines) <= 50
    reason = [x.split(" | ")[1] for x in lines[3:]]
    assert reason[0] == "Call to `torch._dynamo.graph_break()`"
    assert all(x.startswith("  ") and not x.startswith("   ") for x in reason[1:])
    assert " ".join(x.strip() for x in reason) == (
        "Call to `torch._dynamo.graph_break()` User-inserted graph break."
    )


def test_a_name_is_cut_in_the_middle_and_written_whole_once_under_the_table() -> None:
    g = Grid("Inputs", "source", "size", "flags", ascii_box=True, kinds=list(KINDS))
    g.add_row(T(LONG), T("[96]"), T("param grad superseded"))
    g.add_row(T(LONG), T("[4]"), T("param"))
    lines = draw(g, 40).splitlines()
    assert max(len(x) for x in lines if LONG not in x) <= 40
    rows = [x.split(" | ") for x in lines[3:] if " | " in x]
    cut = rows[0][0].rstrip()
    assert "..." in cut and LONG.startswith(cut[: cut.index("...")])
    assert LONG.endswith(cut[cut.index("...") + 3 :]) and len(cut) >= 16
    # The full name once (two rows name it), on a line of its own: copied whole.
    assert [x for x in lines if LONG in x] == [f"  {cut} is {LONG}"]
    assert rows[0][1] == "[96]"


def test_an_id_or_a_place_is_never_broken_a_list_of_them_between_items() -> None:
    g = Grid("Breaks", "where", "compiles", "reason", ascii_box=False, kinds=list(KINDS[:3]))
    g.kinds = [Kind.KEEP, Kind.KEEP, Kind.TEXT]
    places = "progs/fail.py:15 x2, progs/other.py:1234"
    g.add_row(T(places), T("dedicated.log:0/0_1, b.log:0/1"), T("a reason " * 20))
    for width in (80, 60, 40):
        out = draw(g, width)
        for whole in ("progs/fail.py:15 x2", "progs/other.py:1234", "dedicated.log:0/0_1"):
            assert whole in out, (width, out)
        assert all(x == x.rstrip() for x in out.splitlines())


def test_a_table_of_ids_alone_moves_its_columns_closer_before_it_overflows() -> None:
    g = Grid("T", "id", "where", ascii_box=True, kinds=[Kind.KEEP, Kind.KEEP])
    g.add_row(T("a" * 20), T("b" * 18))
    assert draw(g, 40).splitlines()[1:] == [
        "id" + " " * 18 + "|where",
        "-" * 20 + "+" + "-" * 18,
        "a" * 20 + "|" + "b" * 18,
    ]


def test_a_header_is_never_cut() -> None:
    g = Grid("T", "failed guard", "x", ascii_box=True)
    g.add_row(T("a" * 50), T("y"))
    assert g.widths(5) == [12, 1]


def test_on_a_terminal_a_bold_header_a_line_under_it_and_cell_styles() -> None:
    g = Grid("Compiles", "id", "status", ascii_box=False)
    g.add_row(T("0/0"), T("failed", "bold red"))
    g.add_row(T("[bold]1/0[/bold]"), T("ok", "green"))  # log text: never markup
    out = draw(g, 30, terminal=True)
    assert "\x1b[1mCompiles" in out
    assert "\u2500" * 13 in out
    assert "\x1b[1;31mfailed" in out and "\x1b[32mok" in out
    assert "[bold]1/0[/bold]" in out


def test_text_report_tables_fit_a_narrow_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    log = only_log("transformer_inductor")
    monkeypatch.setenv("COLUMNS", "100")
    out = run_cli("report", str(log), "-v").stdout.splitlines()
    data = json.loads(run_cli("report", str(log), "--format", "json").stdout)
    (c,) = [c for c in data["compiles"] if c["key"] == "0/0"]
    sources = [s for i in c["inputs"] for s in i["sources"]]
    assert len(sources) == 27 and max(len(s) for s in sources) > 100
    at = out.index(next(x for x in out if x.startswith("source ")))
    head = [c.strip() for c in out[at].split("|")]
    assert head == [
        "source",
        "size",
        "stride",
        "offset",
        "dtype",
        "device",
        "storage",
        "alias",
        "flags",
    ]
    assert set(out[at + 1]) == {"-", "+"}
    # Each row: a source cut in the middle (its start and end), the rest on its first line; each
    # source whole once under the table.
    shown, under = [], []
    for line in out[at + 2 :]:
        if " is L[" in line and line.startswith("  "):
            under.append(line)
            continue
        if " | " not in line:
            break
        assert len(line) <= 100
        cells = line.split(" | ")
        if cells[0].strip():  # a row's first line (a shape may wrap between its dims)
            shown.append([cells[0].rstrip(), cells[1].strip(), cells[-1].strip()])
        else:
            shown[-1][1] += " " + cells[1].strip()
    for row, want in zip(shown, sources, strict=True):
        cell = row[0]
        if cell != want:
            start, end = cell.split("...")
            assert want.startswith(start) and want.endswith(end)
            assert f"  {cell} is {want}" in under
    assert len(under) == len({s for s in sources if len(s) > 40})
    first = c["inputs"][0]
    assert shown[0][1] == "[" + ", ".join(str(d) for d in first["size"]) + "]"


def test_wrapped_text_reads_back_whole() -> None:
    """Fuzz: every wrapped line fits; a line that starts indented followed a space, one that does
    not continues a folded word, so the text reads back whole (as tests of long names join it)."""
    rng = random.Random(49)
    for _ in range(3000):
        width = rng.randrange(8, 90)
        words = [rng.choice(("a", "bb", "ccc ddd", "e" * rng.randrange(1, 200))) for _ in range(6)]
        line = " " * rng.randrange(0, 5) + " ".join(words)
        lines = wrap(line, width)
        assert all(len(x) <= width for x in lines), (width, line)
        joined = re.sub(r"\n {2,}", " ", "\n".join([lines[0], *lines[1:]])).replace("\n", "")
        assert joined == line, (width, line, lines)


@pytest.mark.parametrize(
    "name",
    [LONG, "L['x']" + "\u6f22\u5b57" * 30 + "['w']", "L['a\u0301b']" * 12, "L['\x1b[31m']" * 9],
)
def test_a_name_is_cut_to_its_cells_whatever_its_characters(name: str) -> None:
    # Plain ASCII is cut a character a cell (the fast path the inputs listing of 2,000 names
    # needs); wide, combining and control characters by their cells, as rich measures them.
    from rich.cells import cell_len

    from tlview.render.text.grid import middle

    for width in range(0, 60, 7):
        cut = middle(name, width)
        assert cell_len(cut) <= width
        if width >= 12:
            assert cut.endswith(name[-2:]) and cut[:2] == name[:2]
