"""Values the log holds for a compile's inputs: a Python scalar's (`create_symbol` of
`L['k']` with `"val": "4"`), a float dynamo turned into a tensor (`___as_tensor(L['eps'])`, its
symbol's value), a tensor whose `.item()` dynamo made a symbol of (`L['b'].item()`). No torch:
the rebuild fills those tensors with them, the API and `--emit` report them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tlview.model import Compile, Symbol
from tlview.units import number

AS_TENSOR = "___as_tensor("
_ITEM = ".item()"
_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|-?(?:inf|nan)", re.ASCII)
# Sources of a tensor's own sizes, strides and offset: their values are the tensor's layout.
_LAYOUT = re.compile(r".+\.(?:size|stride)\(\)\[\d+\]|.+\.storage_offset\(\)")


@dataclass(frozen=True, slots=True)
class Logged:
    """A value the log recorded: the number, the symbol it was, and that symbol's source."""

    value: int | float
    symbol: str
    source: str

    def words(self) -> str:
        """`1e-05 (zf3, the value the log recorded for L['self']._modules['ln'].eps)`."""
        return f"{self.value!r} ({self.symbol}, the value the log recorded for {self.source})"

    def as_dict(self) -> dict[str, int | float | str]:
        """Plain data, as `--emit` writes it."""
        return {"value": self.value, "symbol": self.symbol, "source": self.source}


def logged_values(c: Compile) -> dict[str, Logged]:
    """Input source -> the value the log recorded for it: each tensor input that holds one
    value the log has (`___as_tensor(S)` and `T` of `T.item()`, as described), and each
    Python scalar input (`L['k']`); the first value logged for each."""
    out: dict[str, Logged] = {}
    for s in c.symbols:
        got = _value(s)
        if got is None or s.source is None:
            continue
        src = s.source
        if src.endswith(_ITEM):
            out.setdefault(src[: -len(_ITEM)], Logged(got, s.symbol, src))
        elif not src.startswith("<") and not _LAYOUT.fullmatch(src):
            out.setdefault(f"{AS_TENSOR}{src})", Logged(got, s.symbol, src))
            out.setdefault(src, Logged(got, s.symbol, src))
    return out


def tensor_values(c: Compile, described: set[str]) -> dict[str, Logged]:
    """`logged_values` of the described tensors: what the rebuild fills them with."""
    return {k: v for k, v in logged_values(c).items() if k in described}


def scalar_values(c: Compile, described: set[str]) -> dict[str, Logged]:
    """`logged_values` of the Python scalars the compile took (none dynamo made a tensor)."""
    return {
        k: v
        for k, v in logged_values(c).items()
        if k not in described
        and not k.startswith(AS_TENSOR)
        and f"{AS_TENSOR}{k})" not in described
        and f"{k}{_ITEM}" != v.source
    }


def _value(s: Symbol) -> int | float | None:
    """A created symbol's logged value as a number (an int where it is one)."""
    if s.kind != "created" or s.value is None:
        return None
    text = s.value.strip()
    v = number(text)
    if v is not None:
        return v
    if not _FLOAT.fullmatch(text):
        return None
    f = float(text)
    return f if math.isfinite(f) else None
