"""A compile's inputs table, and the picture of the storages under them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tlview.analyze.summary import input_flags
from tlview.index.dims import DynamicDims, input_symbols
from tlview.model import Compile, Dim, Input, StorageDesc, TensorDesc
from tlview.render.html.fmt import pct
from tlview.units import dims, itemsize, nbytes


@dataclass(slots=True)
class Span:
    """The bytes of a storage one tensor covers: offset * itemsize to the end of its last element."""

    label: str
    tensor: TensorDesc
    start: int | None  # bytes; None when the span is symbolic or the dtype unknown
    end: int | None
    x: str = "0"  # percent of the storage bar
    w: str = "0"
    input: bool = True  # an input of the compile (not only its base or an inner tensor)

    @property
    def detail(self) -> str:
        """Written only for the storages drawn: most inputs fill a storage of their own."""
        return _span_text(self.tensor, self.start, self.end)


@dataclass(slots=True)
class StorageView:
    label: str
    size: int | str | None
    spans: list[Span] = field(default_factory=list)
    alias_group: int | None = None
    note: str | None = None


class InnerView(NamedTuple):
    """An inner tensor of an input (a tensor subclass's), as a row under it."""

    name: str
    size: str
    stride: str
    offset: str
    dtype: str
    device: str


class InputView(NamedTuple):
    """One row of a compile's inputs table, in the order the template unpacks it (a tuple:
    the template reads no attributes, the page's costliest loop)."""

    superseded: bool
    first: str | None  # the first source, if any
    rest: list[str]  # the other sources
    tensor_id: Any
    size: str
    stride: str
    offset: str
    dtype: str
    device: str
    storage: str
    alias_group: int | None
    flags: str
    inner: list[InnerView]
    notes: list[str]
    source: str


def input_view(
    i: Input,
    mark: str,
    names: Mapping[tuple[int, int], str],
    dynamic: DynamicDims,
) -> InputView:
    t = i.tensor
    st = i.storage
    sources = i.sources
    return InputView(
        i.superseded,
        sources[0] + mark if sources else None,
        sources[1:],
        t.id,
        dims(t.size, input_symbols(i, dynamic) if dynamic else None),
        dims(t.stride),
        str(t.storage_offset),
        t.dtype.replace("torch.", ""),
        t.device,
        "" if st is None else nbytes(st.size),
        i.alias_group,
        input_flags(i, names),
        [_inner(name, t) for name, t in i.inner.items()],
        i.notes,
        i.source,
    )


def _inner(name: str, t: TensorDesc) -> InnerView:
    return InnerView(
        name,
        dims(t.size),
        dims(t.stride),
        str(t.storage_offset),
        t.dtype.replace("torch.", ""),
        t.device,
    )


def byte_range(t: TensorDesc) -> tuple[int | None, int | None]:
    """Bytes [start, end) of its storage a tensor covers, or (None, None) when symbolic."""
    size, stride, off = t.size, t.stride, t.storage_offset
    isz = itemsize(t.dtype)
    if isz is None or size is None or stride is None or len(size) != len(stride):
        return None, None
    steps = _steps(size, stride)
    if not isinstance(off, int) or steps is None:
        return None, None
    if 0 in size:  # a dim of 0: it covers nothing, at its offset
        return off * isz, off * isz
    lo = off + sum(x for x in steps if x < 0)
    hi = off + sum(x for x in steps if x >= 0)
    return lo * isz, (hi + 1) * isz


def _steps(size: list[Dim], stride: list[Dim]) -> list[int] | None:
    """Each dim's reach, (size - 1) * stride; None when one is symbolic."""
    out = []
    for d, s in zip(size, stride, strict=True):
        if not isinstance(d, int) or not isinstance(s, int):
            return None
        out.append((d - 1) * s)
    return out


def _span_text(t: TensorDesc, start: int | None, end: int | None) -> str:
    shape = f"{dims(t.size)} stride {dims(t.stride)} offset {t.storage_offset} {t.dtype.replace('torch.', '')}"
    if start is None or end is None:
        return f"{shape}: span not computable (symbolic or unknown dtype)"
    return f"{shape}: bytes {start:,} to {end:,}"


class _Storages:
    """The storages under one compile's inputs, as their spans are added."""

    def __init__(self, c: Compile) -> None:
        self.by_key: dict[tuple[int, int], StorageView] = {}
        self.seen: set[tuple[int, int, int]] = set()
        self.described: dict[tuple[int, int], StorageDesc] = {
            (s.describer, sid): sd for s in c.input_sets for sid, sd in s.storages.items()
        }
        # Storages a base or an inner tensor also covers: never plain.
        self.shared = {
            (i.describer, t.storage)
            for i in c.inputs
            if i.base is not None or i.inner
            for t in (i.base, *i.inner.values())
            if t is not None
        }

    def add(
        self, t: TensorDesc, describer: int, label: str, is_input: bool, group: int | None
    ) -> None:
        st = t.storage
        if st is None or (describer, st, t.id) in self.seen:
            return
        self.seen.add((describer, st, t.id))
        key = (describer, st)
        sv = self.by_key.get(key)
        if sv is None:
            sd = self.described.get(key)
            size = None if sd is None else sd.size
            sv = self.by_key[key] = StorageView(label=f"storage {st}", size=size)
        if group:
            sv.alias_group = group
        start, end = byte_range(t)
        sv.spans.append(Span(label, t, start, end, input=is_input))

    def alone(self, i: Input) -> bool:
        """The common case, an input alone on its storage and covering all of it: counted
        without a picture (as `_plain` would find)."""
        st = i.tensor.storage
        if st is None or i.alias_group or (i.describer, st) in self.shared:
            return False
        desc = self.described.get((i.describer, st))
        size = None if desc is None else desc.size
        start, end = byte_range(i.tensor)
        return start == 0 and isinstance(size, int) and end == size


def storages(c: Compile) -> tuple[list[StorageView], int]:
    """The storages under the compile's inputs worth a picture, each with the span each tensor
    on it covers, and how many others there are (`_plain`: one input covering all of it)."""
    got = _Storages(c)
    plain = 0
    for i in c.inputs:
        if got.alone(i):
            plain += 1
        else:
            got.add(i.tensor, i.describer, i.source, True, i.alias_group)
    for i in c.inputs:
        if i.base is not None:
            got.add(i.base, i.describer, f"base of {i.source}", False, None)
        for name, t in i.inner.items():
            got.add(t, i.describer, f"{i.source}.{name}", False, None)
    out = []
    for sv in got.by_key.values():
        if _plain(sv):
            plain += 1
        else:
            _scale(sv)
            out.append(sv)
    out.sort(key=lambda s: (s.alias_group is None, s.alias_group or 0))
    return out, plain


def _plain(sv: StorageView) -> bool:
    """A storage with one input covering all of it: nothing to see in a picture of aliasing."""
    if sv.alias_group or sv.note or len(sv.spans) != 1:
        return False
    sp = sv.spans[0]
    return sp.input and sp.start == 0 and isinstance(sv.size, int) and sp.end == sv.size


def _scale(sv: StorageView) -> None:
    """Each span's place on the storage's bar, and the storage's note when tensors reach past it
    or its size is symbolic."""
    total = _extent(sv)
    for s in sv.spans:
        if s.start is None or s.end is None or total <= 0:
            s.x, s.w = "0", "0"
            continue
        s.x = pct(100 * s.start / total)
        s.w = pct(max(0.4, 100 * (s.end - s.start) / total))


def _extent(sv: StorageView) -> int:
    """The bytes a storage's bar stands for: its size, or the furthest tensor on it."""
    ends = [s.end for s in sv.spans if s.end is not None]
    size = sv.size if isinstance(sv.size, int) and not isinstance(sv.size, bool) else None
    if isinstance(sv.size, str):
        sv.note = f"symbolic storage size {sv.size}; drawn to the furthest tensor"
    if size is None or not ends or max(ends) <= size:
        return size or max(ends, default=0)
    zero = " (resized to zero, as FSDP does)" if size == 0 else ""
    sv.note = f"tensors reach byte {max(ends):,} of a {size:,}-byte storage{zero}"
    return max(ends)
