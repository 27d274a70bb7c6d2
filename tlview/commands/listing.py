"""`tlview inputs` without --emit: each compile's inputs in the report's table, and with
--check whether they rebuild."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tlview.analyze.names import Refs
from tlview.inert import one_line  # a cell is one line: a source's line feed shown as `\n`
from tlview.model import Compile, Report
from tlview.runtime.output import Output, stdout

if TYPE_CHECKING:
    from rich.console import Console

# What torch says, as a warning, when it makes tensors of a kind a log can describe: the
# listing's notes say what matters, and stderr keeps one line per problem.
TORCH_NOISE = (
    "ComplexHalf support is experimental",
    "Sparse CSR tensor support is in beta",
    "Sparse invariant checks are implicitly disabled",
    "torch.quantize_per_tensor, torch.quantize_per_channel",
)


def quiet_torch() -> None:
    for text in TORCH_NOISE:
        warnings.filterwarnings("ignore", message=re.escape(text))


COLUMN = 60  # characters a listing's column is padded to at most (`show`'s listing)


def aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """A listing's rows in columns, each as wide as its widest cell up to COLUMN: a longer cell
    runs on unpadded, so one long name (a log's) never pads every other row to its length."""
    n = len(rows[0]) if rows else 0
    widths = [min(COLUMN, max(len(r[i]) for r in rows)) for i in range(n)]
    return [
        "  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def list_inputs(
    rep: Report, chosen: Iterable[Compile], allow_import: tuple[str, ...], check: bool = False
) -> None:
    """Per compile, a table of its inputs as the report's inputs table writes them; with
    `check`, also whether each rebuilds as a fake and as a real tensor.

    One compile at a time: a log of thousands of compiles lists in the memory of one."""
    from tlview.render.text.console import on_console

    stdout()  # closed (`>&-`): one line, not a listing that goes nowhere

    def draw(console: Console) -> None:
        _draw(rep, chosen, allow_import, check, console)

    on_console(Output(), draw)


def _draw(
    rep: Report,
    chosen: Iterable[Compile],
    allow_import: tuple[str, ...],
    check: bool,
    console: Console,
) -> None:
    from tlview.render.text.console import T, table
    from tlview.tensors import rows

    refs = Refs.of(rep)
    listed = False
    for c in chosen:
        listed = True
        got = rows.input_rows(c, allow_import, check)
        cols = rows.HEAD + rows.CHECKED if check else rows.HEAD
        # The compile's line is never wrapped (an id cut in two reads as another compile).
        title = f"compile {one_line(refs(c))}  {c.status}  {len(got.rows)} input(s)"
        console.print(T(title), soft_wrap=True)
        t = table("Inputs", *cols, console=console)
        for cells in got.rows:
            t.add_row(*(T(one_line(v)) for v in cells))
        console.print(t)
        for line in [*got.notes, *([got.problem] if got.problem else [])]:
            console.print(T(f"  {line}"))
        console.print()
    if not listed:
        console.print(T(f"{rep.path}: no compile described any input tensor"))
