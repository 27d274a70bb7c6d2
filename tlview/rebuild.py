"""Turn a compile's logged inputs back into tensors: fake (through MetaConverter), meta, zeros, random."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import re
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlview.analyze.names import find_compile
from tlview.errors import EXIT_NEEDS_EXTRA, EXIT_REFUSED, EXIT_USAGE, TlviewError
from tlview.index.dims import dynamic_dims, fx_name, input_symbols
from tlview.model import Compile, InputSet, Report, StorageDesc, TensorDesc, device_name
from tlview.units import dims, itemsize, nbytes

MODES = ("random", "zeros", "meta")
NJT = "torch.nested._internal.nested_tensor.NestedTensor"
_GIB = 1 << 30


def _default_max_bytes() -> int:
    """Half of this machine's memory (4 GiB when it cannot be read): rebuilt tensors must fit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 * _GIB
    return max(_GIB, total // 2) if total > 0 else 4 * _GIB


DEFAULT_MAX_BYTES = _default_max_bytes()


@dataclass
class Rebuilt:
    """The tensors of one compile, with what could not be reproduced exactly and why."""

    tensors: dict[str, Any]  # source -> tensor; one object for all sources of one described tensor
    notes: dict[str, list[str]]  # source -> what could not be reproduced exactly, and why
    failed: dict[str, str]  # source -> why it could not be rebuilt at all
    groups: list[GroupPlan] = field(default_factory=list, repr=False)  # shared: read only
    # Every tensor and storage built, by (describer, logged id): bases, grads and inner tensors
    # too, so views keep their `_base` object alive and `--emit` can save each storage once.
    built: dict[tuple[int, int], Any] = field(default_factory=dict, repr=False)
    storages: dict[tuple[int, int], Any] = field(default_factory=dict, repr=False)


# --------------------------------------------------------------------------------------------
# Plans: the logged records made concrete and checked, without torch.
# --------------------------------------------------------------------------------------------

ZERO_NOTE = (
    "its storage is logged as 0 bytes (freed, as FSDP frees parameters between uses): rebuilt "
    "so, and reading its values crashes torch, as it would have in the program"
)
_QUANTIZED = frozenset({"qint8", "quint8", "qint32", "quint4x2", "quint2x4"})
_NESTED = re.compile(r"(?:(\d+)\*)?j(\d+)")
_SYMBOL = re.compile(r"[su]\d+")
_DIM_SUFFIX = re.compile(r"\.(?:size\(\)\[\d+\]|stride\(\)\[\d+\]|storage_offset\(\))$")
_RANGE = re.compile(r"\[(-?\d+|-?int_oo|-?oo), (-?\d+|-?int_oo|-?oo)\]")


def dtype_name(text: Any) -> str | None:
    """`torch.float32` -> `float32`; None when the text is not a dtype repr."""
    return _dtype_name(text) if isinstance(text, str) else None


@functools.lru_cache(maxsize=256)
def _dtype_name(text: str) -> str | None:
    m = re.fullmatch(r"torch\.(\w+)", text.strip())
    return m.group(1) if m else None


def _device(text: Any) -> str:
    return _device_name(text) if isinstance(text, str) else "?"


@functools.lru_cache(maxsize=256)
def _device_name(text: str) -> str:
    return device_name(text)


class _Unknown(Exception):
    pass


def eval_expr(text: str, env: Mapping[str, int]) -> int | None:
    """The value of a logged size expression (`16*s77`), or None; never runs code from the log."""
    if len(text) > 300:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _ev(tree.body, env)
    except (SyntaxError, _Unknown, ZeroDivisionError, OverflowError, RecursionError, ValueError):
        return None


def _ev(n: ast.AST, env: Mapping[str, int]) -> int:
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return n.value
    if isinstance(n, ast.Name):
        if n.id in env:
            return env[n.id]
        raise _Unknown(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        v = _ev(n.operand, env)
        return -v if isinstance(n.op, ast.USub) else v
    if isinstance(n, ast.BinOp):
        a, b = _ev(n.left, env), _ev(n.right, env)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if isinstance(n.op, ast.FloorDiv):
            return a // b
        if isinstance(n.op, ast.Mod):
            return a % b
        if isinstance(n.op, ast.Pow) and 0 <= b <= 64 and abs(a) < 1 << 20:
            return int(a**b)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
        args = [_ev(a, env) for a in n.args]
        name = n.func.id
        if name == "Max" and args:
            return max(args)
        if name == "Min" and args:
            return min(args)
        if name == "FloorDiv" and len(args) == 2:
            return args[0] // args[1]
        if name in ("CeilDiv", "CeilToInt") and len(args) == 2:
            return -(-args[0] // args[1])
        if name in ("Mod", "PythonMod") and len(args) == 2:
            return args[0] % args[1]
    raise _Unknown(ast.dump(n)[:40])


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


_PLAN_KEYS = [
    "id",
    "dtype",
    "device",
    "size",
    "stride",
    "offset",
    "storage",
    "layout",
    "leaf",
    "requires_grad",
    "view",
    "param",
    "conj",
    "neg",
    "inference",
    "nested",
    "subclass",
    "sparse",
    "functorch",
    "functional",
    "mkldnn",
    "base",
    "grad",
    "attrs",
    "type_name",
    "ctx",
    "creation_meta",
    "nested_int",
    "dynamic_indices",
    "hint_overrides",
    "sparse_dim",
    "dense_dim",
    "coalesced",
    "error",
    "notes",
]


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
    symbols: SymbolPlan | None = None


@dataclass
class SymbolPlan:
    """What the log says about the dynamic dims of one compile."""

    names: dict[str, str]  # "L['x'].size()[0]" -> "s77"
    fresh: set[str]  # dims that had their own create_symbol record
    unbacked: set[str]  # dims the graph sizes show as unbacked ("u0": mark_unbacked)
    hints: dict[str, int]  # "s77" -> 10
    ranges: dict[str, tuple[int | None, int | None]]  # dim source -> (lo, hi) when not default


def plan_symbols(c: Compile, describer: int | None = None) -> SymbolPlan:
    """Dynamic dims and their symbol names from `create_symbol` records and graph `sizes`; with
    `describer`, those of that fake mode alone."""
    names: dict[str, str] = {}
    fresh: set[str] = set()
    hints: dict[str, int] = {}
    ranges: dict[str, tuple[int | None, int | None]] = {}
    unbacked: set[str] = set()
    symbols = c.symbols
    sets = c.input_sets
    if describer is not None:
        symbols = [x for x in symbols if x.describer in (None, describer)]
        sets = [s for s in sets if s.describer == describer]
    for sym in symbols:
        if (
            sym.kind == "specialized"
            and sym.value is not None
            and re.fullmatch(r"-?\d+", sym.value)
        ):
            hints.setdefault(sym.symbol, int(sym.value))
        if sym.kind != "created":
            continue
        if sym.value is not None and re.fullmatch(r"-?\d+", sym.value):
            hints[sym.symbol] = int(sym.value)
        if sym.source and _SYMBOL.fullmatch(sym.symbol):
            names.setdefault(sym.source, sym.symbol)
            fresh.add(sym.source)
            m = _RANGE.fullmatch(sym.range or "")
            if m and (m.group(1), m.group(2)) != ("2", "int_oo"):
                ranges[sym.source] = (_bound(m.group(1)), _bound(m.group(2)))
    sizes: dict[str, Any] = {}
    for g in c.graphs:
        if g.kind == "dynamo_output_graph" and g.meta and isinstance(g.meta.get("sizes"), dict):
            sizes = g.meta["sizes"]
            break
    if sizes:
        for s in sets:
            for _tid, src in s.sources:
                graph_dims = sizes.get(fx_name(src))
                if not isinstance(graph_dims, list):
                    continue
                for i, d in enumerate(graph_dims):
                    if isinstance(d, str) and d.isdecimal() or type(d) is int:
                        # Made a symbol, then specialized (a guard pinned it): the graph takes
                        # the value ("4" in its sizes), so the fake does too.
                        dim = f"{src}.size()[{i}]"
                        if names.pop(dim, None) is not None:
                            fresh.discard(dim)
                            ranges.pop(dim, None)
                        continue
                    if isinstance(d, str) and _SYMBOL.fullmatch(d):
                        if d.startswith("s"):
                            names.setdefault(f"{src}.size()[{i}]", d)
                        else:
                            unbacked.add(f"{src}.size()[{i}]")
    return SymbolPlan(names=names, fresh=fresh, unbacked=unbacked, hints=hints, ranges=ranges)


def _bound(text: str) -> int | None:
    return None if "oo" in text else int(text)


def plan_compile(c: Compile, symbols: SymbolPlan | None = None) -> list[GroupPlan]:
    """Concrete plans for every describer group of a compile; problems become notes or errors."""
    symbols = symbols or plan_symbols(c)
    out: list[GroupPlan] = []
    taken: set[str] = set()
    unnamed = {(inp.describer, inp.tensor.id) for inp in c.inputs if not inp.sources}
    own = _symbols_per_describer(c)
    for s in c.input_sets:
        mine = plan_symbols(c, s.describer) if own else symbols
        g = _plan_group(s, mine, taken, unnamed)
        g.symbols = mine if own else None
        out.append(g)
    return out


def _symbols_per_describer(c: Compile) -> bool:
    """Whether the compile's fake modes made symbols of their own: several describers, and a
    symbol made while one of them was fakifying (one compile's fake mode is the usual)."""
    return len(c.input_sets) > 1 and any(x.describer is not None for x in c.symbols)


_PLANS: OrderedDict[int, tuple[Compile, tuple[Any, ...], SymbolPlan, list[GroupPlan]]]
_PLANS = OrderedDict()
_PLANS_KEPT = 8  # compiles whose plans are kept (each holds its Compile alive)


def plans_for(c: Compile) -> tuple[SymbolPlan, list[GroupPlan]]:
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


def _plan_mark(c: Compile) -> tuple[Any, ...]:
    """What plans are made from, counted: it changes when records are added to the compile."""
    sets = tuple((id(s), len(s.tensors), len(s.storages), len(s.sources)) for s in c.input_sets)
    return (len(c.symbols), len(c.graphs), len(c.inputs), sets)


def _plan_group(
    s: InputSet, symbols: SymbolPlan, taken: set[str], unnamed: set[tuple[int, int]]
) -> GroupPlan:
    env = dict(symbols.hints)
    if symbols.names:
        # A tensor described with symbolic sizes (refakified in export): its dims name values.
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
    tensors: dict[int, TensorPlan] = {}
    storages: dict[int, int] = {}
    zero: set[int] = set()
    extents: dict[int, int] = {}
    reach: dict[int, int] = {}
    for tid, t in s.tensors.items():
        tensors[tid] = p = _plan_tensor(t, env)
        reach[tid] = e = p.extent()
        own = p.storage
        if own is not None and p.error is None and e > extents.get(own, -1):
            extents[own] = e
    for sid, st in s.storages.items():
        logged = _storage_bytes(st, env)
        need = extents.get(sid, 0)
        if logged is None:
            storages[sid] = need
            for p in tensors.values():
                if p.storage == sid:
                    p.notes.append(
                        f"storage {sid} size {st.size!r} has no value in the log: "
                        f"allocated the {need} bytes its tensors reach"
                    )
            continue
        if logged == 0 and need > 0:
            zero.add(sid)
        elif 0 < logged < need:
            for tid, p in tensors.items():
                if p.storage == sid and reach[tid] > logged:
                    p.notes.append(
                        f"storage {sid} is logged as {logged} bytes but this tensor reaches "
                        f"{reach[tid]}: allocated {need}"
                    )
        storages[sid] = max(logged, need)
    group = GroupPlan(s.describer, storages, zero, tensors, [])
    for tid, p in tensors.items():
        own, e = p.storage, reach[tid]
        if own is None:
            continue
        if own not in storages and not p.subclass:
            storages[own] = e
            p.notes.append(f"storage {own} was never described: allocated {e} bytes")
        elif own not in zero and storages.get(own) == e and _alone(p, e):
            group.whole.add(tid)
    seen_here: set[str] = set()
    for tid, src in s.sources:
        if src in seen_here:
            continue
        seen_here.add(src)
        name = src if src not in taken else f"{src} [describer {s.describer}]"
        taken.add(name)
        group.sources.append((name, tid, src))
        if tid not in tensors:
            group.missing[name] = f"tensor {tid} was named by source {src} but never described"
    for tid in tensors:
        if (s.describer, tid) in unnamed:
            name = f"<tensor {tid}>"
            if name in taken:
                name = f"<tensor {tid}> [describer {s.describer}]"
            taken.add(name)
            group.sources.append((name, tid, name))
            group.source_notes.setdefault(name, []).append("no source was logged for this tensor")
    return group


def _alone(p: TensorPlan, extent: int) -> bool:
    """A dense tensor from offset 0 that needs nothing but itself (no base, grad or notes)."""
    return (
        p.error is None
        and not p.notes
        and p.offset == 0
        and p.layout == "strided"
        and p.grad is None
        and not (p.view or p.conj or p.neg or p.nested or p.subclass or p.sparse)
        and not (p.functorch or p.functional or p.inference or p.mkldnn)
        and (p.leaf or p.param or not p.requires_grad)
        and extent == _numel(p.size) * (itemsize(p.dtype) or 1) > 0
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


def _dims(v: Any, env: Mapping[str, int], what: str, nested_ok: bool) -> list[int | str]:
    if not isinstance(v, list):
        raise _PlanError(f"{what} is not logged")
    if all(type(d) is int for d in v):
        return list(v)
    out: list[int | str] = []
    for d in v:
        if isinstance(d, int) and not isinstance(d, bool):
            out.append(d)
        elif isinstance(d, str) and nested_ok and _NESTED.fullmatch(d.strip()):
            out.append(d.strip())
        elif isinstance(d, str):
            val = eval_expr(d, env)
            if val is None:
                raise _PlanError(f"{what} {d!r} has no value in the log")
            out.append(val)
        else:
            raise _PlanError(f"{what} holds {d!r}")
    return out


class _PlanError(Exception):
    pass


class _Failed(Exception):
    """This tensor cannot be built; the message says why."""


def _link(v: Any) -> int | None:
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
    "is_batchedtensor": "functorch",
    "is_gradtrackingtensor": "functorch",
    "is_legacy_batchedtensor": "functorch",
    "is_functional": "functional",
    "is_mkldnn": "mkldnn",
}
# Fields most tensors do not log (links, subclass and dynamic-dim details).
_RARE_FIELDS = frozenset(
    {"layout", "base", "grad", "attrs", "type", "ctx", "creation_meta", "nested_int"}
    | {"dynamo_dynamic_indices", "sparse_dim", "dense_dim", "is_coalesced"}
)


def _plan_tensor(t: TensorDesc, env: Mapping[str, int]) -> TensorPlan:
    fields = t.fields
    f = fields.get
    dtype = dtype_name(f("dtype"))
    p = TensorPlan(t.id, dtype or "float32", _device(f("device")), [], None, 0, _link(f("storage")))
    keys = fields.keys()
    for k in keys & _FLAG_FIELDS.keys():
        if fields[k]:
            setattr(p, _FLAG_FIELDS[k], True)
    if not keys.isdisjoint(_RARE_FIELDS):
        _plan_rare(p, t)
    if dtype is None:
        p.error = f"dtype {f('dtype')!r} is not a torch dtype"
    elif dtype in _QUANTIZED:
        p.error = (
            f"quantized ({dtype}): torch rebuilds no quantized tensor from a description "
            "(MetaConverter does not take them, and no scale or zero point is logged)"
        )
    if p.device == "?":
        p.error = p.error or f"device {f('device')!r} is not a device"
    hov = f("dynamo_hint_overrides")
    if hov and isinstance(hov, dict):
        for k, v in hov.items():
            if re.fullmatch(r"\d+", str(k)) and type(v) is int:
                p.hint_overrides[int(k)] = v
    size, stride, off = f("size"), f("stride"), f("storage_offset", 0)
    if (
        type(size) is list
        and type(stride) is list
        and type(off) is int
        and len(size) == len(stride)
        and _ints(size)
        and _ints(stride)
    ):  # the common case: concrete sizes, checked without the general parser
        p.size, p.stride, p.offset = list(size), list(stride), off
        if off < 0 or (size and (min(size) < 0 or min(stride) < 0)):
            p.error = p.error or "negative size, stride or offset"
        return p
    try:
        p.size = _dims(size, env, "size", p.nested)
        if stride is not None:
            p.stride = _dims(stride, env, "stride", p.nested)
            if len(p.stride) != len(p.size):
                raise _PlanError(f"stride has {len(p.stride)} dims but size has {len(p.size)}")
        p.offset = off if type(off) is int else _dims([off], env, "storage_offset", False)[0]  # type: ignore[assignment]
    except _PlanError as e:
        p.error = p.error or str(e)
    if p.offset < 0 or _negative(p.size) or (p.stride is not None and _negative(p.stride)):
        p.error = p.error or "negative size, stride or offset"
    if p.stride is None and not (p.sparse or p.layout != "strided" or p.nested):
        p.error = p.error or "stride is not logged"
    return p


def _ints(dims: list[Any]) -> bool:
    for d in dims:  # noqa: SIM110 (a loop: twice as fast as all() over a generator)
        if type(d) is not int:
            return False
    return True


def _plan_rare(p: TensorPlan, t: TensorDesc) -> None:
    """Links, layout, subclass and dynamic-dim fields, for the tensors that log them."""
    fields = t.fields
    f = fields.get
    p.layout = dtype_name(f("layout")) or "strided"
    p.base, p.grad = _link(f("base")), _link(f("grad"))
    if "attrs" in fields:
        p.attrs = t.attrs
    if "type" in fields:
        p.type_name = t.type_name
    ctx, cm = f("ctx"), f("creation_meta")
    p.ctx = ctx if isinstance(ctx, str) else None
    p.creation_meta = cm if isinstance(cm, str) else None
    if "nested_int" in fields:
        ni = f("nested_int")
        if isinstance(ni, int | str) and re.fullmatch(r"\d+", str(ni)):
            p.nested_int = int(ni)
    dyn = f("dynamo_dynamic_indices")
    if dyn and isinstance(dyn, list):
        p.dynamic_indices = [i for i in dyn if type(i) is int]
    if p.sparse or p.layout != "strided":
        for name in ("sparse_dim", "dense_dim"):
            v = f(name)
            if type(v) is int:
                setattr(p, name, v)
        if isinstance(f("is_coalesced"), bool):
            p.coalesced = f("is_coalesced")


def _negative(dims: list[int | str]) -> bool:
    try:
        return bool(dims) and min(dims) < 0  # type: ignore[operator]
    except TypeError:  # nested ints ("j1") beside ints
        return any(type(d) is int and d < 0 for d in dims)


# --------------------------------------------------------------------------------------------
# torch helpers
# --------------------------------------------------------------------------------------------


def need_torch(purpose: str = "rebuilding tensors") -> Any:
    """torch, imported on first use (so `tlview report` never pays for it)."""
    global _TORCH
    if _TORCH is not None:
        return _TORCH
    try:
        with warnings.catch_warnings():
            # torch's CPU wheels warn on import when numpy is absent; tlview does not need it.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        raise TlviewError(
            f"{purpose} needs torch: pip install 'tlview[torch]'", EXIT_NEEDS_EXTRA
        ) from None
    _TORCH = torch
    return torch


_TORCH: Any = None


def torch_dtype(name: str) -> Any:
    dt = _DTYPES.get(name)
    if dt is None:
        torch = need_torch()
        dt = getattr(torch, name, None)
        if not isinstance(dt, torch.dtype):
            # A newer torch's dtype (float8_e8m0fnu is not in torch 2.6), or no dtype at all.
            raise _Failed(
                f"dtype 'torch.{name}' is not a dtype of this torch ({torch.__version__})"
            )
        _DTYPES[name] = dt
    return dt


_DTYPES: dict[str, Any] = {}


def _whole_dtype(name: str) -> tuple[Any, bool] | None:
    """A dtype whose size tlview's plans know, and whether its tensors can require grad."""
    got = _WHOLE_DTYPES.get(name)
    if got is None and name not in _WHOLE_DTYPES:
        try:
            dt = torch_dtype(name)
        except _Failed:
            dt = None
        if dt is not None and dt.itemsize == (itemsize(name) or 1):
            got = (dt, dt.is_floating_point or dt.is_complex)
        _WHOLE_DTYPES[name] = got
    return got


_WHOLE_DTYPES: dict[str, tuple[Any, bool] | None] = {}


def resolve_type(name: str | None, allow_import: Sequence[str]) -> tuple[Any, str | None]:
    """The tensor class a log names, or why not: only torch's own modules unless allowed."""
    torch = need_torch()
    if not name or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", name):
        return None, f"the logged type {name!r} is not a class name"
    parts = name.split(".")
    if any(part.startswith("__") for part in parts):
        return None, f"the logged type {name} names a private module: not imported"
    allowed = parts[0] == "torch" or any(
        name == m or name.startswith(m.rstrip(".") + ".") for m in allow_import
    )
    if not allowed:
        return None, (
            f"type {name} lives outside torch and importing it would run its code: "
            f"pass --allow-import {parts[0]} to allow it"
        )
    for k in range(len(parts) - 1, 0, -1):
        mod_name = ".".join(parts[:k])
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        except Exception as e:  # importing ran code that failed
            return None, f"importing {mod_name} failed: {type(e).__name__}: {e}"
        obj: Any = mod
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
        if isinstance(obj, type) and issubclass(obj, torch.Tensor):
            return obj, None
        return None, f"{name} is not a tensor class in this environment"
    return None, f"cannot import the module of {name}"


def _literal(text: str | None) -> tuple[Any, bool]:
    """A logged repr read back as a Python literal (no code runs), and whether that worked."""
    if text is None:
        return None, True
    if len(text) > 10_000:
        return None, False
    try:
        return ast.literal_eval(text), True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None, False


class Devices:
    """Logged device -> the device to build on, with a note when it had to change."""

    def __init__(self, torch: Any, device: str | None, mode: str) -> None:
        self.torch = torch
        self.forced = device
        self.mode = mode
        self.cache: dict[str, tuple[str, str | None]] = {}
        if device is not None and mode != "meta" and not self.available(device):
            raise TlviewError(f"--device {device}: not available on this machine", EXIT_USAGE)

    def available(self, dev: str) -> bool:
        try:
            self.torch.empty(0, device=dev)
            return True
        except Exception:
            return False

    def map(self, logged: str) -> tuple[str, str | None]:
        if self.mode == "meta":
            return "meta", None
        if self.forced is not None:
            return self.forced, None
        got = self.cache.get(logged)
        if got is None:
            if self.available(logged):
                got = (logged, None)
            else:
                got = ("cpu", f"logged on {logged}, which this machine does not have: built on cpu")
            self.cache[logged] = got
        return got


def _nonleaf_fn(torch: Any) -> Any:
    """An identity autograd function: its output aliases its input but is not a leaf."""
    global _NONLEAF
    if _NONLEAF is None:

        class NonLeafInput(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x.detach()

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g

        _NONLEAF = NonLeafInput
    return _NONLEAF


_NONLEAF: Any = None
_SMALL_INTS = 8  # random integers are drawn from [0, 8): safe as small indices and counts


class _Filler:
    """Fills fresh storages: random values per dtype from one seed, zeros, or nothing (meta)."""

    def __init__(self, torch: Any, mode: str, seed: int) -> None:
        self.torch = torch
        self.mode = mode
        self.seed = seed
        self.gens: dict[str, Any] = {}
        self.normal = {
            torch.float16,
            torch.bfloat16,
            torch.float32,
            torch.float64,
            torch.complex64,
            torch.complex128,
        }
        self.ints = {
            torch.uint8,
            torch.int8,
            torch.int16,
            torch.int32,
            torch.int64,
            torch.uint16,
            torch.uint32,
            torch.uint64,
        }

    def gen(self, device: str) -> Any:
        g = self.gens.get(device)
        if g is None:
            g = self.torch.Generator(device=device)
            g.manual_seed(self.seed)
            self.gens[device] = g
        return g

    def storage(self, nbytes: int, dtype: Any, device: str) -> Any:
        torch = self.torch
        if self.mode == "meta" or device.startswith("meta"):
            return torch.empty(nbytes, dtype=torch.uint8, device="meta").untyped_storage()
        size = dtype.itemsize
        n = nbytes // size
        make = torch.zeros if self.mode == "zeros" else torch.empty
        if n * size == nbytes:
            flat = make(n, dtype=dtype, device=device)
        else:
            raw = torch.zeros(nbytes, dtype=torch.uint8, device=device)
            flat = torch.empty(0, dtype=dtype, device=device).set_(
                raw.untyped_storage(), 0, (n,), (1,)
            )
        if self.mode != "zeros":
            self.fill(flat, device)
        return flat.untyped_storage()

    def fill(self, t: Any, device: str) -> None:
        """Values per dtype: floats normal, ints in [0, 8), bool 0/1, others cast from floats."""
        torch = self.torch
        g = self.gen(device)
        dt = t.dtype
        if dt in self.normal:
            t.normal_(generator=g)
        elif dt is torch.bool:
            t.random_(0, 2, generator=g)
        elif dt in self.ints:
            t.random_(0, _SMALL_INTS, generator=g)
        else:
            src = torch.complex64 if dt.is_complex else torch.float32
            tmp = torch.empty(t.shape, dtype=src, device=device).normal_(generator=g)
            try:
                t.copy_(tmp)
            except Exception:  # no cast kernel (packed fp4, bit types): random bytes
                raw = torch.empty(0, dtype=torch.uint8, device=device).set_(
                    t.untyped_storage(), 0, (t.untyped_storage().nbytes(),), (1,)
                )
                raw.random_(0, 256, generator=g)


# --------------------------------------------------------------------------------------------
# Real tensors (random, zeros, meta)
# --------------------------------------------------------------------------------------------


class _StandIn(Exception):
    """The exact tensor cannot be built; a plain tensor of the same metadata stands in."""


class RealBuilder:
    """Builds one describer group's tensors: one storage per logged storage, views from bases."""

    def __init__(
        self,
        group: GroupPlan,
        *,
        mode: str,
        filler: _Filler | None,
        devices: Devices,
        allow_import: Sequence[str] = (),
        storages: Mapping[int, Any] | None = None,
        valid_offsets: bool = True,
    ) -> None:
        self.torch = need_torch()
        self.g = group
        self.mode = mode
        self.filler = filler
        self.devices = devices
        self.allow_import = allow_import
        self.given = storages or {}
        self.valid_offsets = valid_offsets
        self.storages: dict[int, Any] = {}
        self.memo: dict[int, Any] = {}
        self.notes: dict[int, list[str]] = {}
        self.errors: dict[int, str] = {}
        self.busy: set[int] = set()
        self.fill_dtypes: dict[int, str] | None = None
        fills = filler is not None and filler.mode != "meta"
        self.quick: set[int] = group.whole if fills else set()
        self.ready: dict[tuple[str, str], tuple[Any, ...]] = {}  # (dtype, device) -> for `alone`
        # What Parameter(t, requires_grad) does for a plain tensor, without its Python frame.
        self.as_param = functools.partial(self.torch.Tensor._make_subclass, self.torch.nn.Parameter)

    def note(self, tid: int, text: str) -> None:
        lst = self.notes.setdefault(tid, [])
        if text not in lst:
            lst.append(text)

    def build_all(self) -> None:
        memo, quick, tensors = self.memo, self.quick, self.g.tensors
        with self.torch.no_grad():  # views and non-leaf tensors enable grad where they need it
            for _name, tid, _src in self.g.sources:
                if tid in memo:
                    continue
                if tid in quick:
                    r = self.alone(tensors[tid])
                    if r is not None:
                        memo[tid] = r
                        continue
                self.get(tid)
        for sid in self.g.zero:
            st = self.storages.get(sid)
            if st is not None and st.nbytes():
                st.resize_(0)
        if self.g.zero:
            for tid, p in self.g.tensors.items():
                if p.storage in self.g.zero and tid in memo:
                    self.note(tid, ZERO_NOTE)

    def get(self, tid: int) -> Any:
        """The tensor for id `tid`, or None (the reason is in `errors`)."""
        if tid in self.memo:
            return self.memo[tid]
        if tid in self.errors:
            return None
        p = self.g.tensors.get(tid)
        if p is None:
            self.errors[tid] = f"tensor {tid} was never described"
            return None
        if tid in self.busy:
            self.errors[tid] = f"tensor {tid} refers to itself through base, grad or attrs"
            return None
        self.busy.add(tid)
        try:
            for n in p.notes:
                self.note(tid, n)
            if p.error:
                raise _Failed(p.error)
            r = self.make(p)
            self.memo[tid] = r
            return r
        except _Failed as e:
            self.errors[tid] = str(e)
        except Exception as e:  # one tensor that fails never stops the others
            self.errors[tid] = f"{type(e).__name__}: {first_line(e)}"
        finally:
            self.busy.discard(tid)
        return None

    # -- storages -------------------------------------------------------------------------
    def storage(self, p: TensorPlan) -> Any:
        sid = p.storage
        torch = self.torch
        dev, why = self.devices.map(p.device)
        if why:
            self.note(p.id, why)
        if sid is None:
            nbytes = p.extent()
            key = -1 - p.id
        else:
            nbytes = self.g.storages.get(sid, p.extent())
            key = sid
        st = self.storages.get(key)
        if st is not None:
            if st.nbytes() < p.extent() and sid not in self.g.zero:
                raise _Failed(
                    f"storage {sid} is {st.nbytes()} bytes; this tensor needs {p.extent()}"
                )
            return st
        given = self.given.get(key)
        if given is not None:
            st = given
        elif self.filler is None:
            st = torch.empty(nbytes, dtype=torch.uint8, device=dev).untyped_storage()
        else:
            st = self.filler.storage(nbytes, self.fill_dtype(key, p), dev)
        self.storages[key] = st
        return st

    def fill_dtype(self, sid: int, p: TensorPlan) -> Any:
        """The dtype whose random values fill a storage: that of its first non-view tensor."""
        if self.fill_dtypes is None:
            self.fill_dtypes = {}
            for q in self.g.tensors.values():
                if q.storage is not None and not q.view and q.error is None and not q.subclass:
                    self.fill_dtypes.setdefault(q.storage, q.dtype)
        return torch_dtype(self.fill_dtypes.get(sid, p.dtype))

    # -- tensors --------------------------------------------------------------------------
    def make(self, p: TensorPlan) -> Any:
        if p.id in self.quick:
            r = self.alone(p)
            if r is not None:
                return r
        torch = self.torch
        if p.functorch:
            self.note(p.id, "functorch wrapper: its wrapper state is not logged; the plain tensor")
        if p.functional:
            self.note(p.id, "functional tensor: rebuilt as the plain tensor it wraps")
        if p.inference:
            self.note(p.id, "inference tensor: rebuilt as a normal tensor")
        if p.mkldnn:
            self.note(p.id, "mkldnn tensor: rebuilt as a strided tensor")
        if p.sparse or p.layout not in ("strided", "jagged"):
            r = self.sparse(p)
        elif p.subclass:
            try:
                r = self.subclass(p)
            except _StandIn as e:
                self.note(p.id, f"{e}; a plain tensor with its size, stride and dtype stands in")
                r = self.plain(p, outer=True)
        elif p.view and p.base is not None:
            r = self.view(p)
        else:
            r = self.plain(p)
        if p.grad is not None:
            g = self.get(p.grad)
            if g is None:
                self.note(p.id, f".grad not rebuilt: {self.errors.get(p.grad)}")
            else:
                try:
                    with torch.no_grad():
                        r.grad = g
                except Exception as e:
                    self.note(p.id, f".grad not attached: {first_line(e)}")
        return r

    def plain(self, p: TensorPlan, outer: bool = False) -> Any:
        torch = self.torch
        if not p.concrete() or p.stride is None:
            raise _Failed("sizes are not concrete")
        r = self.whole(p) if not outer else None
        if r is None:
            st = self.storage(p) if not outer or p.storage is not None else self.storage_for(p)
            r = torch.empty(0, dtype=torch_dtype(p.dtype), device=st.device)
            r.set_(st, p.offset, p.size, p.stride)  # under build_all's no_grad
        return self.finish(p, r)

    def alone(self, p: TensorPlan) -> Any:
        """A tensor of the plan's `whole` set, made without detours; None: the general way."""
        sid = p.storage
        how = self.ready.get((p.dtype, p.device))
        if how is None:
            how = self.ready[(p.dtype, p.device)] = self.ready_for(p.dtype, p.device)
        if not how or sid is None or sid in self.storages or sid in self.given:
            return None
        dt, grads, dev, why, gen = how
        if p.requires_grad and not grads:
            return None  # the general way says why requires_grad is left off
        try:
            r = self.torch.empty_strided(p.size, p.stride, dtype=dt, device=dev)
            if gen is not None:
                r.normal_(generator=gen)
            else:
                self.filler_for(r, dev)
        except Exception:
            return None  # the general way tries again and says why it fails
        self.storages[sid] = r.untyped_storage()
        if why:
            self.note(p.id, why)
        if p.param:
            return self.as_param(r, p.requires_grad)
        if p.requires_grad:
            r.requires_grad_(True)
        return r

    def ready_for(self, dtype: str, device: str) -> tuple[Any, ...]:
        """How `alone` makes tensors of one dtype and device; empty: it cannot."""
        kind = _whole_dtype(dtype)
        dev, why = self.devices.map(device)
        if kind is None or dev.startswith("meta") or self.filler is None:
            return ()
        dt, grads = kind
        normal = self.filler.mode == "random" and dt in self.filler.normal
        return dt, grads, dev, why, self.filler.gen(dev) if normal else None

    def filler_for(self, r: Any, dev: str) -> None:
        assert self.filler is not None
        if self.filler.mode == "zeros":
            r.zero_()
        else:
            self.filler.fill(r, dev)

    def fresh(self, sid: int, p: TensorPlan, dt: Any, dev: str) -> Any:
        """A new tensor that is all of its storage, filled, and that storage kept."""
        filler = self.filler
        assert filler is not None
        r = self.torch.empty_strided(p.size, p.stride, dtype=dt, device=dev)
        if filler.mode == "zeros":
            r.zero_()
        elif dt in filler.normal:
            r.normal_(generator=filler.gen(dev))
        else:
            filler.fill(r, dev)
        self.storages[sid] = r.untyped_storage()
        return r

    def whole(self, p: TensorPlan) -> Any:
        """The common case made fast: a tensor that is its whole storage, filled in place."""
        sid = p.storage
        if (
            sid is None
            or self.filler is None
            or p.offset
            or sid in self.storages
            or sid in self.given
            or sid in self.g.zero
        ):
            return None
        nbytes = self.g.storages.get(sid)
        numel = 1
        for d in p.size:
            numel *= d  # type: ignore[assignment]
        if not nbytes or nbytes != p.extent() or nbytes != numel * (itemsize(p.dtype) or 1):
            return None
        dev, why = self.devices.map(p.device)
        if why:
            self.note(p.id, why)
        dt = torch_dtype(p.dtype)
        if (
            dev.startswith("meta")
            or self.filler.mode == "meta"
            or dt.itemsize != (itemsize(p.dtype) or 1)
        ):
            return None
        return self.fresh(sid, p, dt, dev)

    def storage_for(self, p: TensorPlan) -> Any:
        q = dataclasses.replace(p, storage=None)
        return self.storage(q)

    def finish(self, p: TensorPlan, r: Any) -> Any:
        """Autograd state, Parameter-ness, conj and neg bits for a freshly made leaf tensor."""
        torch = self.torch
        if p.param:
            r = torch.nn.Parameter(r, requires_grad=self.can_grad(p, r))
        elif self.can_grad(p, r):
            r.requires_grad_(True)
            if not p.leaf:
                with torch.enable_grad():
                    r = _nonleaf_fn(torch).apply(r)
        self.bits(p, r)
        return r

    def can_grad(self, p: TensorPlan, r: Any) -> bool:
        """Whether r requires grad as logged (the note says why not, when the log says so)."""
        why = grad_refused(p, r.dtype)
        if why is not None:
            self.note(p.id, why)
        return p.requires_grad and why is None

    def bits(self, p: TensorPlan, r: Any) -> None:
        torch = self.torch
        if p.conj and not r.is_conj():
            if r.dtype.is_complex:
                torch._C._set_conj(r, True)
            else:
                self.note(p.id, "conj bit on a real dtype: left off")
        if p.neg and not r.is_neg():
            torch._C._set_neg(r, True)

    def view(self, p: TensorPlan) -> Any:
        torch = self.torch
        assert p.base is not None
        base = self.get(p.base)
        if base is None:
            self.note(p.id, f"its base was not rebuilt ({self.errors.get(p.base)}): not a view")
            return self.plain(p)
        if not p.concrete() or p.stride is None:
            raise _Failed("sizes are not concrete")
        dt = torch_dtype(p.dtype)
        try:
            with torch.no_grad():
                if base.dtype != dt:
                    if base.dtype.is_complex and not dt.is_complex:
                        base = torch.view_as_real(base)
                    elif dt.is_complex and not base.dtype.is_complex:
                        base = torch.view_as_complex(base)
                    if base.dtype != dt:
                        base = base.view(dt)
            if p.leaf or not p.requires_grad:
                with torch.no_grad():
                    r = base.as_strided(p.size, p.stride, p.offset)
                if p.requires_grad:
                    r.requires_grad_(True)
            elif base.requires_grad:
                with torch.enable_grad():
                    r = base.as_strided(p.size, p.stride, p.offset)
            else:
                with torch.no_grad():
                    mid = base.view(base.shape)
                mid.requires_grad_(True)
                with torch.enable_grad():
                    r = mid.as_strided(p.size, p.stride, p.offset)
        except Exception as e:
            self.note(p.id, f"not rebuilt as a view of its base ({first_line(e)})")
            return self.plain(p)
        if p.creation_meta:
            cm = _creation_meta(torch, p.creation_meta)
            if cm is not None:
                with contextlib.suppress(Exception):
                    torch._C._autograd._set_creation_meta(r, cm)
        if p.param:
            self.note(p.id, "a Parameter that is a view: rebuilt as a Parameter, not a view")
            r = torch.nn.Parameter(r.detach(), requires_grad=self.can_grad(p, r))
        self.bits(p, r)
        return r

    def sparse(self, p: TensorPlan) -> Any:
        torch = self.torch
        if not p.concrete():
            raise _Failed("sizes are not concrete")
        dt = torch_dtype(p.dtype)
        dev, why = self.devices.map(p.device)
        if why:
            self.note(p.id, why)
        size = [int(d) for d in p.size]
        if p.layout == "sparse_coo" or p.sparse:
            sd = p.sparse_dim if p.sparse_dim is not None else len(size)
            r = torch.sparse_coo_tensor(
                torch.empty((sd, 0), dtype=torch.int64, device=dev),
                torch.empty((0, *size[sd:]), dtype=dt, device=dev),
                size,
                is_coalesced=bool(p.coalesced),
                check_invariants=True,  # said, so torch does not warn; nnz 0 passes
            )
            self.note(p.id, "sparse COO: the log has no indices, values or nnz: rebuilt with nnz 0")
        elif p.layout == "sparse_csr" and len(size) == 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "support is in beta state"
                r = torch.sparse_csr_tensor(
                    torch.zeros(size[0] + 1, dtype=torch.int64, device=dev),
                    torch.empty(0, dtype=torch.int64, device=dev),
                    torch.empty(0, dtype=dt, device=dev),
                    size,
                    check_invariants=True,
                )
            self.note(p.id, "sparse CSR: the log has no indices or values: rebuilt with nnz 0")
        else:
            raise _Failed(f"layout {p.layout} cannot be rebuilt from the log")
        if p.requires_grad:
            r.requires_grad_(True)
        return r

    def subclass(self, p: TensorPlan) -> Any:
        if p.type_name == NJT:
            return self.njt(p)
        cls, why = resolve_type(p.type_name, self.allow_import)
        if cls is None:
            raise _StandIn(f"subclass not rebuilt: {why}")
        if not hasattr(cls, "__tensor_unflatten__"):
            raise _StandIn(f"{p.type_name} has no __tensor_unflatten__")
        inner = self.inner(p)
        ctx, ok = _literal(p.ctx)
        if not ok:
            raise _StandIn(f"subclass not rebuilt: its flatten context {p.ctx!r} is only a repr")
        if not p.concrete() or p.stride is None:
            raise _StandIn("subclass not rebuilt: its outer sizes are not concrete")
        try:
            r = cls.__tensor_unflatten__(inner, ctx, tuple(p.size), tuple(p.stride))
        except Exception as e:
            raise _StandIn(f"{p.type_name}.__tensor_unflatten__ failed: {first_line(e)}") from e
        if p.view:
            self.note(p.id, "a view of another tensor: rebuilt from its inner tensors, not a view")
        return self.finish_subclass(p, r)

    def inner(self, p: TensorPlan) -> dict[str, Any]:
        inner: dict[str, Any] = {}
        for name, iid in p.attrs.items():
            t = self.get(iid)
            if t is None:
                raise _StandIn(f"inner tensor {name} not rebuilt: {self.errors.get(iid)}")
            inner[name] = t
        return inner

    def finish_subclass(self, p: TensorPlan, r: Any) -> Any:
        torch = self.torch
        if p.param:
            r = torch.nn.Parameter(r, requires_grad=self.can_grad(p, r))
        elif p.requires_grad and not r.requires_grad:
            if p.leaf or not r.is_leaf:
                r.requires_grad_(True)
            if not p.leaf and r.is_leaf:
                with torch.enable_grad():
                    r = _nonleaf_fn(torch).apply(r)
        self.bits(p, r)
        return r

    def njt(self, p: TensorPlan) -> Any:
        """A jagged nested tensor from its values and valid offsets (min/max seqlen kept)."""
        torch = self.torch
        from torch.nested._internal import nested_tensor as nt

        ctx, ok = _literal(p.ctx)
        ragged = ctx.get("ragged_idx", 1) if ok and isinstance(ctx, dict) else 1
        if not isinstance(ragged, int) or ragged < 1:
            ragged = 1
        inner = self.inner(p)
        values, offsets = inner.get("_values"), inner.get("_offsets")
        if values is None or offsets is None:
            raise _StandIn("jagged tensor without _values or _offsets")
        lengths = inner.get("_lengths")
        mn, mx = inner.get("_min_seqlen_tensor"), inner.get("_max_seqlen_tensor")
        min_len = mn.shape[0] if mn is not None else None
        max_len = mx.shape[0] if mx is not None else None
        cache = ctx.get("metadata_cache") if ok and isinstance(ctx, dict) else None
        if isinstance(cache, dict):  # torch 2.4 logs them in the ctx, not as inner tensors
            got = cache.get("min_seqlen")
            min_len = got if min_len is None and type(got) is int else min_len
            got = cache.get("max_seqlen")
            max_len = got if max_len is None and type(got) is int else max_len
        if self.valid_offsets and self.mode != "meta":
            why = _valid_offsets(
                torch, offsets, lengths, values.shape[ragged - 1], min_len, max_len
            )
            if why:
                self.note(p.id, why)
        if p.view and p.base == p.attrs.get("_values"):
            try:
                r = nt.nested_view_from_values_offsets_lengths(
                    values, offsets, lengths, ragged, min_len, max_len
                )
            except TypeError:  # torch 2.4 takes no min/max seqlen (its offsets fit them)
                r = nt.nested_view_from_values_offsets_lengths(values, offsets, lengths, ragged)
        else:
            meta = {"requires_grad": p.requires_grad, "ragged_idx": ragged}
            r = nt.NestedTensor.__tensor_unflatten__(inner, meta, None, None)
            if p.view:
                self.note(p.id, "a view of another tensor: rebuilt from its inner tensors")
        return self.finish_subclass(p, r)


def _valid_offsets(
    torch: Any,
    offsets: Any,
    lengths: Any,
    total: int,
    min_len: int | None,
    max_len: int | None,
) -> str | None:
    """Write offsets (and lengths) that split `total` rows into batches within min/max seqlen."""
    batch = offsets.shape[0] - 1 if offsets.dim() == 1 else -1
    if batch < 0:
        return "offsets are not 1-d: left as random values"
    lo = min_len if min_len is not None else 0
    hi = max_len if max_len is not None else total
    lens = [lo] * batch
    rest = total - lo * batch
    if batch and (rest < 0 or lo > hi):
        lens = [total // batch] * batch
        rest = total - sum(lens)
        note = "min/max seqlen do not fit the values: offsets split them evenly"
    else:
        note = None
    for i in range(batch):
        if rest <= 0:
            break
        add = min(rest, max(0, hi - lens[i]))
        lens[i] += add
        rest -= add
    if batch:
        lens[-1] += rest
    acc = [0]
    for n in lens:
        acc.append(acc[-1] + n)
    with torch.no_grad():
        offsets.copy_(torch.tensor(acc, dtype=offsets.dtype))
        if lengths is not None and lengths.shape == (batch,):
            lengths.copy_(torch.tensor(lens, dtype=lengths.dtype))
    return note


def _creation_meta(torch: Any, text: str) -> Any:
    name = text.rsplit(".", 1)[-1]
    return getattr(torch._C._autograd.CreationMeta, name, None)


def grad_refused(p: TensorPlan, dtype: Any) -> str | None:
    """Why a tensor logged as requiring grad cannot: torch allows it for float and complex only."""
    if p.requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        return f"requires_grad on {p.dtype} is impossible in torch: left off"
    return None


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    if not text:
        return type(e).__name__
    if len(text) > 1 and text[0].rstrip().endswith(":"):  # "... expected one of:" and what
        return f"{text[0].rstrip()} {text[1].strip()}"[:300]
    return text[0][:300]


def real_bytes(groups: Sequence[GroupPlan]) -> int:
    """Bytes the real rebuild of these groups allocates."""
    total = 0
    for g in groups:
        total += sum(g.storages.values())
        undescribed: dict[int, int] = {}  # a subclass's storage: its stand-in allocates it
        for p in g.tensors.values():
            if p.storage is None and not p.subclass:
                total += p.extent()
            elif p.subclass and p.storage is not None and p.storage not in g.storages:
                undescribed[p.storage] = max(undescribed.get(p.storage, 0), p.extent())
        total += sum(undescribed.values())
    return total


def real_inputs(
    compile: Compile,
    *,
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """Real (random, zeros) or meta tensors for every input of a compile, aliasing kept."""
    if mode not in MODES:
        raise TlviewError(f"mode {mode!r}: expected one of {', '.join(MODES)}", EXIT_USAGE)
    torch = need_torch()
    _symbols, groups = plans_for(compile)
    if mode != "meta":
        need = real_bytes(groups)
        if need > max_bytes:
            raise TlviewError(
                f"compile {compile.key} of {compile.log}: its inputs need {nbytes(need)} of "
                f"memory, over --max-bytes {nbytes(max_bytes)}; use --mode meta or raise "
                "--max-bytes",
                EXIT_REFUSED,
            )
    devices = Devices(torch, device, mode)
    filler = _Filler(torch, mode, seed)
    out = Rebuilt({}, {}, {}, groups)
    for g in groups:
        b = RealBuilder(g, mode=mode, filler=filler, devices=devices, allow_import=allow_import)
        b.build_all()
        collect(out, g, b.memo, b.notes, b.errors)
        out.storages.update(((g.describer, key), st) for key, st in b.storages.items())
    return out


def collect(
    out: Rebuilt,
    g: GroupPlan,
    memo: Mapping[int, Any],
    notes: Mapping[int, list[str]],
    errors: Mapping[int, str],
) -> None:
    d = g.describer
    out.built.update(((d, tid), t) for tid, t in memo.items())
    if not (notes or errors or g.missing or g.source_notes):  # the common case, in one pass
        out.tensors.update((name, memo[tid]) for name, tid, _src in g.sources)
        return
    for name, tid, _src in g.sources:
        extra = list(g.source_notes.get(name, []))
        if name in g.missing:
            out.failed[name] = g.missing[name]
            continue
        t = memo.get(tid)
        if t is None:
            out.failed[name] = errors.get(tid, "not rebuilt")
        else:
            out.tensors[name] = t
        got = extra + _tree_notes(g, tid, notes, errors) if notes or errors else extra
        if got:
            out.notes[name] = got


def _tree_notes(
    g: GroupPlan, tid: int, notes: Mapping[int, list[str]], errors: Mapping[int, str]
) -> list[str]:
    """Notes of a tensor and of the tensors it is built from (base, grad, inner)."""
    out: list[str] = []
    seen: set[int] = set()
    todo = [(tid, "")]
    while todo:
        i, path = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for n in notes.get(i, ()):
            text = n if not path else f"{path}: {n}"
            if text not in out:
                out.append(text)
        if path and i in errors:
            out.append(f"{path}: not rebuilt: {errors[i]}")
        p = g.tensors.get(i)
        if p is None:
            continue
        links = [(j, f"{path}.{name}" if path else name) for name, j in p.attrs.items()]
        if p.grad is not None:
            links.append((p.grad, f"{path}.grad" if path else "grad"))
        if p.base is not None:
            links.append((p.base, f"{path}._base" if path else "_base"))
        todo.extend(reversed(links))
    return out


# --------------------------------------------------------------------------------------------
# Fake tensors through torch's MetaConverter
# --------------------------------------------------------------------------------------------


def fake_inputs(
    log: str | Path | Report | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: Any = None,
    shape_env: Any = None,
    allow_import: Sequence[str] = (),
) -> dict[str, Any]:
    """FakeTensors for the inputs of one compile, with the original run's symbols where dynamic.

    `log` is a path, a loaded Report (then `compile_id` picks the compile) or a Compile. Without
    `fake_mode` and `shape_env`, a new FakeTensorMode over a ShapeEnv that names each dynamic
    dim's symbol as the original run did.
    """
    got = fake_rebuild(
        log, compile_id, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import
    )
    return got.tensors


def fake_rebuild(
    log: str | Path | Report | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: Any = None,
    shape_env: Any = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """Like `fake_inputs`, with the notes and failures of each input."""
    if isinstance(log, Compile):
        c = log
    else:
        if compile_id is None:
            raise TlviewError("fake_inputs: give a compile id", EXIT_USAGE)
        report = log if isinstance(log, Report) else _load(log)
        c = find_compile(report, compile_id)
    need_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    symbols, groups = plans_for(c)
    own = fake_mode is None and shape_env is None  # ours to make: one per set of symbols
    if fake_mode is None:
        if shape_env is None:
            shape_env = named_shape_env(symbols)
        fake_mode = FakeTensorMode(shape_env=shape_env)
    elif shape_env is None:
        shape_env = fake_mode.shape_env
    out = Rebuilt({}, {}, {}, groups)
    for g in groups:
        mode, env, gs = fake_mode, shape_env, symbols
        if g.symbols is not None:
            gs = g.symbols
            if own:  # each export had a shape env of its own: its symbols, its ranges
                env = named_shape_env(gs)
                mode = FakeTensorMode(shape_env=env)
        fb = FakeBuilder(g, mode, env, gs, allow_import)
        fb.build_all()
        collect(out, g, fb.memo, fb.notes, fb.errors)
    return out


def _load(path: str | Path) -> Report:
    from tlview.load import load

    return load(path)


def named_shape_env(symbols: SymbolPlan) -> Any:
    """A ShapeEnv that gives each dynamic dim the symbol name it had in the original run."""
    return _named_shape_env_cls()(symbols.names)


@functools.cache
def _named_shape_env_cls() -> Any:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    class NamedShapeEnv(ShapeEnv):
        """ShapeEnv whose new symbols take the names logged by `create_symbol`.

        A dim with its own record gets a fresh symbol of that name; a dim the graph shows with
        a symbol made earlier reuses it, as duck sizing did in the original run.
        """

        def __init__(self, names: Mapping[str, str]) -> None:
            super().__init__()
            self.tlview_names = dict(names)
            self.tlview_made: dict[str, Any] = {}
            self.tlview_want: int | None = None

        def create_symbol(
            self, val: Any, source: Any, dynamic_dim: Any = None, *a: Any, **k: Any
        ) -> Any:
            if dynamic_dim is None:
                dynamic_dim = DimDynamic.DUCK
            name = getattr(source, "name", None)
            if callable(name):  # an older torch's (2.6) Source.name() is a method
                name = name()
            want = self.tlview_names.get(name) if isinstance(name, str) else None
            if want is None or dynamic_dim is DimDynamic.STATIC or type(val) is not int:
                return super().create_symbol(val, source, dynamic_dim, *a, **k)
            made = self.tlview_made.get(want)
            hints = getattr(self, "backed_var_to_val", None)
            if hints is None:  # an older torch's name for it
                hints = self.var_to_val
            hint = hints.get(made) if made is not None else None
            if made is not None and hint is not None and int(hint) == val:
                old = self.val_to_var.get(val)
                self.val_to_var[val] = made
                try:
                    return super().create_symbol(val, source, DimDynamic.DUCK, *a, **k)
                finally:
                    if old is None:
                        self.val_to_var.pop(val, None)
                    else:
                        self.val_to_var[val] = old
            m = re.fullmatch(r"s(\d+)", want)
            self.tlview_want = int(m.group(1)) if m else None
            try:
                out = super().create_symbol(val, source, DimDynamic.DYNAMIC, *a, **k)
            finally:
                self.tlview_want = None
            if str(out) == want:
                self.tlview_made[want] = out
            return out

        def _generate_unique_id(self, source_name: str) -> int:
            w = self.tlview_want
            if w is not None and w not in self.unique_ids:
                self.unique_ids.add(w)
                return w
            return super()._generate_unique_id(source_name)

    return NamedShapeEnv


def _known_fields(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """The values of a torch dataclass's fields that this torch has: an older one lacks some
    (torch 2.6's MetaTensorDesc has no dynamo_hint_overrides, and dynamo then had no hint
    overrides to honour)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return {k: v for k, v in values.items() if k in names}


_FIELDS: dict[type, frozenset[str]] = {}


def logged_source(name: str) -> Any:
    """A dynamo Source whose name is the logged string, so symbols get the logged sources."""
    global _SOURCE_CLS
    if _SOURCE_CLS is None:
        from dataclasses import dataclass as dc

        from torch._guards import GuardSource, Source

        @dc(frozen=True)
        class LoggedSource(Source):
            """A source known only by the name the log gave it."""

            text: str

            @property
            def guard_source(self) -> Any:
                return GuardSource.LOCAL

            @property
            def _name_template(self) -> str:
                return self.text

        @dc(frozen=True)
        class OldLoggedSource(Source):
            """The same for an older torch (2.6), whose Source has the methods name() and
            guard_source() where later ones have properties."""

            text: str

            def guard_source(self) -> Any:  # type: ignore[override]
                return GuardSource.LOCAL

            def name(self) -> str:  # type: ignore[override]
                return self.text

        old = inspect.isfunction(inspect.getattr_static(Source, "name", None))
        _SOURCE_CLS = OldLoggedSource if old else LoggedSource
    return _SOURCE_CLS(name)


_SOURCE_CLS: Any = None


class FakeBuilder:
    """Fakes for one describer group: MetaTensorDescs from the plans, one MetaConverter."""

    def __init__(
        self,
        group: GroupPlan,
        fake_mode: Any,
        shape_env: Any,
        symbols: SymbolPlan,
        allow_import: Sequence[str] = (),
    ) -> None:
        self.torch = need_torch()
        from torch._subclasses.meta_utils import MetaConverter

        self.g = group
        self.allow_import = allow_import
        self.mode = fake_mode
        self.shape_env = shape_env
        self.symbols = symbols
        self.conv: Any = MetaConverter()
        self.descs: dict[int, Any] = {}
        self.sdescs: dict[int, Any] = {}
        self.memo: dict[int, Any] = {}
        self.notes: dict[int, list[str]] = {}
        self.errors: dict[int, str] = {}
        self.busy: set[int] = set()
        self.keep: list[Any] = []  # MetaConverter's memo is weak: hold every fake it made
        self.owners: set[str] | None = None
        self.devices: dict[str, bool] = {}  # logged device -> whether this machine has it
        self.device: Any = None  # of the tensor being faked (an older MetaConverter's callback)

    def note(self, tid: int, text: str) -> None:
        lst = self.notes.setdefault(tid, [])
        if text not in lst:
            lst.append(text)

    def build_all(self) -> None:
        meta_utils = importlib.import_module("torch._subclasses.meta_utils")
        too_old = not hasattr(meta_utils, "MetaTensorDesc")
        seen: set[int] = set()
        for _name, tid, src in self.g.sources:
            if tid in seen:
                continue
            seen.add(tid)
            if too_old:  # torch 2.3: MetaConverter takes real tensors, not descriptions
                self.errors[tid] = (
                    f"torch {self.torch.__version__} cannot fake a described tensor "
                    "(no MetaTensorDesc: torch 2.4 or newer can)"
                )
                continue
            self.get(tid, src)

    def get(self, tid: int, name: str) -> Any:
        if tid in self.memo:
            return self.memo[tid]
        if tid in self.errors:
            return None
        try:
            desc = self.desc(tid)
            env = self.shape_env if self.symbolic(tid, name) else None
            ctx = self.context(tid, name) if env is not None else None
            self.device = desc.device
            r = self.conv.meta_tensor(desc, env, self.callback, logged_source(name), ctx)
            if r is NotImplemented:
                raise _Failed("MetaConverter cannot fake this kind of tensor")
            self.memo[tid] = r
            self.keep.append(r)
            return r
        except _Failed as e:
            self.errors[tid] = str(e)
        except Exception as e:
            self.errors[tid] = f"{type(e).__name__}: {first_line(e)}"
        return None

    def symbolic(self, tid: int, name: str) -> bool:
        """Whether a tensor (or its base, grad, inner tensors) had a dynamic dim in the log.

        Static ones skip the ShapeEnv: the same fakes, made three times faster.
        """
        if self.shape_env is None:
            return False
        if self.owners is None:
            self.owners = set()
            for key in [*self.symbols.names, *self.symbols.unbacked]:
                owner = _DIM_SUFFIX.sub("", key)
                self.owners.update(owner[:i] for i, ch in enumerate(owner) if ch in ".[")
                self.owners.add(owner)
        p = self.g.tensors.get(tid)
        return name in self.owners or (p is not None and (p.nested or p.subclass))

    def callback(self, make_meta: Callable[[], Any], device: Any = None) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.utils._mode_utils import no_dispatch

        if device is None:  # torch 2.4's MetaConverter does not say: the tensor's own device
            device = self.device
        with no_dispatch():
            r = FakeTensor(self.mode, make_meta(), device)
        self.keep.append(r)
        return r

    def sdesc(self, sid: int, nbytes: int = 0) -> Any:
        MetaStorageDesc: Any = importlib.import_module(
            "torch._subclasses.meta_utils"
        ).MetaStorageDesc

        d = self.sdescs.get(sid)
        if d is None:
            nbytes = self.g.storages.get(sid, nbytes)
            if sid in self.g.zero:
                nbytes = 0
            d = self.sdescs[sid] = MetaStorageDesc(id=sid, size=nbytes, data=None)
        return d

    def here(self, device: str) -> bool:
        """Whether this machine has the device (a fake needs it only for a non-leaf's grad_fn)."""
        got = self.devices.get(device)
        if got is None:
            got = self.devices[device] = Devices(self.torch, None, "real").available(device)
        return got

    def desc(self, tid: int) -> Any:
        """The MetaTensorDesc of a logged tensor, links resolved to the described objects."""
        torch = self.torch
        MetaTensorDesc: Any = importlib.import_module("torch._subclasses.meta_utils").MetaTensorDesc

        d = self.descs.get(tid)
        if d is not None:
            return d
        p = self.g.tensors.get(tid)
        if p is None:
            raise _Failed(f"tensor {tid} was never described")
        if p.error:
            raise _Failed(p.error)
        if tid in self.busy:
            raise _Failed(f"tensor {tid} refers to itself through base, grad or attrs")
        self.busy.add(tid)
        try:
            for n in p.notes:
                self.note(tid, n)
            kw: dict[str, Any] = {}
            view = p.view and p.base is not None
            subclass = p.subclass
            if subclass:
                cls, why = resolve_type(p.type_name, self.allow_import)
                ctx, ok = _literal(p.ctx)
                if cls is not None and not ok:
                    why = f"its flatten context {p.ctx!r} is only a repr"
                if cls is None or not ok:
                    if not p.concrete():
                        raise _Failed(f"subclass not faked: {why}")
                    self.note(
                        tid,
                        f"subclass not rebuilt: {why}; a plain tensor with its size, stride "
                        "and dtype stands in",
                    )
                    subclass = view = False
                else:
                    kw["attrs"] = {k: self.desc(i) for k, i in p.attrs.items()}
                    kw["ctx"] = ctx
                    kw["type"] = cls
            if subclass and view:
                vf = self.view_func(p)
                if vf is None:
                    self.note(
                        tid, "a view of another tensor: faked from its inner tensors, not a view"
                    )
                    view = False
                else:
                    kw["view_func"] = vf
            if p.functorch or p.functional:
                self.note(
                    tid,
                    "functorch or functional wrapper: its wrapper state is not logged; "
                    "faked as the plain tensor",
                )
            if view:
                assert p.base is not None
                base = self.g.tensors.get(p.base)
                if base is None or base.error:
                    self.note(tid, "its base was not described: faked as a non-view")
                    view = False
                elif base.subclass and not p.subclass:
                    self.note(tid, "a dense view of a subclass: faked as a non-view")
                    view = False
                else:
                    kw["base"] = self.desc(p.base)
                    cm = _creation_meta(torch, p.creation_meta or "CreationMeta.DEFAULT")
                    kw["creation_meta"] = cm
            if p.grad is not None:
                try:
                    kw["grad"] = self.desc(p.grad)
                except _Failed as e:
                    self.note(tid, f".grad not faked: {e}")
            if p.storage is not None:
                kw["storage"] = self.sdesc(p.storage)
            elif not p.sparse and not subclass:
                kw["storage"] = self.sdesc(-1 - tid, p.extent())
            if p.sparse:
                kw["sparse_dim"] = p.sparse_dim if p.sparse_dim is not None else p.ndim
                kw["dense_dim"] = p.dense_dim if p.dense_dim is not None else 0
                kw["is_coalesced"] = bool(p.coalesced)
                self.note(tid, "sparse: the log has no nnz: faked with nnz 0")
            elif p.layout not in ("strided", "jagged"):
                raise _Failed(f"layout {p.layout} cannot be faked from the log")
            layout = getattr(torch, p.layout, torch.strided)
            leaf, grad = p.leaf, p.requires_grad
            dtype = torch_dtype(p.dtype)
            if (why := grad_refused(p, dtype)) is not None:
                grad = False
                self.note(tid, why)
            if not leaf and grad and not self.here(p.device):
                leaf = True  # its grad_fn would name the device, and torch aborts on that
                self.note(tid, f"faked as a leaf: this machine has no {p.device}")
            fields = dict(
                id=tid,
                ndim=p.ndim,
                dtype=dtype,
                device=torch.device(p.device),
                size=tuple(self.dim(x) for x in p.size),
                dynamo_dynamic_indices=list(p.dynamic_indices),
                dynamo_hint_overrides=dict(p.hint_overrides),
                layout=layout,
                is_inference=False,
                is_leaf=leaf,
                requires_grad=grad,
                is_sparse=p.sparse,
                is_mkldnn=False,
                is_view=view,
                is_nested=p.nested,
                nested_int=p.nested_int,
                is_traceable_wrapper_subclass=subclass,
                is_conj=p.conj,
                is_neg=p.neg,
                is_parameter=p.param,
                stride=None if p.stride is None else tuple(self.dim(x) for x in p.stride),
                storage_offset=p.offset,
                **kw,
            )
            d = MetaTensorDesc(**_known_fields(MetaTensorDesc, fields))
            if p.inference:
                self.note(tid, "inference tensor: faked as a normal tensor")
            if p.mkldnn:
                self.note(tid, "mkldnn tensor: faked as a strided tensor")
            self.descs[tid] = d
            return d
        finally:
            self.busy.discard(tid)

    def dim(self, x: int | str) -> Any:
        if isinstance(x, int):
            return x
        m = _NESTED.fullmatch(x)
        if not m:
            raise _Failed(f"size {x!r} is not concrete")
        from torch.nested._internal.nested_int import NestedIntNode

        return self.torch.SymInt(NestedIntNode(int(m.group(2)), int(m.group(1) or 1)))

    def view_func(self, p: TensorPlan) -> Any:
        """Replays a jagged tensor's view of its values; other subclass views are not logged."""
        if p.type_name != NJT or p.base is None or p.base != p.attrs.get("_values"):
            return None
        try:
            from torch._subclasses.meta_utils import ViewFunc
        except ImportError:  # torch 2.4 replays views another way, which the log cannot feed
            raise _Failed(
                f"torch {self.torch.__version__} cannot fake a jagged tensor from the log "
                "(it has no meta_utils.ViewFunc; torch 2.6 and newer can)"
            ) from None
        conv: Any = self.conv
        attrs = dict(p.attrs)
        ctx, _ = _literal(p.ctx)
        ragged = ctx.get("ragged_idx", 1) if isinstance(ctx, dict) else 1

        class NestedFromValues(ViewFunc):
            """`_nested_view_from_jagged` over the fake values, with the fake offsets."""

            def apply(
                self,
                t: Any,
                new_base: Any,
                symint_visitor_fn: Any = None,
                tensor_visitor_fn: Any = None,
            ) -> Any:
                import torch
                from torch.nested._internal.nested_tensor import _nt_view_dummy

                def inner(name: str) -> Any:
                    i = attrs.get(name)
                    return None if i is None else conv.tensor_memo.get(i)

                return torch._nested_view_from_jagged(
                    new_base,
                    inner("_offsets"),
                    _nt_view_dummy(),
                    inner("_lengths"),
                    ragged,
                    inner("_min_seqlen_tensor"),
                    inner("_max_seqlen_tensor"),
                )

        return NestedFromValues()

    def context(self, tid: int, name: str) -> Any:
        """The symbolic context saying which dims of this tensor were dynamic, and how."""
        from torch.fx.experimental.symbolic_shapes import (
            DimDynamic,
            StatelessSymbolicContext,
            StrictMinMaxConstraint,
            SubclassSymbolicContext,
        )
        from torch.utils._sympy.value_ranges import ValueRanges

        p = self.g.tensors[tid]
        dyn: list[Any] = []
        cons: list[Any] = []
        for i in range(p.ndim):
            dim = f"{name}.size()[{i}]"
            nested = isinstance(p.size[i], str)
            if dim in self.symbols.unbacked:
                # An older torch (2.6) names it SIZE_LIKE_UNBACKED.
                dyn.append(
                    getattr(DimDynamic, "UNBACKED", None) or DimDynamic["SIZE_LIKE_UNBACKED"]
                )
                cons.append(None)
            elif dim in self.symbols.names or nested:
                dyn.append(DimDynamic.DYNAMIC if nested else DimDynamic.DUCK)
                rng = self.symbols.ranges.get(dim)
                if rng is not None:
                    import sympy

                    try:
                        from torch.utils._sympy.numbers import int_oo
                    except ImportError:  # torch 2.4: sympy's own infinity
                        int_oo = sympy.oo
                    lo = rng[0] if rng[0] is not None else 0
                    hi: Any = rng[1] if rng[1] is not None else int_oo
                    cons.append(
                        StrictMinMaxConstraint(
                            vr=ValueRanges(lower=sympy.Integer(lo), upper=hi), warn_only=False
                        )
                    )
                else:
                    cons.append(None)
            else:
                dyn.append(DimDynamic.STATIC)
                cons.append(None)
        base_ctx = None
        if p.view and p.base is not None and p.base in self.descs and not p.subclass:
            base_ctx = self.context(p.base, f"{name}._base")
        if p.subclass and p.attrs:
            inner = {k: self.context(i, f"{name}.{k}") for k, i in p.attrs.items()}
            return SubclassSymbolicContext(
                dynamic_sizes=dyn,
                constraint_sizes=cons,
                view_base_context=base_ctx,
                tensor_source=logged_source(name),
                inner_contexts=inner,
            )
        return StatelessSymbolicContext(
            dynamic_sizes=dyn, constraint_sizes=cons, view_base_context=base_ctx
        )


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


def _fmt_dims(v: Sequence[Any] | None, symbols: Mapping[int, str] | None = None) -> str:
    return "-" if v is None else dims(list(v), symbols)


def input_rows(
    c: Compile, allow_import: Sequence[str] = ()
) -> tuple[list[tuple[str, ...]], list[str], str | None]:
    """Rows for `tlview inputs`: each source with its metadata and how it rebuilds."""
    by_tensor = {(inp.describer, inp.tensor.id): inp for inp in c.inputs}
    dynamic = dynamic_dims(c)
    _symbols, groups = plans_for(c)
    fake: Rebuilt | None = None
    real: Rebuilt | None = None
    problem = None
    try:
        need_torch()
    except TlviewError:
        problem = "torch is not installed: the fake and real rebuilds were not tried"
    else:
        fake = fake_rebuild(c, allow_import=allow_import)
        real = real_inputs(c, mode="meta", allow_import=allow_import)
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for g in groups:
        for name, tid, _src in g.sources:
            p = g.tensors.get(tid)
            inp = by_tensor.get((g.describer, tid))
            alias = f"A{inp.alias_group}" if inp is not None and inp.alias_group else "-"
            shape = stride = offset = dtype = dev = "?"
            if p is not None:
                symbols = input_symbols(inp, dynamic) if inp is not None else None
                shape, stride = _fmt_dims(p.size, symbols), _fmt_dims(p.stride)
                offset, dtype, dev = str(p.offset), p.dtype, p.device
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
                    _status(real, name),
                )
            )
            notes.extend(_note_lines(name, fake, real))
    return rows, notes, problem


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
