"""Write rebuilt inputs with torch.save (`tlview.inputs/1`) and read them back exactly."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tlview.analyze.names import compile_ref
from tlview.errors import EXIT_NO_TRACE, EXIT_REFUSED, TlviewError
from tlview.model import Compile, Report
from tlview.runtime.output import output
from tlview.tensors.dtypes import need_torch
from tlview.tensors.fill import Devices
from tlview.tensors.layouts import quiet_sparse
from tlview.tensors.options import RebuildOptions
from tlview.tensors.plans import GroupPlan, TensorPlan, plans_for, real_bytes
from tlview.tensors.real import RealBuilder, build_real
from tlview.tensors.rebuilt import Rebuilt, collect, first_line
from tlview.units import nbytes
from tlview.version import __version__

if TYPE_CHECKING:
    from types import ModuleType
    from typing import TypedDict, TypeVar

    from torch import Tensor, UntypedStorage
    from torch import dtype as DType
    from torch.serialization import MAP_LOCATION
    from typing_extensions import NotRequired

    T = TypeVar("T")

    class GroupRecord(TypedDict):
        """One group's plans and storage contents, as `--emit` writes them (`_group_record`)."""

        describer: int
        storages: dict[str, int]
        zero: list[int]
        tensors: dict[str, dict[str, Any]]  # `TensorPlan.as_dict`
        sources: list[list[str | int]]  # [name, tensor id, logged source]
        source_notes: dict[str, list[str]]
        missing: dict[str, str]
        data: dict[str, list[str] | Tensor]  # storage -> ["source", name], or its bytes

    class Saved(TypedDict):
        """The object `--emit` writes (`saved`), by compile key where a key is per compile."""

        format: str
        torch_version: str | None
        written_by: str
        mode: str
        compiles: dict[str, dict[str, Tensor]]
        notes: dict[str, dict[str, list[str]]]
        failed: dict[str, dict[str, str]]
        exact: dict[str, dict[str, list[GroupRecord]]]
        values: NotRequired[dict[str, dict[str, dict[str, int | float | str]]]]


FORMAT = "tlview.inputs/1"


def saved(
    rebuilt: Iterable[tuple[str, Rebuilt]], torch_version: str | None, mode: str = "random"
) -> Saved:
    """The object `--emit` saves: plain tensors for any reader, plans for `load_inputs`."""
    compiles: dict[str, dict[str, Tensor]] = {}
    notes: dict[str, dict[str, list[str]]] = {}
    failed: dict[str, dict[str, str]] = {}
    exact: dict[str, dict[str, list[GroupRecord]]] = {}
    values: dict[str, dict[str, dict[str, int | float | str]]] = {}
    for key, r in rebuilt:
        plain, extra = _plain_tensors(r)
        compiles[key] = plain
        n = {k: list(v) for k, v in r.notes.items()}
        for src, texts in extra.items():
            n.setdefault(src, []).extend(texts)
        if n:
            notes[key] = n
        if r.failed:
            failed[key] = dict(r.failed)
        if r.logged:
            values[key] = {src: v.as_dict() for src, v in r.logged.items()}
        exact[key] = {"groups": [_group_record(g, r, plain) for g in r.groups]}
    return {
        "format": FORMAT,
        "torch_version": torch_version,
        "written_by": f"tlview {__version__}",
        "mode": mode,
        "compiles": compiles,
        "notes": notes,
        "failed": failed,
        "exact": exact,
        # mypy checks the empty branch against all of Saved's keys; it means: no values.
        **({"values": values} if values else {}),  # type: ignore[typeddict-item]
    }


def _plain_tensors(r: Rebuilt) -> tuple[dict[str, Tensor], dict[str, list[str]]]:
    """Tensors torch.save can write as they are; stand-in copies where it cannot share."""
    torch = need_torch()
    out: dict[str, Tensor] = {}
    extra: dict[str, list[str]] = {}
    primary: dict[int, DType] = {}  # storage cdata -> the dtype saved over it
    for g in r.groups:
        for name, tid, _src in g.sources:
            t = r.tensors.get(name)
            if t is None:
                continue
            kept, note = _plain_one(torch, g, g.tensors[tid], t, primary)
            if kept is not None:
                out[name] = kept
            if note is not None:
                extra.setdefault(name, []).append(note)
    for name, t in out.items():
        if t.requires_grad and not t.is_leaf:
            extra.setdefault(name, []).append(
                "not a leaf (the log has it made by an autograd op): torch.load gives a leaf; "
                "tlview.load_inputs restores it"
            )
    for name, lost in _meta_losses(torch, out).items():
        extra.setdefault(name, []).append(
            f"a meta tensor, which torch.save writes without its storage: torch.load gives "
            f"{lost}; tlview.load_inputs restores it"
        )
    return out, extra


