"""Reading `tlview inputs`' listing in tests: its tables as cells, its notes as one line."""

from __future__ import annotations


def listing_rows(out: str, after: str | None = None) -> list[list[str]]:
    """The rows of every inputs table in OUT (after the text AFTER, when given), as cells:
    source, size, stride, offset, dtype, device, storage, alias (then fake, real with --check)."""
    if after is not None:
        out = out[out.index(after) + len(after) :]
    rows: list[list[str]] = []
    for line in out.splitlines():
        if " | " not in line:
            continue
        cells = [c.strip() for c in (line + " ").split(" | ")]
        if cells[0] != "source":  # the header
            rows.append(cells)
    return rows


def flat(out: str) -> str:
    """OUT with every run of whitespace one space: notes wrapped at the terminal's width read
    as one line."""
    return " ".join(out.split())
