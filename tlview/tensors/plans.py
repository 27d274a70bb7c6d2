"""The logged records of a compile made concrete and checked, without torch: what builders build.

A compile's plans are made once and kept while its records are unchanged (`plans_for`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tlview.index.dims import GraphDims, graph_dims
from tlview.index.kinds import is_int
from tlview.model import Compile, InputSet, StorageDesc, TensorDesc
from tlview.reprs import device_name
from tlview.tensors.exprs import eval_expr
from tlview.tensors.mesh import MESH_BYTES_PER_RANK, dtensor_plan, is_dtensor, mesh_ranks
from tlview.units import itemsize, number

if TYPE_CHECKING:
    from tlview.tensors.mesh import DTensorPlan

    _Mark = tuple[int, int, int, tuple[tuple[int, int, int, int], ...]]  # see _plan_mark

_QUANTIZED = frozenset({"qint8", "quint8", "qint32", "quint4x2", "quint2x4"})


NESTED = re.compile(r"(?:([0-9]+)\*)?j([0-9]+)")


_SYMBOL = re.compile(r"[su]\d+")


# Sizes, strides, offsets and storage bytes torch can build: int64. A log may claim more (a
# symbolic size of `1048575**64` evaluates); such a tensor is refused with its reason.
MAX_BUILD = 1 << 63


def dtype_name(text: object) -> str | None:
    """`torch.float32` -> `float32`; None when the text is not a dtype repr."""
    return _dtype_name(text) if isinstance(text, str) else None


@functools.lru_cache(maxsize=256)
def _dtype_name(text: str) -> str | None:
    m = re.fullmatch(r"torch\.(\w+)", text.strip())
    return m.group(1) if m else None


def _device(text: object) -> str:
    return _device_name(text) if isinstance(text, str) else "?"


@functools.lru_cache(maxsize=256)
def _device_name(text: str) -> str:
    return device_name(text)


@dataclass(slots=True)
class TensorPlan:
    """One described tensor with concrete sizes: what both builders (real and fake) need."""

    id: int
    dtype: str  # "float32"
    device: str  # "cpu", "cuda:0"
    size: list[int | str]  # str only for nested ints ("j1", "8*j1")
    stride: list[int | str] | None
    offset: int
    storage: int | None
    layout: str = "strided"
    leaf: bool = False
    requires_grad: bool = False
    view: bool = False
    param: bool = False
    conj: bool = False
    neg: bool = False
    inference: bool = False
    nested: bool = False
    subclass: bool = False
    sparse: bool = False
    functorch: bool = False
    functional: bool = False
    mkldnn: bool = False
    base: int | None = None
    grad: int | None = None
    attrs: dict[str, int] = field(default_factory=dict)
    type_name: str | None = None
    ctx: str | None = None
    creation_meta: str | None = None
    nested_int: int | None = None
    dynamic_indices: list[int] = field(default_factory=list)
    hint_overrides: dict[int, int] = field(default_factory=dict)
    sparse_dim: int | None = None
    dense_dim: int | None = None
    coalesced: bool | None = None
    batched: bool = False  # vmap's BatchedTensor (functorch: grad's GradTrackingTensor)
    unwrapped: int | None = None  # the tensor a functorch or functional wrapper wraps
    bdim: int | None = None  # a BatchedTensor's batch dim in its unwrapped tensor
    level: int | None = None  # a functorch wrapper's level
    compressed: int | None = None  # a compressed sparse tensor's crow_indices or ccol_indices
    plain: int | None = None  # its col_indices or row_indices
    values: int | None = None  # its values
    dtensor: DTensorPlan | None = None  # a DTensor's mesh and placements (`mesh.py`)
    error: str | None = None  # why this tensor cannot be built at all
    notes: list[str] = field(default_factory=list)

    @property
    def ndim(self) -> int:
        return len(self.size)

    def concrete(self) -> bool:
        return all(isinstance(d, int) for d in self.size) and (
            self.stride is None or all(isinstance(d, int) for d in self.stride)
        )

    def extent(self) -> int:
        """Bytes of storage this tensor reaches, from byte 0 of its storage."""
        if self.stride is None:
            return 0
        last = self.offset
        for d, s in zip(self.size, self.stride, strict=False):
            if type(d) is not int or type(s) is not int:
                return 0
            if d == 0:
                return 0
            last += (d - 1) * s
        return (last + 1) * (itemsize(self.dtype) or 1)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (weights_only-safe) to write beside emitted tensors."""
        return {k: getattr(self, k) for k in _PLAN_KEYS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TensorPlan:
        return cls(**{k: d[k] for k in _PLAN_KEYS if k in d})


# Every field, in declaration order (the order `--emit` writes them in).
_PLAN_KEYS = [f.name for f in dataclasses.fields(TensorPlan)]


@dataclass
class GroupPlan:
    """One describer's tensors and storages (one FakeTensorMode of one compile attempt)."""

    describer: int
    storages: dict[int, int]  # id -> bytes to allocate (at least every tensor's extent)
    zero: set[int]  # storages logged with 0 bytes under a non-empty tensor (resized to zero)
    tensors: dict[int, TensorPlan]
    sources: list[tuple[str, int, str]]  # (name as returned, tensor id, logged source), log order
    source_notes: dict[str, list[str]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # source -> why it has no tensor
    # Plain leaf tensors that are all of their storage: one allocation each, filled in place.
    whole: set[int] = field(default_factory=set)
    # Its own symbols, when the compile's fake modes each made theirs (several exports in
    # `-/-`): their fakes then need a shape env each. None: the compile's symbols.
    symbols: GraphDims | None = None


def plan_symbols(c: Compile, describer: int | None = None) -> GraphDims:
    """The compile's symbols as its graph took them (`index.dims.graph_dims`); with
    `describer`, those of that fake mode alone."""
    return graph_dims(c, describer)


def plan_compile(c: Compile, symbols: GraphDims | None = None) -> list[GroupPlan]:
    """Concrete plans for every describer group of a compile; problems become notes or errors."""
    symbols = symbols or plan_symbols(c)
    out: list[GroupPlan] = []
    taken: set[str] = set()
    unnamed = {(inp.describer, inp.tensor.id) for inp in c.inputs if not inp.sources}
    own = _symbols_per_describer(c)
    for s in c.input_sets:
        mine = plan_symbols(c, s.describer) if own else symbols
        g = _plan_group(s, mine, taken, unnamed, c.rank)
        g.symbols = mine if own else None
        out.append(g)
    return out


def _symbols_per_describer(c: Compile) -> bool:
    """Whether the compile's fake modes made symbols of their own: several describers, and a
    symbol made while one of them was fakifying (one compile's fake mode is the usual)."""
    return len(c.input_sets) > 1 and any(x.describer is not None for x in c.symbols)


_PLANS: OrderedDict[int, tuple[Compile, _Mark, GraphDims, list[GroupPlan]]]
_PLANS = OrderedDict()


_PLANS_KEPT = 8  # compiles whose plans are kept (each holds its Compile alive)


def plans_for(c: Compile) -> tuple[GraphDims, list[GroupPlan]]:
    """The symbols and plans of a compile, made once and reused while its records are unchanged.

    The plans are shared by every rebuild of the compile: read them, never change them.
    """
    mark = _plan_mark(c)
    hit = _PLANS.get(id(c))
    if hit is not None and hit[0] is c and hit[1] == mark:
        _PLANS.move_to_end(id(c))
        return hit[2], hit[3]
    symbols = plan_symbols(c)
    groups = plan_compile(c, symbols)
    _PLANS[id(c)] = (c, mark, symbols, groups)
    _PLANS.move_to_end(id(c))
    while len(_PLANS) > _PLANS_KEPT:
        _PLANS.popitem(last=False)
    return symbols, groups


def forget_plans() -> None:
    """Drop the kept plans (and the compiles they hold): memory back, or a first call timed."""
    _PLANS.clear()


def _plan_mark(c: Compile) -> _Mark:
    """What plans are made from, counted: it changes when records are added to the compile."""
    sets = tuple((id(s), len(s.tensors), len(s.storages), len(s.sources)) for s in c.input_sets)
    return (len(c.symbols), len(c.graphs), len(c.inputs), sets)


def _plan_group(
    s: InputSet,
    symbols: GraphDims,
    taken: set[str],
    unnamed: set[tuple[int, int]],
    rank: int | None = None,
) -> GroupPlan:
    env = _env(s, symbols)
    tensors: dict[int, TensorPlan] = {}
    extents: dict[int, int] = {}  # storage -> the most bytes a tensor on it reaches
    reach: dict[int, int] = {}  # tensor -> the bytes it reaches
    for tid, t in s.tensors.items():
        tensors[tid] = p = _plan_tensor(t, env, rank)
        reach[tid] = e = p.extent()
        own = p.storage
        if own is not None and p.error is None and e > extents.get(own, -1):
            extents[own] = e
    storages: dict[int, int] = {}
    zero: set[int] = set()
    for sid, st in s.storages.items():
        storages[sid] = _plan_storage(sid, st, env, tensors, extents.get(sid, 0), reach, zero)
    group = GroupPlan(s.describer, storages, zero, tensors, [])
    _undescribed_and_whole(group, reach)
    _name_sources(group, s, taken)
    _name_unnamed(group, taken, unnamed)
    return group


def _env(s: InputSet, symbols: GraphDims) -> dict[str, int]:
    """The value of each symbol the group's sizes may use: the graph's hints, and the symbols
    a tensor described with symbolic sizes (refakified in export) has for its dims."""
    env = dict(symbols.hints)
    if not symbols.names:
        return env
    names_of: dict[int, list[str]] = {}
    for tid, src in s.sources:
        names_of.setdefault(tid, []).append(src)
    for tid, t in s.tensors.items():
        for src in names_of.get(tid, []):
            for i, d in enumerate(t.size or []):
                if isinstance(d, str) and _SYMBOL.fullmatch(d):
                    sym = symbols.names.get(f"{src}.size()[{i}]")
                    if sym is not None and sym in symbols.hints:
                        env.setdefault(d, symbols.hints[sym])
    return env


def _plan_storage(
    sid: int,
    st: StorageDesc,
    env: Mapping[str, int],
    tensors: dict[int, TensorPlan],
    need: int,
    reach: dict[int, int],
    zero: set[int],
) -> int:
    """The bytes to allocate for one logged storage (NEED: what its tensors reach), with notes
    or errors on its tensors where the log's figure will not do; a storage logged as 0 bytes
    under a non-empty tensor goes into ZERO."""
    logged = _storage_bytes(st, env)
    if logged is None:
        for _tid, p in _on(tensors, sid):
            p.notes.append(
                f"storage {sid} size {st.size!r} has no value in the log: "
                f"allocated the {need} bytes its tensors reach"
            )
        return need
    if logged >= MAX_BUILD:
        for _tid, p in _on(tensors, sid):
            p.error = p.error or (
                f"storage {sid} is logged as {_digits(logged)} bytes, more than torch "
                "can build (2^63)"
            )
        return need
    if logged == 0 and need > 0:
        zero.add(sid)
    elif 0 < logged < need:
        for tid, p in _on(tensors, sid):
            if reach[tid] > logged:
                p.notes.append(
                    f"storage {sid} is logged as {logged} bytes but this tensor reaches "
                    f"{reach[tid]}: allocated {need}"
                )
    return max(logged, need)


def _on(tensors: dict[int, TensorPlan], sid: int) -> Iterator[tuple[int, TensorPlan]]:
    """The tensors on storage SID (a scan: only for the storages a note or error is due on)."""
    return ((tid, p) for tid, p in tensors.items() if p.storage == sid)


def _undescribed_and_whole(group: GroupPlan, reach: dict[int, int]) -> None:
    """Storages no record described (allocated, with a note), and the tensors that are all of
    their storage (`whole`: one allocation each, filled in place)."""
    storages = group.storages
    for tid, p in group.tensors.items():
        own, e = p.storage, reach[tid]
        if own is None:
            continue
        if own not in storages and not p.subclass:
            storages[own] = e
            p.notes.append(f"storage {own} was never described: allocated {e} bytes")
        elif own not in group.zero and storages.get(own) == e and _alone(p, e):
            group.whole.add(tid)


def _name_sources(group: GroupPlan, s: InputSet, taken: set[str]) -> None:
    """Each logged source once, in log order; a name another describer took gets
    `[describer N]`."""
    seen_here: set[str] = set()
    for tid, src in s.sources:
        if src in seen_here:
            continue
        seen_here.add(src)
        name = src if src not in taken else f"{src} [describer {s.describer}]"
        taken.add(name)
        group.sources.append((name, tid, src))
        if tid not in group.tensors:
            group.missing[name] = f"tensor {tid} was named by source {src} but never described"


def _name_unnamed(group: GroupPlan, taken: set[str], unnamed: set[tuple[int, int]]) -> None:
    """A described tensor no source named: `<tensor ID>`, with a note."""
    for tid in group.tensors:
        if (group.describer, tid) in unnamed:
            name = f"<tensor {tid}>"
            if name in taken:
                name = f"<tensor {tid}> [describer {group.describer}]"
            taken.add(name)
            group.sources.append((name, tid, name))
            group.source_notes.setdefault(name, []).append("no source was logged for this tensor")


def _alone(p: TensorPlan, extent: int) -> bool:
    """A dense tensor from offset 0 that needs nothing but itself (no base, grad or notes)."""
    return (
        p.error is None
        and not p.notes
        and p.offset == 0
        and p.layout == "strided"
        and p.grad is None
        and _plain_kind(p)
        and (p.leaf or p.param or not p.requires_grad)
        and extent == _numel(p.size) * (itemsize(p.dtype) or 1) > 0
    )


def _plain_kind(p: TensorPlan) -> bool:
    """No view, bit, wrapper or layout of its own: a tensor `empty_strided` makes as it is."""
    return not (p.view or p.conj or p.neg or p.nested or p.subclass or p.sparse) and not (
        p.functorch or p.functional or p.inference or p.mkldnn
    )


def _numel(size: list[int | str]) -> int:
    n = 1
    for d in size:
        n *= d  # type: ignore[assignment]
    return n


def _storage_bytes(st: StorageDesc, env: Mapping[str, int]) -> int | None:
    if isinstance(st.size, int) and not isinstance(st.size, bool):
        return st.size if st.size >= 0 else None
    if isinstance(st.size, str):
        return eval_expr(st.size, env)
    return None


def _dims(v: object, env: Mapping[str, int], what: str, nested_ok: bool) -> list[int | str]:
    if not isinstance(v, list):
        raise _PlanError(f"{what} is not logged")
    if all(type(d) is int for d in v):
        return list(v)
    out: list[int | str] = []
    for d in v:
        if isinstance(d, int) and not isinstance(d, bool):
            out.append(d)
        elif isinstance(d, str) and nested_ok and NESTED.fullmatch(d.strip()):
            out.append(d.strip())
        elif isinstance(d, str):
            val = eval_expr(d, env)
            if val is None:
                raise _PlanError(f"{what} {d!r} has no value in the log")
            if not -MAX_BUILD < val < MAX_BUILD:
                raise _PlanError(f"{what} {d!r} is {_digits(val)}, more than torch can build")
            out.append(val)
        else:
            raise _PlanError(f"{what} holds {d!r}")
    return out


class _PlanError(Exception):
    pass


def _digits(n: int) -> str:
    """A number as a bad size says it; one too long to read, by its count of digits (str() of
    an int of 4,300 digits and more raises)."""
    if abs(n) < 10**30:
        return f"{n:,}"
    return f"a number of about {int(abs(n).bit_length() * 0.30103) + 1} digits"


def _link(v: object) -> int | None:
    return v if type(v) is int else None


# Logged flags -> the TensorPlan field each sets; absent flags are False.
_FLAG_FIELDS = {
    "is_leaf": "leaf",
    "requires_grad": "requires_grad",
    "is_view": "view",
    "is_parameter": "param",
    "is_conj": "conj",
    "is_neg": "neg",
    "is_inference": "inference",
    "is_nested": "nested",
    "is_traceable_wrapper_subclass": "subclass",
    "is_sparse": "sparse",
    "is_functorch_wrapped": "functorch",
    "is_batchedtensor": "batched",
    "is_gradtrackingtensor": "functorch",
    "is_legacy_batchedtensor": "functorch",
    "is_functional": "functional",
    "is_mkldnn": "mkldnn",
}


# Fields most tensors do not log (links, subclass and dynamic-dim details).
_RARE_FIELDS = frozenset(
    {"layout", "base", "grad", "attrs", "type", "ctx", "creation_meta", "nested_int"}
    | {"dynamo_dynamic_indices", "sparse_dim", "dense_dim", "is_coalesced", "unwrapped"}
    | {"crow_indices", "ccol_indices", "values", "opaque_attrs"}
)


def _plan_tensor(t: TensorDesc, env: Mapping[str, int], rank: int | None = None) -> TensorPlan:
    fields = t.fields
    f = fields.get
    dtype = dtype_name(f("dtype"))
    p = TensorPlan(t.id, dtype or "float32", _device(f("device")), [], None, 0, _link(f("storage")))
    keys = fields.keys()
    for k in keys & _FLAG_FIELDS.keys():
        if fields[k]:
            setattr(p, _FLAG_FIELDS[k], True)
    if not keys.isdisjoint(_RARE_FIELDS):
        _plan_rare(p, t, rank)
    if p.batched:
        p.functorch = True
    p.error = _kind_error(p, dtype, f("dtype"), f("device"))
    hov = f("dynamo_hint_overrides")
    if hov and isinstance(hov, dict):
        _hint_overrides(p, hov)
    size, stride, off = f("size"), f("stride"), f("storage_offset", 0)
    if (
        type(size) is list
        and type(stride) is list
        and type(off) is int
        and len(size) == len(stride)
        and _ints(size)
        and _ints(stride)
    ):  # the common case: concrete sizes, checked without the general parser
        _concrete_dims(p, size, stride, off)
    else:
        _symbolic_dims(p, size, stride, off, env)
    return p


def _kind_error(p: TensorPlan, dtype: str | None, logged: object, device: object) -> str | None:
    """Why a tensor of this dtype and device cannot be built (None: it can)."""
    if dtype is None:
        return f"dtype {logged!r} is not a torch dtype"
    if dtype in _QUANTIZED:
        return (
            f"quantized ({dtype}): torch rebuilds no quantized tensor from a description "
            "(MetaConverter does not take them, and no scale or zero point is logged)"
        )
    if p.device == "?":
        return f"device {device!r} is not a device"
    return None


def _hint_overrides(p: TensorPlan, hov: Mapping[object, object]) -> None:
    for k, v in hov.items():
        dim = number(str(k))
        if dim is not None and dim >= 0 and type(v) is int:
            p.hint_overrides[dim] = v


def _concrete_dims(p: TensorPlan, size: list[int], stride: list[int], off: int) -> None:
    """Sizes, strides and offset all ints: taken as they are, checked in range."""
    p.size, p.stride, p.offset = list(size), list(stride), off
    if off < 0 or (size and (min(size) < 0 or min(stride) < 0)):
        p.error = p.error or "negative size, stride or offset"
    elif off >= MAX_BUILD or (size and max(max(size), max(stride)) >= MAX_BUILD):
        p.error = p.error or "a size, stride or offset more than torch can build (2^63)"


def _symbolic_dims(
    p: TensorPlan, size: object, stride: object, off: object, env: Mapping[str, int]
) -> None:
    """Sizes, strides and offset as logged expressions (or nested ints), evaluated in ENV."""
    try:
        p.size = _dims(size, env, "size", p.nested)
        if stride is not None:
            p.stride = _dims(stride, env, "stride", p.nested)
            if len(p.stride) != len(p.size):
                raise _PlanError(f"stride has {len(p.stride)} dims but size has {len(p.size)}")
        p.offset = off if type(off) is int else _dims([off], env, "storage_offset", False)[0]  # type: ignore[assignment]
    except _PlanError as e:
        p.error = p.error or str(e)
    p.error = p.error or _dims_error(p)


def _dims_error(p: TensorPlan) -> str | None:
    """What is wrong with a plan's evaluated sizes, strides and offset (None: nothing)."""
    if p.offset < 0 or _negative(p.size) or (p.stride is not None and _negative(p.stride)):
        return "negative size, stride or offset"
    if p.stride is None and not (p.sparse or p.layout != "strided" or p.nested):
        return "stride is not logged"
    return None


def _ints(dims: list[object]) -> bool:
    for d in dims:  # noqa: SIM110 (a loop: twice as fast as all() over a generator)
        if type(d) is not int:
            return False
    return True


def _plan_rare(p: TensorPlan, t: TensorDesc, rank: int | None) -> None:
    """Links, layout, subclass, functorch and dynamic-dim fields, for the tensors that log them."""
    fields = t.fields
    f = fields.get
    p.layout = dtype_name(f("layout")) or "strided"
    _links(p, fields)
    if "attrs" in fields:
        p.attrs = t.attrs
    if "type" in fields:
        _subclass(p, t, rank)
    ctx, cm = f("ctx"), f("creation_meta")
    p.ctx = ctx if isinstance(ctx, str) else None
    p.creation_meta = cm if isinstance(cm, str) else None
    if "nested_int" in fields:
        p.nested_int = _nested_int(f("nested_int"))
    dyn = f("dynamo_dynamic_indices")
    if dyn and isinstance(dyn, list):
        p.dynamic_indices = [i for i in dyn if type(i) is int]
    if p.sparse or p.layout != "strided":
        _sparse(p, fields)


def _nested_int(ni: object) -> int | None:
    """A jagged tensor's nested int id, as logged (an int, or its digits)."""
    nested = ni if type(ni) is int else number(ni) if isinstance(ni, str) else None
    return nested if nested is not None and nested >= 0 else None


def _links(p: TensorPlan, fields: Mapping[str, Any]) -> None:
    """The ids of the tensors this one is made from: base, grad, the tensor a wrapper wraps,
    a compressed sparse tensor's parts."""
    f = fields.get
    p.base, p.grad = _link(f("base")), _link(f("grad"))
    p.unwrapped = _link(f("unwrapped"))
    if p.unwrapped is not None:
        p.bdim = _link(f("bdim"))
        lvl = f("level")
        p.level = lvl if is_int(lvl) else number(lvl) if isinstance(lvl, str) else None
    p.compressed = (
        _link(f("crow_indices")) if "crow_indices" in fields else _link(f("ccol_indices"))
    )
    p.plain = _link(f("col_indices")) if "col_indices" in fields else _link(f("row_indices"))
    p.values = _link(f("values"))


def _subclass(p: TensorPlan, t: TensorDesc, rank: int | None) -> None:
    """A subclass's type, and a DTensor's mesh and placements."""
    f = t.fields.get
    p.type_name = t.type_name
    if is_dtensor(p.type_name):
        opaque = f("opaque_attrs")
        mesh = opaque.get("device_mesh") if isinstance(opaque, dict) else None
        got = dtensor_plan(f("ctx") if isinstance(f("ctx"), str) else None, mesh, rank)
        p.dtensor = got if isinstance(got, dict) else {"error": got}


def _sparse(p: TensorPlan, fields: Mapping[str, Any]) -> None:
    for name in ("sparse_dim", "dense_dim"):
        v = fields.get(name)
        if type(v) is int:
            setattr(p, name, v)
    if isinstance(fields.get("is_coalesced"), bool):
        p.coalesced = fields.get("is_coalesced")


def _negative(dims: list[int | str]) -> bool:
    try:
        return bool(dims) and min(dims) < 0  # type: ignore[operator]
    except TypeError:  # nested ints ("j1") beside ints
        return any(type(d) is int and d < 0 for d in dims)


def real_bytes(groups: Sequence[GroupPlan], saved: bool = False) -> int:
    """Bytes a real rebuild of these groups allocates: each storage a tensor that can be built is
    on, and each tensor on none. With `saved`, also the copies writing them with torch.save makes
    (`emit.saved`: a tensor over a storage shared with another dtype, or over a storage of 0
    bytes), which is then, its records aside, the size of the file written too."""
    total = 0
    for g in groups:
        total += _group_bytes(g) + _mesh_bytes(g)
        if saved:
            total += _save_copies(g)
    return total


def _group_bytes(g: GroupPlan) -> int:
    """`real_bytes` of one group's tensors and storages."""
    total = 0
    used: set[int] = set()
    undescribed: dict[int, int] = {}  # a subclass's storage: its stand-in allocates it
    for p in g.tensors.values():
        if p.error is not None:
            continue  # never built, so never allocated
        if p.unwrapped is not None and (p.functorch or p.functional):
            continue  # a view of the tensor it wraps
        total += _made_indices(p)
        if p.mkldnn and p.concrete():
            total += _numel(p.size) * (itemsize(p.dtype) or 1)  # dense, whatever its strides
        elif p.storage is None:
            total += 0 if p.subclass else p.extent()
        elif p.storage in g.storages:
            used.add(p.storage)
        elif p.subclass:
            undescribed[p.storage] = max(undescribed.get(p.storage, 0), p.extent())
    return total + sum(g.storages[s] for s in used) + sum(undescribed.values())


def _mesh_bytes(g: GroupPlan) -> int:
    """Bytes of the device meshes a group's DTensors are rebuilt on (one per shape)."""
    shapes = {
        tuple(p.dtensor["mesh"])
        for p in g.tensors.values()
        if p.error is None and p.dtensor is not None and "mesh" in p.dtensor
    }
    return sum(mesh_ranks(list(s)) * MESH_BYTES_PER_RANK for s in shapes)


def _made_indices(p: TensorPlan) -> int:
    """Bytes of the indices a compressed tensor logged without its parts is rebuilt with (an
    empty CSR or CSC: `rows + 1` int64, `layouts.empty_compressed`), whatever storage it claims."""
    if p.layout not in ("sparse_csr", "sparse_csc") or not p.concrete() or len(p.size) != 2:
        return 0
    if None not in (p.compressed, p.plain, p.values):
        return 0  # its indices are tensors of the log, counted as such
    rows = p.size[0] if p.layout == "sparse_csr" else p.size[1]
    return (int(rows) + 1) * 8


def _save_copies(g: GroupPlan) -> int:
    """Bytes of the copies `emit.saved` makes of a group's plain tensors, source by source."""
    dtypes: dict[int, str] = {}  # storage -> the dtype saved over it
    extra = 0
    for _name, tid, _src in g.sources:
        p = g.tensors.get(tid)
        if p is None or p.error is not None or p.storage is None:
            continue
        if p.subclass or p.nested or p.sparse or p.layout != "strided":
            continue  # not written as a plain tensor
        if p.storage in g.zero or dtypes.setdefault(p.storage, p.dtype) != p.dtype:
            extra += p.extent()
    return extra
