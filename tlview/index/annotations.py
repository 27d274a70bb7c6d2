"""fx's annotations of a graph's values read as text: `f32[s0, 4][4, 1]cpu`, `Sym(s0)`, and the
placeholders of a logged graph's forward with theirs (what the rebuild takes symbols from)."""

from __future__ import annotations

import re
from typing import NamedTuple

from tlview.model import Dim
from tlview.units import number

# torch's dtype abbreviations in graph annotations (`torch._C._get_all_dtypes()`, `.abbr`).
DTYPES = {
    "u8": "uint8",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "bf16": "bfloat16",
    "c32": "complex32",
    "c64": "complex64",
    "c128": "complex128",
    "b8": "bool",
    "f8e5m2": "float8_e5m2",
    "f8e4m3fn": "float8_e4m3fn",
    "f8e5m2fnuz": "float8_e5m2fnuz",
    "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fnx2": "float4_e2m1fn_x2",
}
# A subclass wraps its tensor, with what else it prints after it: `DTensor(f32[8][1]cpu, S(0))`.
_TENSOR = re.compile(
    r"(?:(?P<wrap>\w+)\()?(?P<dtype>\w+)\[(?P<size>[^\]]*)\]\[(?P<stride>[^\]]*)\]"
    r"(?P<device>[\w:]*)(?(wrap)(?:, .*)?\))"
)
_SYM = re.compile(r"Sym\((?P<expr>.*)\)")
_INT = re.compile(r"-?\d+", re.ASCII)  # U+0663 is no Python literal
# The forward of a print_readable payload: its parameters, up to the colon that ends them.
_FORWARD = re.compile(rb"\n\s*def forward\(self(?P<args>[^\n]*)\):")
# One parameter: its name, and its annotation in quotes (or a bare class, as DeviceMesh is).
_PARAM = re.compile(r",\s*(?P<name>\w+)\s*:\s*(?:\"(?P<text>[^\"]*)\"|(?P<bare>[\w.]+))")
MAX_SIGNATURE = 1 << 20  # bytes of a forward's parameters read (a model of ten thousand inputs)


class TensorType(NamedTuple):
    """A tensor annotation as fx prints it: `f32[s0, 4][4, 1]cpu`, `TwoTensor(f32[3][1]cpu)`."""

    dtype: str  # the abbreviation as printed: f32, bf16, ...
    size: list[Dim]
    stride: list[Dim]
    device: str
    wrapper: str | None = None  # the subclass name, for subclass tensors

    @property
    def torch_dtype(self) -> str | None:
        """The `torch.<name>` attribute of the dtype, or None for an abbreviation we don't know."""
        return DTYPES.get(self.dtype)


def tensor_type(annotation: str | None) -> TensorType | None:
    """The tensor an fx annotation describes, or None when it is not a tensor annotation."""
    if not annotation:
        return None
    m = _TENSOR.fullmatch(annotation.strip())
    if not m or m.group("dtype") == "Sym":
        return None
    return TensorType(
        dtype=m.group("dtype"),
        size=_dims(m.group("size")),
        stride=_dims(m.group("stride")),
        device=m.group("device"),
        wrapper=m.group("wrap"),
    )


def sym_expr(annotation: str | None) -> str | None:
    """The expression of a `Sym(s0)` annotation."""
    m = _SYM.fullmatch((annotation or "").strip())
    return m.group("expr").strip() if m else None


def forward_params(payload: bytes | None) -> dict[str, str] | None:
    """A graph's placeholders and their annotations (`{"L_x_": "f32[s0][1]cpu"}`), read from
    its print_readable payload; None when it has no forward tlview can read."""
    if not payload:
        return None
    m = _FORWARD.search(payload, 0, MAX_SIGNATURE)
    if m is None:
        return None
    text = m.group("args").decode("utf-8", "replace")
    out: dict[str, str] = {}
    for p in _PARAM.finditer(text):
        out[p.group("name")] = p.group("text") if p.group("text") is not None else p.group("bare")
    return out


def _dims(text: str) -> list[Dim]:
    out: list[Dim] = []
    for part in split_top(text):
        part = part.strip()
        if not part:
            continue
        v = number(part)
        out.append(part if v is None else v)
    return out


def split_top(text: str) -> list[str]:
    """Split on commas outside parentheses: `Max(1, s0), 4` is two dims."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts
