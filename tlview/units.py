"""Sizes, shapes and times written the same way in every output: the terminal, the page, messages."""

from __future__ import annotations

from collections.abc import Mapping

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def nbytes(v: object) -> str:
    """A byte count in binary units ("1.5 KiB"); a value that is not a number, as it is."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "?" if v is None else str(v)
    x = float(v)
    for unit in _UNITS:
        if abs(x) < 1024 or unit == "TiB":
            return f"{int(x)} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return str(v)


def dims(v: object, symbols: Mapping[int, str] | None = None) -> str:
    """Sizes or strides as a list, symbols unquoted: "[s0, 3]"; a dim the graph took as a
    symbol (`symbols`) with its value in this run: "[s77=8, 3]"."""
    if symbols and isinstance(v, list):
        return "[" + ", ".join(_dim(d, symbols.get(k)) for k, d in enumerate(v)) + "]"
    if isinstance(v, list):
        s = str(v)  # the same text when no dim is symbolic (a string): the common case, in C
        if "'" not in s and '"' not in s:
            return s
        return "[" + ", ".join(map(str, v)) + "]"
    return "?" if v is None else str(v)


def count(n: int, what: str) -> str:
    """A count and its noun, singular for one: "1 compile", "3 graph breaks"."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def seconds(v: float | None) -> str:
    """A duration: three decimals under ten seconds, one above ("" when there is none); a
    damaged log's absurd figure (1e308, or their sum, inf) in short."""
    if v is None:
        return ""
    if not abs(v) < 1e9:
        return f"{v:.3g} s"
    return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"


def _dim(d: object, symbol: str | None) -> str:
    return f"{symbol}={d}" if symbol is not None and type(d) is int and symbol != str(d) else str(d)
