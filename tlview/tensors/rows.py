"""`tlview inputs`' listing: each source's metadata and whether it rebuilds as fake and as real."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tlview.errors import TlviewError
from tlview.index.dims import GraphDims, dynamic_dims, input_symbols
from tlview.model import Compile
from tlview.tensors.dtypes import need_torch
from tlview.tensors.fake import build_fakes
from tlview.tensors.fill import Devices
from tlview.tensors.options import RebuildOptions
from tlview.tensors.plans import plans_for
from tlview.tensors.real import build_real
from tlview.tensors.rebuilt import Rebuilt
from tlview.units import dims


def _fmt_dims(v: Sequence[Any] | None, symbols: Mapping[int, str] | None = None) -> str:
    return "-" if v is None else dims(list(v), symbols)


def input_rows(
    c: Compile, allow_import: Sequence[str] = ()
) -> tuple[list[tuple[str, ...]], list[str], str | None]:
    """Rows for `tlview inputs`: each source with its metadata and how it rebuilds."""
    by_tensor = {(inp.describer, inp.tensor.id): inp for inp in c.inputs}
    dynamic = dynamic_dims(c)
    taken, groups = plans_for(c)
    fake: Rebuilt | None = None
    real: Rebuilt | None = None
    devices: Devices | None = None  # where --emit and repro build each input
    problem = None
    try:
        torch = need_torch()
    except TlviewError:
        problem = "torch is not installed: the fake and real rebuilds were not tried"
    else:
        fake = build_fakes(c, allow_import=allow_import)
        real = build_real(c, RebuildOptions(mode="meta", allow_import=allow_import))
        devices = Devices(torch, None, "random")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for g in groups:
        for name, tid, src in g.sources:
            p = g.tensors.get(tid)
            inp = by_tensor.get((g.describer, tid))
            alias = f"A{inp.alias_group}" if inp is not None and inp.alias_group else "-"
            shape = stride = offset = dtype = dev = "?"
            real_status = _status(real, name)
            if p is not None and devices is not None and real_status.startswith("ok"):
                # The listing builds meta tensors; --emit builds real ones, on a device here.
                built_on, why = devices.map(p.device)
                if why is not None:
                    real_status += f" ({built_on})"
                    notes.append(
                        f"{name}: real: logged on {p.device}, which this machine does not have: "
                        f"--emit and repro build it on {built_on} (--device DEV chooses)"
                    )
            if p is not None:
                symbols = input_symbols(inp, dynamic) if inp is not None else None
                steps = _stride_symbols(g.symbols or taken, src, p.ndim)
                shape, stride = _fmt_dims(p.size, symbols), _fmt_dims(p.stride, steps)
                sym = (g.symbols or taken).names.get(f"{src}.storage_offset()")
                offset = f"{sym}={p.offset}" if isinstance(sym, str) else str(p.offset)
                dtype, dev = p.dtype, p.device
                if p.type_name and p.subclass:
                    dtype += f" ({p.type_name.rsplit('.', 1)[-1]})"
            rows.append(
                (
                    name,
                    shape,
                    stride,
                    offset,
                    dtype,
                    dev,
                    alias,
                    _status(fake, name),
                    real_status,
                )
            )
            notes.extend(_note_lines(name, fake, real))
    return rows, notes, problem


def _stride_symbols(symbols: GraphDims, source: str, ndim: int) -> dict[int, str]:
    """The strides the graph took as symbols (a slice's, a view's of its base's sizes)."""
    out: dict[int, str] = {}
    for k in range(ndim):
        v = symbols.names.get(f"{source}.stride()[{k}]")
        if isinstance(v, str):
            out[k] = v
    return out


def _status(r: Rebuilt | None, name: str) -> str:
    if r is None:
        return "-"
    if name in r.failed:
        return "FAILED"
    return "ok*" if r.notes.get(name) else "ok"


def _note_lines(name: str, fake: Rebuilt | None, real: Rebuilt | None) -> list[str]:
    out: list[str] = []
    fn = fake.notes.get(name, []) if fake else []
    rn = real.notes.get(name, []) if real else []
    for n in fn:
        out.append(f"{name}: {n}" if n in rn else f"{name}: fake: {n}")
    for n in rn:
        if n not in fn:
            out.append(f"{name}: real: {n}")
    for label, r in (("fake", fake), ("real", real)):
        if r is not None and name in r.failed:
            out.append(f"{name}: not rebuilt as {label}: {r.failed[name]}")
    return out
