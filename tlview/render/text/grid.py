"""The terminal report's tables, drawn a line at a time: the look of rich's tables at a fraction of
their cost (rich measures and wraps every cell; a deep model's input tables have thousands)."""

from __future__ import annotations

from collections.abc import Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

_BOLD = Style(bold=True)


class Grid:
    """A titled table of text cells, each with one style: the columns as wide as their widest
    cell, the widest narrowed to fit the width (their cells wrapped), the header never wrapped."""

    def __init__(self, title: str, *cols: str, ascii_box: bool) -> None:
        self.title = title
        self.cols = cols
        self.ascii_box = ascii_box  # `|` between columns (for pipes and files), else spaces
        self.rows: list[tuple[Text, ...]] = []

    def add_row(self, *cells: Text) -> None:
        self.rows.append(cells)

    def widths(self, room: int) -> list[int]:
        """Each column's width: what its widest cell needs, the widest cut down to fit `room`."""
        floor = [max(cell_len(c), 1) for c in self.cols]
        need = floor[:]
        for row in self.rows:
            for k, cell in enumerate(row):
                for line in cell.plain.split("\n"):
                    n = cell_len(line)
                    if n > need[k]:
                        need[k] = n
        if sum(need) <= room:
            return need
        # The largest cap c that fits: every column wider than c is cut to c (or its header).
        order = sorted(need, reverse=True)
        rest = sum(need)
        cap = 1
        for i, w in enumerate(order):
            nxt = order[i + 1] if i + 1 < len(order) else 0
            rest -= w  # columns from i on are at most w; the first i + 1 are cut to c
            c = (room - rest) // (i + 1) if i + 1 < len(order) else room // len(order)
            if c >= nxt:
                cap = max(c, 1)
                break
        widths = [max(min(w, cap), f) for w, f in zip(need, floor, strict=True)]
        spare = room - sum(widths)  # less than the columns cut: one more cell each, widest first
        for k in sorted(range(len(need)), key=lambda k: -need[k]):
            if spare <= 0:
                break
            if widths[k] < need[k]:
                widths[k] += 1
                spare -= 1
        return widths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        n = len(self.cols)
        sep = " | " if self.ascii_box else "   "
        widths = self.widths(options.max_width - len(sep) * (n - 1))
        width = sum(widths) + len(sep) * (n - 1)
        new_line = Segment.line()
        title = Text(self.title, style="bold")
        for line in title.wrap(console, width, overflow="fold"):
            yield Segment(_pad(line.plain, width), _BOLD)
            yield new_line
        yield from self._line([Text(c, style=_BOLD) for c in self.cols], widths, sep, console)
        if self.ascii_box:
            # A cell's padding: one space on each side that has a neighbour.
            rule = "+".join("-" * (w + (k > 0) + (k < n - 1)) for k, w in enumerate(widths))
        else:
            rule = ("-" if options.ascii_only else "\u2500") * width
        yield Segment(rule)
        yield new_line
        for row in self.rows:
            yield from self._line(row, widths, sep, console)

    def _line(
        self, row: tuple[Text, ...] | list[Text], widths: list[int], sep: str, console: Console
    ) -> Iterator[Segment]:
        """One row, as many lines as its tallest cell; runs of one style are one segment."""
        cells = [_lines(cell.plain, w, console) for cell, w in zip(row, widths, strict=True)]
        styles = [cell.style for cell in row]
        height = max(len(c) for c in cells)
        for i in range(height):
            runs: list[tuple[str, str | Style]] = []
            for k, (lines, w) in enumerate(zip(cells, widths, strict=True)):
                text = _pad(lines[i] if i < len(lines) else "", w)
                if k:
                    runs.append((sep, ""))
                style = styles[k]
                if runs and runs[-1][1] == style:
                    runs[-1] = (runs[-1][0] + text, style)
                else:
                    runs.append((text, style))
            for text, style in runs:
                yield Segment(text, console.get_style(style) if style else None)
            yield Segment.line()


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))


def _lines(text: str, width: int, console: Console) -> list[str]:
    """A cell's text as lines of at most `width` cells: wrapped at spaces, long words cut."""
    if "\n" not in text and cell_len(text) <= width:
        return [text]
    out: list[str] = []
    for par in text.split("\n"):
        if cell_len(par) <= width:
            out.append(par)
        else:
            out.extend(
                line.plain.rstrip() for line in Text(par).wrap(console, width, overflow="fold")
            )
    return out