def _plain_one(
    torch: ModuleType, g: GroupPlan, p: TensorPlan, t: Tensor, primary: dict[int, DType]
) -> tuple[Tensor | None, str | None]:
    """What `compiles` holds for one tensor (None: nothing) and the note that says how it
    differs: a subclass or what torch cannot carry is left out, a tensor over a freed storage
    or over one saved as another dtype is a copy."""
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return None, (
            f"{type(t).__name__}: torch.load(weights_only=True) cannot load it; "
            "use tlview.load_inputs"
        )
    if _unusual(torch, t) and (why := _not_carried(torch, t)) is not None:
        return None, (
            f"torch.save and torch.load do not carry it as it is ({why}); use tlview.load_inputs"
        )
    if t.layout != torch.strided:  # sparse: torch.save writes it; no storage to share
        # (a compressed one's parts are saved as the bytes of their storages too:
        # torch.save refuses one storage as two types, so a copy goes here)
        return (t if t.layout == torch.sparse_coo else t.clone()), None
    if p.storage in g.zero:
        return _copy(torch, t, zero_bytes=True), (
            "its storage has 0 bytes, which torch.save cannot write: a full storage "
            "stands in here; tlview.load_inputs restores it"
        )
    dt = primary.setdefault(t.untyped_storage()._cdata, t.dtype)
    if dt != t.dtype:
        return _copy(torch, t), (
            f"shares its storage with a {dt} tensor, which torch.save cannot write: "
            "a copy stands in here; tlview.load_inputs restores the sharing"
        )
    return t, None


def _meta_losses(torch: ModuleType, tensors: Mapping[str, Tensor]) -> dict[str, str]:
    """What torch.load gives differently for each meta tensor (no storage is saved for them):
    its storage offset, its storage's size, the storage it shared with other inputs."""
    metas = {
        k: t for k, t in tensors.items() if t.device.type == "meta" and t.layout == torch.strided
    }
    if not metas:
        return {}
    try:
        back = _reloaded(torch, metas)
    except Exception:  # save() says so for the whole file
        return {}
    before = {k: t.untyped_storage()._cdata for k, t in metas.items()}
    after = {k: t.untyped_storage()._cdata for k, t in back.items()}
    sharing: dict[int, list[str]] = {}  # storage -> the inputs over it, once: linear in inputs
    for k, key in before.items():
        sharing.setdefault(key, []).append(k)
    out: dict[str, str] = {}
    for k, t in metas.items():
        lost = _lost(t, back[k])
        shared = [o for o in sharing[before[k]] if o != k]
        if any(after[o] != after[k] for o in shared):
            lost.append(f"a storage of its own, not the one it shares with {', '.join(shared)}")
        if lost:
            out[k] = "; ".join(lost)
    return out


def _lost(t: Tensor, b: Tensor) -> list[str]:
    """How the meta tensor B read back differs from T: its storage offset, its storage's size."""
    lost = []
    if b.storage_offset() != t.storage_offset():
        lost.append(f"storage offset {b.storage_offset()}, not {t.storage_offset()}")
    if b.untyped_storage().nbytes() != t.untyped_storage().nbytes():
        lost.append(
            f"a storage of {b.untyped_storage().nbytes()} bytes, not {t.untyped_storage().nbytes()}"
        )
    return lost


# dtypes that torch.save and torch.load(weights_only=True) carry, whatever the tensor
_USUAL = (
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128",
    "int64", "int32", "int16", "int8", "uint8", "bool",
)  # fmt: skip


def _unusual(torch: ModuleType, t: Tensor) -> bool:
    """A tensor torch may not write or read back: sparse, empty, or of a rarer dtype."""
    return t.layout != torch.strided or t.numel() == 0 or str(t.dtype)[6:] not in _USUAL


def _not_carried(torch: ModuleType, t: Tensor) -> str | None:
    """Why torch.save then torch.load(weights_only=True) fail on t here, or None. A strided
    tensor is tried as one element of its dtype and requires_grad (a float8 leaf that requires
    grad cannot be read back): what fails is those, and trying t itself would hold two more
    copies of it (the bytes written, the tensor read back)."""
    try:
        if t.layout == torch.strided and t.numel() > 1:
            one = torch.empty(1, dtype=t.dtype, device=t.device, requires_grad=t.requires_grad)
            t = (
                torch.nn.Parameter(one, t.requires_grad)
                if isinstance(t, torch.nn.Parameter)
                else one
            )
        _reloaded(torch, t)
    except Exception as e:
        return f"{type(e).__name__}: {first_line(e)}"
    return None


