"""Sizes, shapes and times written the same way in every output: the terminal, the page, messages."""

from __future__ import annotations

import re
from collections.abc import Mapping

from tlview.errors import EXIT_USAGE, TlviewError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def nbytes(v: object) -> str:
    """A byte count in binary units ("1.5 KiB"); a value that is not a number, as it is."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "?" if v is None else str(v)
    if isinstance(v, int) and v.bit_length() > 1000:  # a float cannot hold it (a log's claim)
        return f"about 2^{v.bit_length() - 1} B"
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
    """A dim with the graph's symbol for it and its value here: `s77=8`, `s20=j1` (a jagged
    dim the graph took as a symbol); a dim logged as an expression stays as logged."""
    text = str(d)
    if symbol is None or symbol == text or not (type(d) is int or _NESTED_INT.fullmatch(text)):
        return text
    return f"{symbol}={text}"


_NESTED_INT = re.compile(r"(?:\d+\*)?j\d+")


# Bytes per element of each dtype torch logs, by its name without `torch.`.
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
    "bits8": 1,
    "bits16": 2,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
    "float4_e2m1fn_x2": 1,
}


def itemsize(dtype: str) -> int | None:
    """Bytes per element of a logged dtype repr (`torch.float32`), None when unknown."""
    name = dtype.removeprefix("torch.")
    if name in ITEMSIZE:
        return ITEMSIZE[name]
    if name.startswith("float8"):
        return 1
    if re.fullmatch(r"u?int[1-7]", name):
        return 1
    return None


def short_path(p: str | None) -> str:
    """A file as every table of the terminal and the page names it: its folder and its name
    (`pkg/f.py`), enough to know it, short enough for a column; the one rule for all of them."""
    if not p:
        return ""
    parts = p.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def parse_bytes(text: str, what: str = "size") -> int:
    """`8G`, `512M`, `1000000` -> bytes (K, M, G, T are powers of 1024)."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise TlviewError(
            f"{what} {text!r}: expected a size such as 8G, 512M or 1000000", EXIT_USAGE
        )
    unit = m.group(2).lower()
    scale = 1024 ** (1 + "kmgt".index(unit)) if unit else 1
    return int(float(m.group(1)) * scale)


MAX_DIGITS = 19  # digits of a number read from text: below 2**64, so JSON and int64 take it
_DIGITS = re.compile(rf"-?[0-9]{{1,{MAX_DIGITS}}}", re.ASCII)


def number(text: str | bytes) -> int | None:
    """The integer TEXT writes, as ASCII digits (a sign allowed), at most MAX_DIGITS of them;
    None for anything else (a number of 5,000 digits, U+0663, `+1`, ` 1`): the one way tlview
    reads a number from a log's text, so no parse fails on one and no int past 64 bits is made."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    if _DIGITS.fullmatch(text) is None:
        return None
    v = int(text)
    return v if -(1 << 63) <= v < 1 << 64 else None
