"""Long strings written once: the strings table of tlview's JSON formats, and the one function
that puts a stored document's strings back, so a report stays in proportion to its log."""

from __future__ import annotations

from typing import Any

from tlview.errors import EXIT_NO_TRACE, TlviewError
from tlview.inert import one_line

# A string this long or longer is written where it first occurs and referred to after that.
MIN_CHARS = 200
REF = "$s"  # a reference: {"$s": key}, the key of a string in the document's "strings" table
TABLE = "strings"  # the document's top-level table: {key: string}, present only when used
HEAD, TAIL = 6, 24  # characters text and the page keep of a name referred to: start, end (the file)


class Table:
    """The long strings one writer has referred to; `prefix` keeps the keys of two writers of
    one document (a forked later half) apart."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.seen: set[str] = set()  # written once in full
        self.keys: dict[str, str] = {}  # referred to: string -> key
        self.entries: dict[str, str] = {}  # key -> string, as the table is written

    def ref(self, s: str | None) -> str | dict[str, str] | None:
        """`s` as written: whole the first time (and whenever it is short), then a reference."""
        if s is None or len(s) < MIN_CHARS:
            return s
        k = self.keys.get(s)
        if k is None:
            if s not in self.seen:
                self.seen.add(s)
                return s
            k = self.keys[s] = f"{self.prefix}{len(self.entries)}"
            self.entries[k] = s
        return {REF: k}

    def refs(self, items: list[str]) -> list[Any]:
        return [self.ref(s) for s in items]

    def deep(self, v: Any) -> Any:
        """Every string value in `v` (lists and dict values, never keys) through `ref`."""
        if isinstance(v, str):
            return self.ref(v)
        if isinstance(v, dict):
            return {k: self.deep(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self.deep(x) for x in v]
        return v

    def merge(self, entries: dict[str, str]) -> None:
        """Take the entries another writer of the same document referred to."""
        self.entries.update(entries)


def expand(doc: Any) -> Any:
    """A stored `tlview.report/1` or `tlview.diff/1` document (as `json.load` gives it) with
    every reference to its strings table replaced by the string and the table removed: the
    document a reader written before the table reads. One without a table is returned as is."""
    if not isinstance(doc, dict) or TABLE not in doc:
        return doc
    table = doc[TABLE]
    if not isinstance(table, dict) or not all(isinstance(s, str) for s in table.values()):
        raise TlviewError(f"report: its {TABLE!r} table is not an object of strings", EXIT_NO_TRACE)
    out = {k: v for k, v in doc.items() if k != TABLE}
    # An explicit stack: a document nests as deep as a log's values do. Containers are copied,
    # so the caller's document is left as it was.
    todo: list[dict[str, Any] | list[Any]] = [out]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, dict | list):
                    node[k] = _put(v, table, todo)
        else:
            for i, v in enumerate(node):
                if isinstance(v, dict | list):
                    node[i] = _put(v, table, todo)
    return out


def _put(v: dict[str, Any] | list[Any], table: dict[str, str], todo: list[Any]) -> Any:
    """A container as expanded: the string a reference names, else a copy to walk later."""
    if isinstance(v, dict):
        if len(v) == 1 and REF in v:
            key = v[REF]
            if not isinstance(key, str) or key not in table:
                raise TlviewError(
                    f"report: a reference to string {key!r}, not in its {TABLE} table",
                    EXIT_NO_TRACE,
                )
            return table[key]
        v = dict(v)
    else:
        v = list(v)
    todo.append(v)
    return v


class Names:
    """The long names one text report or page has shown, by number: whole the first time,
    then their start and end around `[name N]`."""

    def __init__(self) -> None:
        self.numbers: dict[str, str] = {}
        self.prefix = ""

    def shown(self, s: str) -> str:
        s = one_line(s)  # a file name is one line wherever it is shown
        if len(s) < MIN_CHARS:
            return s
        head, tail = _place(s)
        if tail:  # `file:line` and `file:line in name`: the file is the name, not each line
            return self.shown(head) + tail
        n = self.numbers.get(s)
        if n is None:
            n = self.numbers[s] = f"{self.prefix}{len(self.numbers) + 1}"
            return f"{s} [name {n}]"
        return f"{s[:HEAD]}...[name {n}]...{s[-TAIL:]}"


def _place(s: str) -> tuple[str, str]:
    """`s` split before a trailing `:LINE` or `:LINE in NAME` ("" when it has none)."""
    i = s.rfind(":")
    if i < 0:
        return s, ""
    rest = s[i + 1 :]
    j = rest.find(" in ")
    line = rest if j < 0 else rest[:j]
    return (s[:i], s[i:]) if line.isdigit() and line.isascii() else (s, "")
