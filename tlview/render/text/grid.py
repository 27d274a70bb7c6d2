"""The terminal report's tables, drawn a line at a time: the look of rich's tables at a fraction of
their cost (rich measures and wraps every cell; a deep model's input tables have thousands).

How a cell may break is its column's `Kind`: an id, a `file:line` or a number is never broken
(KEEP: a list of them wraps between its items), a name too long for its column is cut in the
middle and written whole once under the table (NAME), and prose wraps at its spaces, its
wrapped lines indented under their first (TEXT). No line ends in spaces.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

_BOLD = Style(bold=True)
CUT = "..."  # what stands for the middle of a name cut to fit its column
HANG = 2  # cells a wrapped line is indented by, past its first line's own indent


class Kind(enum.Enum):
    KEEP = "keep"  # ids, file:line, numbers: never broken; lists of them wrap between items
    NAME = "name"  # functions, sources, kernels: cut in the middle, whole under the table
    TEXT = "text"  # reasons, guards: wrapped at spaces, a word wider than the column folded


NAME_FLOOR = 16  # cells a name keeps until lists of ids and places wrap: `torch_d...t_15`
MEASURE = 24  # cells prose keeps until then: a readable line
WORD = 12  # a word of prose this long or shorter is folded only when nothing else is left
Floor = Callable[[int, int, int, int], int]  # (header, widest word, first word, need) -> least
# How a table too wide for its room is narrowed, phase by phase: each narrows the columns of
# its kinds towards their floors, the widest first, only as far as the table needs. Prose to
# MEASURE and names as far as they stay told apart first, then lists of ids and places wrapped
# between items, names to NAME_FLOOR, prose to its words, then to its first words, names to
# their headers, and last prose folded.
_PHASES: tuple[dict[Kind, Floor], ...] = (
    {
        Kind.TEXT: lambda head, word, first, need: max(head, min(need, MEASURE)),
        Kind.NAME: lambda head, word, first, need: max(head, word),
    },
    {Kind.KEEP: lambda head, word, first, need: word},
    {Kind.NAME: lambda head, word, first, need: max(head, NAME_FLOOR)},
    {Kind.TEXT: lambda head, word, first, need: max(head, min(word, WORD))},
    {Kind.TEXT: lambda head, word, first, need: max(head, min(first, WORD))},
    {Kind.NAME: lambda head, word, first, need: head},
    {Kind.TEXT: lambda head, word, first, need: head},
)


SOFT = 5  # the phases that leave names NAME_FLOOR wide and prose unfolded


class Grid:
    """A titled table of text cells, each with one style: the columns as wide as their widest
    cell, those wider than the room narrowed (prose and names first, never an id or a place),
    the header never wrapped."""

    def __init__(
        self, title: str, *cols: str, ascii_box: bool, kinds: Sequence[Kind] | None = None
    ) -> None:
        self.title = title
        self.cols = cols
        self.kinds = list(kinds) if kinds is not None else [Kind.TEXT] * len(cols)
        self.ascii_box = ascii_box  # ` | ` between columns (for pipes and files), else 2 spaces
        self.rows: list[tuple[Text, ...]] = []

    def add_row(self, *cells: Text) -> None:
        self.rows.append(cells)

    def widths(self, room: int, phases: int = len(_PHASES)) -> list[int]:
        """Each column's width: what its widest cell needs, narrowed to fit `room` as its kind
        allows, phase by phase: prose to its words, names to NAME_FLOOR, lists of ids between
        their items, then prose and names further; never inside an id, a place or a number
        (a table of those alone may be wider than the room)."""
        need, word, first = self._measure()
        widths = need[:]
        if sum(need) <= room:
            return widths
        head = [max(cell_len(c), 1) for c in self.cols]
        self._name_floors(word, need)
        for floors in _PHASES[:phases]:
            over = sum(widths) - room
            if over <= 0:
                break
            least = {
                k: min(widths[k], floor(head[k], word[k], first[k], need[k]))
                for k, kind in enumerate(self.kinds)
                if (floor := floors.get(kind)) is not None
            }
            _narrow(widths, least, over)
        return widths

    def _name_floors(self, word: list[int], need: list[int]) -> None:
        """A name column's floor, in WORD: as narrow as still tells the column's names apart."""
        for k, kind in enumerate(self.kinds):
            if kind is Kind.NAME:
                names = {line for row in self.rows for line in row[k].plain.split("\n")}
                word[k] = _apart(names, NAME_FLOOR, need[k])

    def _measure(self) -> tuple[list[int], list[int], list[int]]:
        """Per column: the widest line, the widest word (a KEEP column's with its unit, `1.105
        s`), the widest first word of a line; the header counts in each."""
        need = [max(cell_len(c), 1) for c in self.cols]
        word, first = need[:], need[:]
        for row in self.rows:
            for k, cell in enumerate(row):
                for line in cell.plain.split("\n"):
                    n = cell_len(line)
                    need[k] = max(need[k], n)
                    if n > word[k]:
                        word[k] = max(word[k], *map(cell_len, _words(line, self.kinds[k])))
                    if n > first[k]:
                        first[k] = max(first[k], cell_len(line.split(" ", 1)[0]))
        return need, word, first

    def _fit(self, max_width: int) -> tuple[str, list[int]]:
        """The separator and widths the table is drawn with: columns one cell closer when that
        keeps names NAME_FLOOR wide and prose unfolded, or fits the table in the room at all."""
        n = len(self.cols)
        tries = [(" | ", SOFT), ("|", SOFT), ("|", len(_PHASES))]
        if not self.ascii_box:
            tries = [("  ", SOFT), (" ", SOFT), (" ", len(_PHASES))]
        for sep, phases in tries:
            room = max_width - len(sep) * (n - 1)
            widths = self.widths(room, phases)
            if sum(widths) <= room:
                break
        return sep, widths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        sep, widths = self._fit(options.max_width)
        width = sum(widths) + len(sep) * (len(widths) - 1)
        new_line = Segment.line()
        for line in wrap(self.title, max(width, options.max_width)):
            yield Segment(line, _BOLD)
            yield new_line
        cut: dict[str, str] = {}  # each name cut, whole, as its column shows it
        yield from self._line([Text(c, style=_BOLD) for c in self.cols], widths, sep, console, cut)
        yield Segment(_rule(widths, sep, self.ascii_box, options.ascii_only))
        yield new_line
        for row in self.rows:
            yield from self._line(row, widths, sep, console, cut)
        # Each name cut above, whole, once, in the order of the rows: on one line, copied whole.
        for whole, shown in cut.items():
            yield Segment(f"  {shown} is {whole}", console.get_style("dim"))
            yield new_line

    def _line(
        self,
        row: tuple[Text, ...] | list[Text],
        widths: list[int],
        sep: str,
        console: Console,
        cut: dict[str, str],
    ) -> Iterator[Segment]:
        """One row, as many lines as its tallest cell; runs of one style are one segment, and
        the line ends with its last character (no padding after it)."""
        cells = [
            _lines(cell.plain, w, kind, cut)
            for cell, w, kind in zip(row, widths, self.kinds, strict=True)
        ]
        styles = [cell.style for cell in row]
        for i in range(max(len(c) for c in cells)):
            for text, style in _runs(cells, i, widths, styles, sep):
                yield Segment(text, console.get_style(style) if style else None)
            yield Segment.line()


def _rule(widths: list[int], sep: str, ascii_box: bool, ascii_only: bool) -> str:
    """The line under the header: `---+---` (a cell's padding: one space on each side that has
    a neighbour, none with `|`), or a rule across on a terminal."""
    n = len(widths)
    if not ascii_box:
        return ("-" if ascii_only else "\u2500") * (sum(widths) + len(sep) * (n - 1))
    pad = len(sep) // 2
    return "+".join("-" * (w + pad * ((k > 0) + (k < n - 1))) for k, w in enumerate(widths))


Run = tuple[str, "str | Style"]


def _runs(
    cells: list[list[str]], i: int, widths: list[int], styles: list[str | Style], sep: str
) -> list[Run]:
    """Line I of a row as runs of one style each, every cell but the last padded to its width,
    nothing after the last character."""
    runs: list[Run] = []
    last = len(cells) - 1
    for k, (lines, w) in enumerate(zip(cells, widths, strict=True)):
        text = lines[i] if i < len(lines) else ""
        if k < last:
            text = _pad(text, w)
        if k:
            runs.append((sep, ""))
        if runs and runs[-1][1] == styles[k]:
            runs[-1] = (runs[-1][0] + text, styles[k])
        else:
            runs.append((text, styles[k]))
    while runs and not runs[-1][0].rstrip():
        runs.pop()
    if runs:
        runs[-1] = (runs[-1][0].rstrip(), runs[-1][1])
    return runs


def _narrow(widths: list[int], least: dict[int, int], over: int) -> None:
    """Narrow the columns LEAST names towards their least widths by OVER cells in all, or as
    far as they go: each cut to a cap, the cap as large as takes OVER off, the widest first."""
    cols = list(least)
    total = sum(widths[k] for k in cols)
    lo = _cap(widths, least, over)
    cut = {k: max(least[k], min(widths[k], lo)) for k in cols}
    spare = total - sum(cut.values()) - over  # taken off past OVER: given back, widest first
    for k in sorted(cols, key=lambda k: -widths[k]):
        if spare <= 0:
            break
        if cut[k] < widths[k]:
            cut[k] += 1
            spare -= 1
    for k, w in cut.items():
        widths[k] = w


def _cap(widths: list[int], least: dict[int, int], over: int) -> int:
    """The largest cap on the columns LEAST names that takes OVER cells off (0: none does)."""
    total = sum(widths[k] for k in least)
    lo, hi = 0, max((widths[k] for k in least), default=0)
    while lo < hi:
        cap = (lo + hi + 1) // 2
        if total - sum(max(f, min(widths[k], cap)) for k, f in least.items()) >= over:
            lo = cap
        else:
            hi = cap - 1
    return lo


def _apart(names: set[str], lo: int, hi: int) -> int:
    """The least width from LO up to HI at which NAMES cut in the middle are still all told
    apart (`L['s...norm1']...` from `...norm2']...`), or HI."""
    long = [n for n in names if cell_len(n) > lo]
    if len(long) < 2:
        return min(lo, hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if len({middle(n, mid) for n in long}) == len(long):
            hi = mid
        else:
            lo = mid + 1
    return lo


_UNIT = re.compile(r"(?:s|ms|B|KiB|MiB|GiB|TiB|x[0-9]+)[,)]?\Z")


def _words(line: str, kind: Kind) -> list[str]:
    """The words a line of a column is never broken inside: prose's at its spaces; a KEEP
    column's too, but a number with its unit (`1.105 s`, `2.0 KiB`) and a place with its count
    (`demo.py:15 x2`) are one word."""
    words = line.split(" ")
    if kind is not Kind.KEEP:
        return words
    out: list[str] = []
    for w in words:
        if out and _UNIT.match(w):
            out[-1] += " " + w
        else:
            out.append(w)
    return out


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))


