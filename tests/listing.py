"""Reading tlview's piped tables in tests as cells (the inputs listing's and the report's),
and its notes as one line."""

from __future__ import annotations


def table_rows(out: str, first: str | None = None) -> list[list[str]]:
    """The rows of every piped table in OUT (header rows too), as cells split on " | "; with
    FIRST, only the rows whose first cell is FIRST ("": a row continuing the one above)."""
    lines = [line + " " for line in out.splitlines() if " | " in line]  # a last empty cell: " |"
    rows = [[c.strip() for c in line.split(" | ")] for line in lines]
    return rows if first is None else [r for r in rows if r[0] == first]


def listing_rows(out: str, after: str | None = None) -> list[list[str]]:
    """The rows of every inputs table in OUT (after the text AFTER, when given), as cells:
    source, size, stride, offset, dtype, device, storage, alias (then fake, real with --check)."""
    if after is not None:
        out = out[out.index(after) + len(after) :]
    return [r for r in table_rows(out) if r[0] != "source"]  # not the header


def flat(out: str) -> str:
    """OUT with every run of whitespace one space: notes wrapped at the terminal's width read
    as one line."""
    return " ".join(out.split())
