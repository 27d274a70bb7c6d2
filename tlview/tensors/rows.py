"""`tlview inputs`' listing: each source's metadata as the report writes it, and with `--check`
whether it rebuilds as a fake and as a real tensor (the only part that needs torch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tlview.errors import TlviewError
from tlview.index.dims import DynamicDims, GraphDims, dynamic_dims, input_symbols
from tlview.model import Compile, Input
from tlview.tensors.dtypes import import_refusal
from tlview.tensors.plans import GroupPlan, TensorPlan, plans_for
from tlview.tensors.rebuilt import Rebuilt
from tlview.units import dims, nbytes

if TYPE_CHECKING:
    from tlview.tensors.fill import Devices

# The columns of the report's inputs table that the listing shares, named as the report names
# them; `--check` adds CHECKED.
HEAD = ("source", "size", "stride", "offset", "dtype", "device", "storage", "alias")
CHECKED = ("fake", "real")
NO_TORCH = "torch is not installed: the fake and real rebuilds were not tried"


@dataclass(slots=True)
class InputRows:
    """One compile's listing: a row of cells per source (HEAD, then CHECKED when checked), the
    notes below its table, and why the rebuilds were not tried."""

    rows: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


@dataclass(slots=True)
class _Checked:
    """What `--check` built for one compile: its fakes and meta tensors, and where `--emit`
    would build each input."""

    fake: Rebuilt
    real: Rebuilt
    devices: Devices


def input_rows(c: Compile, allow_import: Sequence[str] = (), check: bool = False) -> InputRows:
    """Rows for `tlview inputs`: each source with its metadata; with `check`, how it rebuilds
    (torch imported, fakes and meta tensors built); without, nothing of torch is touched."""
    by_tensor = {(inp.describer, inp.tensor.id): inp for inp in c.inputs}
    dynamic = dynamic_dims(c)
    taken, groups = plans_for(c)
    out = InputRows()
    built = _check(c, allow_import, out) if check else None
    for g in groups:
        for name, tid, src in g.sources:
            inp = by_tensor.get((g.describer, tid))
            row = _metadata(name, g, g.tensors.get(tid), inp, src, taken, dynamic)
            if check:
                row += _rebuilt(name, g.tensors.get(tid), built, out.notes)
            else:
                out.notes.extend(_refused(name, g.tensors.get(tid), allow_import))
            out.rows.append(row)
    return out


def _check(c: Compile, allow_import: Sequence[str], out: InputRows) -> _Checked | None:
    """The compile's inputs built as fakes and meta tensors, or None (and why) without torch."""
    from tlview.tensors.dtypes import need_torch

    try:
        torch = need_torch()
    except TlviewError:
        out.problem = NO_TORCH
        return None
    from tlview.tensors.fake import build_fakes
    from tlview.tensors.fill import Devices
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.real import build_real

    fake = build_fakes(c, allow_import=allow_import)
    real = build_real(c, RebuildOptions(mode="meta", allow_import=allow_import))
    return _Checked(fake, real, Devices(torch, None, "random"))


def _metadata(
    name: str,
    g: GroupPlan,
    p: TensorPlan | None,
    inp: Input | None,
    src: str,
    taken: GraphDims,
    dynamic: DynamicDims,
) -> tuple[str, ...]:
    """A source's cells of HEAD: sizes with the graph's symbols, as the report shows them."""
    alias = f"#{inp.alias_group}" if inp is not None and inp.alias_group else ""
    storage = "" if inp is None or inp.storage is None else nbytes(inp.storage.size)
    if p is None:
        return (name, "?", "?", "?", "?", "?", storage, alias)
    symbols = input_symbols(inp, dynamic) if inp is not None else None
    steps = _stride_symbols(g.symbols or taken, src, p.ndim)
    dtype = p.dtype
    if p.type_name and p.subclass:
        dtype += f" ({p.type_name.rsplit('.', 1)[-1]})"
    return (
        name,
        _fmt_dims(p.size, symbols),
        _fmt_dims(p.stride, steps),
        str(p.offset),
        dtype,
        p.device,
        storage,
        alias,
    )


def _rebuilt(
    name: str, p: TensorPlan | None, built: _Checked | None, notes: list[str]
) -> tuple[str, str]:
    """A source's cells of CHECKED, and its notes added to NOTES."""
    if built is None:
        return ("-", "-")
    real_status = _status(built.real, name)
    if p is not None and real_status.startswith("ok"):
        # The listing builds meta tensors; --emit builds real ones, on a device here.
        built_on, why = built.devices.map(p.device)
        if why is not None:
            real_status += f" ({built_on})"
            notes.append(
                f"{name}: real: logged on {p.device}, which this machine does not have: "
                f"--emit and repro build it on {built_on} (--device DEV chooses)"
            )
    notes.extend(_note_lines(name, built.fake, built.real))
    return (_status(built.fake, name), real_status)


def _refused(name: str, p: TensorPlan | None, allow_import: Sequence[str]) -> list[str]:
    """What the plan alone already says will not rebuild (no torch needed to know it): a
    DTensor's mesh past the bound, a subclass whose module may not be imported."""
    if p is None:
        return []
    error = p.dtensor.get("error") if p.dtensor is not None else None
    if not isinstance(error, str) and p.subclass and p.type_name:
        error = import_refusal(p.type_name, allow_import)
    return [f"{name}: not rebuilt: {error}"] if isinstance(error, str) else []


def _fmt_dims(v: Sequence[Any] | None, symbols: Mapping[int, str] | None = None) -> str:
    return "-" if v is None else dims(list(v), symbols)


def _stride_symbols(symbols: GraphDims, source: str, ndim: int) -> dict[int, str]:
    """The strides the graph took as symbols (a slice's, a view's of its base's sizes)."""
    out: dict[int, str] = {}
    for k in range(ndim):
        v = symbols.names.get(f"{source}.stride()[{k}]")
        if isinstance(v, str):
            out[k] = v
    return out


def _status(r: Rebuilt, name: str) -> str:
    if name in r.failed:
        return "FAILED"
    return "ok*" if r.notes.get(name) else "ok"


def _note_lines(name: str, fake: Rebuilt, real: Rebuilt) -> list[str]:
    out: list[str] = []
    fn = fake.notes.get(name, [])
    rn = real.notes.get(name, [])
    for n in fn:
        out.append(f"{name}: {n}" if n in rn else f"{name}: fake: {n}")
    for n in rn:
        if n not in fn:
            out.append(f"{name}: real: {n}")
    for label, r in (("fake", fake), ("real", real)):
        if name in r.failed:
            out.append(f"{name}: not rebuilt as {label}: {r.failed[name]}")
    return out