def _reloaded(torch: ModuleType, obj: T) -> T:
    """obj written with torch.save and read back as a reader of the file would, in memory."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    back: T = torch.load(buf, weights_only=True)
    return back


def _copy(torch: ModuleType, t: Tensor, zero_bytes: bool = False) -> Tensor:
    """The same size, stride, offset and dtype on a storage of its own."""
    need = t.storage_offset() + 1
    for d, s in zip(t.shape, t.stride(), strict=False):
        need += (d - 1) * s if d else 0
    nbytes = need * t.element_size() if t.numel() else 0
    with torch.no_grad():
        if zero_bytes or t.device.type == "meta":
            st = torch.zeros(nbytes, dtype=torch.uint8, device=t.device).untyped_storage()
        else:
            raw = torch.empty(0, dtype=torch.uint8, device=t.device)
            raw.set_(t.untyped_storage(), 0, (nbytes,), (1,))
            st = raw.clone().untyped_storage()
        r: Tensor = torch.empty(0, dtype=t.dtype, device=t.device).set_(
            st, t.storage_offset(), t.shape, t.stride()
        )
    if isinstance(t, torch.nn.Parameter):
        param: Tensor = torch.nn.Parameter(r, requires_grad=t.requires_grad)
        return param
    if t.requires_grad:
        r.requires_grad_(True)
    return r


def _group_record(g: GroupPlan, r: Rebuilt, plain: Mapping[str, Tensor]) -> GroupRecord:
    """Plans and storage contents of one group: what `load_inputs` needs to rebuild exactly."""
    torch = need_torch()
    by_storage: dict[int, str] = {}
    for name, _tid, _src in g.sources:
        if name not in plain or plain[name] is not r.tensors.get(name):
            continue
        t = plain[name]
        if t.layout == torch.strided:
            by_storage.setdefault(t.untyped_storage()._cdata, name)
    data: dict[str, list[str] | Tensor] = {}
    for (d, key), st in r.storages.items():
        if d != g.describer or key in g.zero:
            continue
        src = by_storage.get(st._cdata)
        if src is not None:
            data[str(key)] = ["source", src]
        else:
            data[str(key)] = torch.empty(0, dtype=torch.uint8, device=st.device).set_(
                st, 0, (st.nbytes(),), (1,)
            )
    return {
        "describer": g.describer,
        "storages": {str(k): v for k, v in g.storages.items()},
        "zero": sorted(g.zero),
        "tensors": {str(k): p.as_dict() for k, p in g.tensors.items()},
        "sources": [[name, tid, src] for name, tid, src in g.sources],
        "source_notes": {k: list(v) for k, v in g.source_notes.items()},
        "missing": dict(g.missing),
        "data": data,
    }


def save(obj: Saved, out: IO[bytes]) -> None:
    torch = need_torch()
    try:
        torch.save(dict(obj), out)
    except Exception as e:  # what the checks of `_plain_tensors` did not foresee
        raise TlviewError(
            f"torch.save cannot write these tensors: {type(e).__name__}: {e}", EXIT_REFUSED
        ) from None


def load_inputs(
    path: str | Path, map_location: MAP_LOCATION = None, allow_import: Sequence[str] = ()
) -> dict[str, Any]:
    """Read a `tlview inputs --emit` file; `compiles` then holds the exact tensors and aliasing."""
    torch = need_torch()
    obj = _read(torch, path, map_location)
    plain = obj.get("compiles") or {}
    exact: dict[str, Any] = {}
    notes = {k: dict(v) for k, v in (obj.get("notes") or {}).items()}
    failed = {k: dict(v) for k, v in (obj.get("failed") or {}).items()}
    device = map_location if isinstance(map_location, str) else None
    # A meta file's freed (0-byte) storages are made again on meta, as its saved ones are.
    on = "meta" if obj.get("mode") == "meta" and device is None else "zeros"
    for key, rec in (obj.get("exact") or {}).items():
        got = Rebuilt({}, {}, {})
        for gd in rec.get("groups", []):
            g = _group_of(path, key, gd)
            b = RealBuilder(
                g,
                RebuildOptions(mode="zeros", allow_import=allow_import),
                filler=None,
                devices=Devices(torch, device, on),
                storages=_saved_storages(torch, gd, plain.get(key, {})),
                valid_offsets=False,
            )
            b.build_all()
            collect(got, g, b.memo, b.notes, b.errors)
        exact[key] = got.tensors
        for src, why in got.failed.items():
            failed.setdefault(key, {}).setdefault(src, why)
    return {**obj, "compiles": exact, "notes": notes, "failed": failed}


def _read(torch: ModuleType, path: str | Path, map_location: MAP_LOCATION) -> dict[str, Any]:
    """The file's object, checked to be a tlview.inputs/1 file."""
    quiet_sparse(torch)  # a compressed sparse input, rebuilt by torch.load: torch says "beta"
    try:
        obj = torch.load(str(path), weights_only=True, map_location=map_location)
    except FileNotFoundError:
        raise TlviewError(f"{path}: no such file", EXIT_NO_TRACE) from None
    except Exception as e:
        raise TlviewError(f"{path}: not a torch.save file: {e}", EXIT_NO_TRACE) from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise TlviewError(f"{path}: not a {FORMAT} file (written by tlview inputs --emit)")
    return obj


