"""A stored JSON document read field by field, each checked for the type tlview writes there:
a stored baseline is input as a log is (CI downloads it from an artifact), so a field of another
type is one clear line, never an internal error, and a string of its strings table is read only
where tlview refers to one (a file), cut as an interned file name is, so a document cannot make
any output many times its size."""

from __future__ import annotations

from typing import Any

from tlview.index.kinds import cut_name
from tlview.strings import REF

_BITS = 1 << 63  # an integer tlview writes fits 64 bits (signed): no sum of them is unbounded


class Damaged(Exception):
    """A field of a stored document that is not what tlview writes there (its place, said)."""


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "true or false"
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer"}
    return names.get(type(v), "a number" if isinstance(v, float) else "null")


class Strings:
    """A document's strings table, each string cut as an interned file name once, when first
    referred to (a reference to a 1 MiB string costs 512 characters wherever it is read)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.cut: dict[str, str] = {}

    def get(self, key: Any, where: str) -> str:
        if not isinstance(self.table, dict):
            raise Damaged(f"{where} refers to the strings table, which is {_kind(self.table)}")
        s = self.table.get(key) if isinstance(key, str) else None
        if not isinstance(s, str):
            raise Damaged(f"{where} refers to string {key!r}, which its strings table lacks")
        got = self.cut.get(key)
        if got is None:
            got = self.cut[key] = cut_name(s)
        return got


class Fields:
    """One object of a stored document, its fields read with their types checked (null, or a
    field left out, is None: the default of each reader's caller)."""

    __slots__ = ("d", "strings", "where")

    def __init__(self, d: Any, where: str, strings: Strings) -> None:
        if not isinstance(d, dict):
            raise Damaged(f"{where} is {_kind(d)}, not an object")
        self.d: dict[str, Any] = d
        self.where = where
        self.strings = strings

    def at(self, key: str) -> str:
        """Where a field is, as a reader finds it: `compiles[3].stack[0].file`."""
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, kind: type, what: str) -> Any:
        v = self.d.get(key)
        if v is None:
            return None
        if isinstance(v, bool) != (kind is bool) or not isinstance(v, kind):
            raise Damaged(f"{self.at(key)} is {_kind(v)}, not {what}")
        return v

    def text(self, key: str) -> str | None:
        got: str | None = self._get(key, str, "a string")
        return got

    def need_text(self, key: str) -> str:
        got = self.text(key)
        if got is None:
            raise Damaged(f"{self.at(key)} is missing: it is a string")
        return got

    def integer(self, key: str) -> int | None:
        got: int | None = self._get(key, int, "an integer")
        if got is not None and not -_BITS <= got < _BITS:
            raise Damaged(f"{self.at(key)} is {got}, past 64 bits")
        return got

    def number(self, key: str) -> float | None:
        v = self.d.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v) if -_BITS <= v < _BITS else self.integer(key)  # past 64 bits: said
        got: float | None = self._get(key, float, "a number")
        return got

    def flag(self, key: str) -> bool:
        return bool(self._get(key, bool, "true or false"))

    def value(self, key: str) -> Any:
        """A value copied from a log (a size, a dtype): any JSON, kept as it is."""
        return self.d.get(key)

    def raw(self, key: str) -> dict[str, Any] | None:
        """An object copied from a log (metrics, a tensor's fields), kept as it is: tlview
        reads each of its fields as it reads a log's, checking each type there."""
        got: dict[str, Any] | None = self._get(key, dict, "an object")
        return got

    def obj(self, key: str) -> Fields:
        """An object of this one (an empty one when it is null or left out)."""
        return Fields(self.d.get(key) or {}, f"{self.at(key)}", self.strings)

    def maybe(self, key: str) -> Fields | None:
        return None if self.d.get(key) is None else self.obj(key)

    def items(self, key: str) -> list[Fields]:
        """A list of objects."""
        got = self._get(key, list, "a list") or []
        return [Fields(x, f"{self.at(key)}[{i}]", self.strings) for i, x in enumerate(got)]

    def strs(self, key: str) -> list[str]:
        got = self._get(key, list, "a list of strings") or []
        for i, x in enumerate(got):
            if not isinstance(x, str):
                raise Damaged(f"{self.at(key)}[{i}] is {_kind(x)}, not a string")
        return list(got)

    def counts(self, key: str) -> dict[str, int]:
        """An object of counts (record kinds)."""
        got = self.obj(key)
        for k in got.d:
            got.integer(k)
            if got.d[k] is None:
                raise Damaged(f"{got.at(k)} is null, not an integer")
        return dict(got.d)

    def file(self, key: str) -> str | None:
        """A file name: a string, or where tlview refers to its strings table, the string it
        names there, cut as an interned file name is."""
        v = self.d.get(key)
        if isinstance(v, dict) and len(v) == 1 and REF in v:
            return self.strings.get(v[REF], f"{self.at(key)}")
        return self.text(key)
