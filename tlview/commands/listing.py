"""`tlview inputs` without --emit: each compile's inputs, and whether they rebuild."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence

from tlview.analyze.names import Refs
from tlview.commands.funnel import say
from tlview.inert import one_line  # a cell is one line: a source's line feed shown as `\n`
from tlview.model import Compile, Report
from tlview.render.clean import clean  # text from the log: control characters shown
from tlview.runtime.output import stdout

# What torch says, as a warning, when it makes tensors of a kind a log can describe: the
# listing's notes say what matters, and stderr keeps one line per problem.
TORCH_NOISE = (
    "ComplexHalf support is experimental",
    "Sparse CSR tensor support is in beta",
    "Sparse invariant checks are implicitly disabled",
    "torch.quantize_per_tensor, torch.quantize_per_channel",
)
HEAD = ("source", "shape", "stride", "offset", "dtype", "device", "alias", "fake", "real")


def quiet_torch() -> None:
    for text in TORCH_NOISE:
        warnings.filterwarnings("ignore", message=re.escape(text))


COLUMN = 60  # characters a listing's column is padded to at most


def aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """A listing's rows in columns, each as wide as its widest cell up to COLUMN: a longer cell
    runs on unpadded, so one long name (a log's) never pads every other row to its length."""
    n = len(rows[0]) if rows else 0
    widths = [min(COLUMN, max(len(r[i]) for r in rows)) for i in range(n)]
    return [
        "  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def list_inputs(rep: Report, chosen: Iterable[Compile], allow_import: tuple[str, ...]) -> None:
    """Per compile, each input with its metadata and whether it rebuilds as fake and as real.

    One compile at a time: a log of thousands of compiles lists in the memory of one."""
    from tlview.rebuild import input_rows

    stdout()  # closed (`>&-`): one line, not a listing that goes nowhere
    refs = Refs.of(rep)
    listed = False
    for c in chosen:
        listed = True
        rows, notes, problem = input_rows(c, allow_import)
        ref = refs(c)
        say(f"compile {ref}  {c.status}  {len(rows)} input(s)")
        table = [HEAD, *[tuple(one_line(clean(v)) for v in r) for r in rows]]  # as shown, inert
        for line in aligned(table):
            say(line)
        for line in notes:
            say(f"    {line}")
        if problem:
            say(f"    {problem}")
        say("")
    if not listed:
        say(f"{rep.path}: no compile described any input tensor")
