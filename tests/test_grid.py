"""The terminal report's tables (render/grid.py): widths, wrapping, styles, what a cell may hold."""

from __future__ import annotations

import io
import json

import pytest
from conftest import only_log, run_cli
from rich.console import Console

from tlview.render.text.console import T
from tlview.render.text.grid import Grid

LONG = "L['self']._modules['enc']._modules['layers']._modules['0']._modules['self_attn']"


def draw(g: Grid, width: int, terminal: bool = False) -> str:
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        force_terminal=terminal,
        color_system="standard" if terminal else None,
        legacy_windows=False,
    )
    console.print(g)
    return out.getvalue()


def test_columns_as_wide_as_their_widest_cell_when_they_fit() -> None:
    g = Grid("Inputs", "source", "size", "dtype", ascii_box=True)
    g.add_row(T("L['x']"), T("[4, 8, 32]"), T("float32"))
    g.add_row(T("L['weight']"), T("[96]"), T("float16"))
    assert g.widths(100) == [11, 10, 7]
    assert draw(g, 60).splitlines() == [
        "Inputs                            ",
        "source      | size       | dtype  ",
        "------------+------------+--------",
        "L['x']      | [4, 8, 32] | float32",
        "L['weight'] | [96]       | float16",
    ]


def test_the_widest_columns_are_cut_to_fit_and_wrapped_whole() -> None:
    g = Grid("Inputs", "source", "size", "flags", ascii_box=True)
    g.add_row(T(LONG), T("[96]"), T("param grad superseded"))
    # 40 cells: 6 of separators, 4 for size; 30 for source and flags, cut to 15 each.
    assert g.widths(34) == [15, 4, 15]
    lines = draw(g, 40).splitlines()
    assert max(len(x) for x in lines) == 40
    rows = [x.split(" | ") for x in lines[3:]]
    assert "".join(r[0].rstrip() for r in rows) == LONG  # folded, every character kept
    assert [r[2].strip() for r in rows if r[2].strip()] == ["param grad", "superseded"]
    assert rows[0][1] == "[96]"


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
    # Each row: a source folded over its column's lines, then the rest on its first line.
    shown, row = [], None
    for line in out[at + 2 :]:
        if " | " not in line:
            break
        assert len(line) <= 100
        cells = line.split(" | ")
        if cells[1].strip():
            row = [cells[0].rstrip(), cells[1].strip(), cells[-1].strip()]
            shown.append(row)
        else:
            assert row is not None
            row[0] += cells[0].rstrip()
    assert [r[0] for r in shown] == sources
    first = c["inputs"][0]
    assert shown[0][1] == "[" + ", ".join(str(d) for d in first["size"]) + "]"