def _group_of(path: str | Path, key: str, gd: Mapping[str, Any]) -> GroupPlan:
    try:
        return _group_from(gd)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise TlviewError(
            f"{path}: compile {key}: its plans are damaged ({type(e).__name__}: {e})"
        ) from None


def _saved_storages(
    torch: ModuleType, gd: Mapping[str, Any], plain: Mapping[str, Any]
) -> dict[int, UntypedStorage]:
    """A group's storages as saved: a plain tensor's (by its source) or a tensor of their own."""
    storages: dict[int, UntypedStorage] = {}
    for k, v in gd.get("data", {}).items():
        if isinstance(v, list) and len(v) == 2 and v[0] == "source":
            t = plain.get(v[1])
            if t is not None:
                storages[int(k)] = t.untyped_storage()
        elif isinstance(v, torch.Tensor):
            storages[int(k)] = v.untyped_storage()
    return storages


def _group_from(gd: Mapping[str, Any]) -> GroupPlan:
    return GroupPlan(
        describer=int(gd["describer"]),
        storages={int(k): int(v) for k, v in gd["storages"].items()},
        zero={int(s) for s in gd.get("zero", [])},
        tensors={int(k): TensorPlan.from_dict(v) for k, v in gd["tensors"].items()},
        sources=[(str(n), int(t), str(s)) for n, t, s in gd["sources"]],
        source_notes={k: list(v) for k, v in gd.get("source_notes", {}).items()},
        missing=dict(gd.get("missing", {})),
    )


def emit_file(
    report: Report,
    chosen: Sequence[Compile],
    path: str,
    opts: RebuildOptions,
    *,
    force: bool = False,
) -> str:
    """Rebuild the chosen compiles' inputs and write them to PATH; a one-line summary."""
    need_torch()
    if opts.mode != "meta":
        # What is allocated is what is written: the tensors and the copies saving makes.
        need = sum(real_bytes(plans_for(c)[1], saved=True) for c in chosen)
        if need > opts.max_bytes:
            raise TlviewError(
                f"{report.path}: the inputs of {len(chosen)} compile(s) need {nbytes(need)} of "
                f"memory, over --max-bytes {nbytes(opts.max_bytes)} (and as much in {path}); "
                "use --mode meta, choose one compile with --compile-id, or raise --max-bytes",
                EXIT_REFUSED,
            )
    each = dataclasses.replace(opts, max_bytes=1 << 62)  # all of them were measured above
    many = len({log.name for log in report.logs}) > 1
    built: list[tuple[str, Rebuilt]] = []
    keys: set[str] = set()
    for c in chosen:
        key = compile_ref(c, many)
        if key in keys:
            key = f"{key}@{c.pid}"
        keys.add(key)
        built.append((key, build_real(c, each)))
    obj = saved(built, report.torch_version, opts.mode)
    with output(path, force) as out:
        save(obj, out)
    return _summary(built, obj, opts.mode)


def _summary(built: list[tuple[str, Rebuilt]], obj: Saved, mode: str) -> str:
    """The line `--emit` prints: tensors, notes, failures, and the values as logged."""
    tensors = sum(len(r.tensors) for _, r in built)
    noted = sum(len(n) for n in obj["notes"].values())  # with what writing them added
    failed = sum(len(r.failed) for _, r in built)
    line = f"{tensors} tensor(s) of {len(built)} compile(s); {noted} with notes, {failed} failed"
    logged = sum(len(r.logged) for _, r in built)
    if not logged:
        return line
    rest = {"random": "random", "zeros": "zeros"}.get(mode, "not made (meta)")
    return f"{line}; {logged} value(s) as the log recorded them, the rest {rest}"