def _lines(text: str, width: int, kind: Kind, cut: dict[str, str]) -> list[str]:
    """A cell's text as lines of at most `width` cells, as its column's kind breaks them."""
    if "\n" not in text and cell_len(text) <= width:
        return [text]
    out: list[str] = []
    for par in text.split("\n"):
        if cell_len(par) <= width:
            out.append(par)
        elif kind is Kind.NAME:
            shown = cut.setdefault(par, middle(par, width))
            out.append(shown)
        elif kind is Kind.KEEP:
            out.extend(_items(par, width))
        else:
            out.extend(wrap(par, width))
    return out


def _items(line: str, width: int) -> list[str]:
    """Ids, places and numbers (`a.py:3 x2, b.py:5`, `[32, 16]`, `f.py:3 in g`) as lines of
    whole words (`_words`), the later ones indented."""
    out = [""]
    for item in _words(line, Kind.KEEP):
        if not out[-1].strip():
            out[-1] += item
        elif cell_len(out[-1]) + 1 + cell_len(item) <= width:
            out[-1] += " " + item
        else:
            out.append(" " * HANG + item if HANG + cell_len(item) <= width else item)
    return out


def middle(text: str, width: int) -> str:
    """TEXT cut in the middle to WIDTH cells: its start and its end, which tell names apart."""
    room = width - len(CUT)
    if room < 2:
        return _head(text, width)
    tail = _tail(text, room - room // 3)  # the end tells most: `...['weight']`, `..._at_15`
    return _head(text, room - cell_len(tail)) + CUT + tail


def _head(text: str, width: int) -> str:
    if text.isascii() and text.isprintable():  # one cell a character: most names
        return text[: max(width, 0)]
    n = 0
    for i, ch in enumerate(text):
        n += cell_len(ch)
        if n > width:
            return text[:i]
    return text


def _tail(text: str, width: int) -> str:
    return _head(text[::-1], width)[::-1]


def wrap(line: str, width: int, fold: bool = True) -> list[str]:
    """One line as lines of at most WIDTH cells, broken at its spaces, the later ones indented
    HANG past the first's own indent; a word wider than a line is folded where it starts (with
    `fold`: its pieces on lines of their own, not indented), else kept whole on a line of its
    own. So a line that starts indented followed a space, one that does not continues a word.
    No line ends in a space."""
    line = line.rstrip()
    if cell_len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    hang = " " * min(indent + HANG, max(width // 3, 0))
    out: list[str] = []
    cur = line[:indent]
    bare = True  # whether `cur` holds no word yet
    for word in line[indent:].split(" "):
        if word:
            cur = _put(word, cur, bare, out, (width, hang, fold))
            bare = False
    out.append(cur)
    return [x.rstrip() for x in out]


def _put(word: str, cur: str, bare: bool, out: list[str], how: tuple[int, str, bool]) -> str:
    """The line CUR with WORD put on it: after a space, on a new line indented `hang`, or folded
    from here when too long for one (`fold`); lines filled go to OUT."""
    width, hang, fold = how
    if not bare and cell_len(cur) + 1 + cell_len(word) <= width:
        return cur + " " + word
    if not bare and fold and cell_len(hang) + cell_len(word) > width:
        cur += " "  # too long for an indented line: folded from here
    elif not bare:
        out.append(cur)
        cur = hang
    if not fold:
        return cur + word
    if cell_len(cur) >= width:  # no cell left here: the space is a line break
        out.append(cur)
        cur = hang
    room = width - cell_len(cur)
    while cell_len(word) > room > 0:
        piece = _head(word, room)
        out.append(cur + piece)
        word, cur, room = word[len(piece) :], "", width  # a folded word's pieces, not indented
    return cur + word
