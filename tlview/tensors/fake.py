"""Fake tensors through torch's MetaConverter, with the original run's symbols and sources."""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tlview.index.dims import NJT, GraphDims
from tlview.model import Compile
from tlview.tensors import mesh
from tlview.tensors.dtypes import (
    grad_refused,
    logged_literal,
    need_torch,
    resolve_type,
    torch_creation_meta,
    torch_dtype,
)
from tlview.tensors.fill import Devices
from tlview.tensors.layouts import COMPRESSED, quiet_sparse
from tlview.tensors.plans import NESTED, GroupPlan, TensorPlan, plans_for
from tlview.tensors.rebuilt import Failed, Rebuilt, collect, first_line
from tlview.tensors.shapes import logged_source, named_shape_env
from tlview.units import number

if TYPE_CHECKING:
    from torch import SymInt, Tensor
    from torch import device as Device
    from torch._subclasses import meta_utils
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch._subclasses.meta_utils import MetaConverter, ViewFunc
    from torch.fx.experimental.symbolic_shapes import (
        DimConstraint,
        DimDynamic,
        ShapeEnv,
        StrictMinMaxConstraint,
        SymbolicContext,
    )

    from tlview.tensors.mesh import FlattenContext

    Desc = meta_utils.MetaTensorDesc[FakeTensor]  # a logged tensor, as MetaConverter takes it

_PLAIN_SYMBOL = re.compile(r"s\d+")
_DIM_SUFFIX = re.compile(r"\.(?:size\(\)\[\d+\]|stride\(\)\[\d+\]|storage_offset\(\))$")


def build_fakes(
    c: Compile,
    *,
    fake_mode: FakeTensorMode | None = None,
    shape_env: ShapeEnv | None = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """FakeTensors for every input of a compile, with the notes and failures of each."""
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


def _known_fields(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """The values of a torch dataclass's fields that this torch has: an older one lacks some
    (torch 2.6's MetaTensorDesc has no dynamo_hint_overrides, and dynamo then had no hint
    overrides to honour)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return {k: v for k, v in values.items() if k in names}


_FIELDS: dict[type, frozenset[str]] = {}


class FakeBuilder:
    """Fakes for one describer group: MetaTensorDescs from the plans, one MetaConverter."""

    def __init__(
        self,
        group: GroupPlan,
        fake_mode: FakeTensorMode,
        shape_env: ShapeEnv | None,
        symbols: GraphDims,
        allow_import: Sequence[str] = (),
    ) -> None:
        self.torch = need_torch()
        from torch._subclasses.meta_utils import MetaConverter

        self.g = group
        self.allow_import = allow_import
        self.mode = fake_mode
        self.shape_env = shape_env
        self.symbols = symbols
        self.conv: MetaConverter[FakeTensor] = MetaConverter()
        self.descs: dict[int, Desc] = {}
        self.sdescs: dict[int, meta_utils.MetaStorageDesc] = {}
        self.memo: dict[int, Tensor] = {}
        self.notes: dict[int, list[str]] = {}
        self.errors: dict[int, str] = {}
        self.busy: set[int] = set()
        self.keep: list[Tensor] = []  # MetaConverter's memo is weak: hold every fake it made
        self.owners: set[str] | None = None
        self.devices: dict[str, bool] = {}  # logged device -> whether this machine has it
        # Of the tensor being faked (an older MetaConverter's callback).
        self.device: Device | None = None

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

    def get(self, tid: int, name: str) -> Tensor | None:
        if tid in self.memo:
            return self.memo[tid]
        if tid in self.errors:
            return None
        try:
            p = self.g.tensors.get(tid)
            if p is not None and p.unwrapped is not None and (p.functorch or p.functional):
                r = self.memo[tid] = self.unwrap(tid, name)
                self.keep.append(r)
                return r
            desc = self.desc(tid)
            env = self.shape_env if self.symbolic(tid, name) else None
            ctx = self.context(tid, name) if env is not None else None
            self.device = desc.device
            r = self.conv.meta_tensor(desc, env, self.callback, logged_source(name), ctx)
            if r is NotImplemented:
                raise Failed("MetaConverter cannot fake this kind of tensor")
            self.memo[tid] = r
            self.keep.append(r)
            return r
        except Failed as e:
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

    def callback(
        self, make_meta: Callable[[], Tensor], device: Device | str | None = None
    ) -> FakeTensor:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.utils._mode_utils import no_dispatch

        if device is None:  # torch 2.4's MetaConverter does not say: the tensor's own device
            device = self.device
        with no_dispatch():
            r = FakeTensor(self.mode, make_meta(), device)
        self.keep.append(r)
        return r

    def sdesc(self, sid: int, nbytes: int = 0) -> meta_utils.MetaStorageDesc:
        MetaStorageDesc: type[meta_utils.MetaStorageDesc] = importlib.import_module(
            "torch._subclasses.meta_utils"
        ).MetaStorageDesc

        d = self.sdescs.get(sid)
        if d is None:
            nbytes = self.g.storages.get(sid, nbytes)
            if sid in self.g.zero:
                nbytes = 0
            # id: a logged storage id, an int where torch types a NewType of int
            d = self.sdescs[sid] = MetaStorageDesc(id=sid, size=nbytes, data=None)  # type: ignore[arg-type]
        return d

    def here(self, device: str) -> bool:
        """Whether this machine has the device (a fake needs it only for a non-leaf's grad_fn)."""
        got = self.devices.get(device)
        if got is None:
            got = self.devices[device] = Devices(self.torch, None, "real").available(device)
        return got

    def desc(self, tid: int) -> Desc:
        """The MetaTensorDesc of a logged tensor, links resolved to the described objects."""
        d = self.descs.get(tid)
        if d is not None:
            return d
        p = self.g.tensors.get(tid)
        if p is None:
            raise Failed(f"tensor {tid} was never described")
        if p.error:
            raise Failed(p.error)
        if tid in self.busy:
            raise Failed(f"tensor {tid} refers to itself through base, grad or attrs")
        self.busy.add(tid)
        try:
            d = self.descs[tid] = self.make_desc(p)
            return d
        finally:
            self.busy.discard(tid)

    def make_desc(self, p: TensorPlan) -> Desc:
        """`desc` of a tensor that can be described: its links, layout and flags."""
        MetaTensorDesc: type[Desc] = importlib.import_module(
            "torch._subclasses.meta_utils"
        ).MetaTensorDesc

        tid = p.id
        for n in p.notes:
            self.note(tid, n)
        kw: dict[str, Any] = {}
        subclass, view = self.subclass_desc(p, kw, p.view and p.base is not None)
        if (p.functorch or p.functional) and p.unwrapped is None:
            self.note(tid, "a functorch or functional wrapper logged without what it wraps")
        view = self.view_desc(p, kw, view)
        if p.grad is not None:
            try:
                kw["grad"] = self.desc(p.grad)
            except Failed as e:
                self.note(tid, f".grad not faked: {e}")
        self.layout_desc(p, kw, subclass)
        fields = self.fields(p, kw, subclass, view)
        d = MetaTensorDesc(**_known_fields(MetaTensorDesc, fields))
        if p.inference:
            self.note(tid, "inference tensor: faked as a normal tensor")
        return d

    def subclass_desc(self, p: TensorPlan, kw: dict[str, Any], view: bool) -> tuple[bool, bool]:
        """A subclass's type, context and inner tensors into KW (a view's replayed view too):
        whether it is faked as a subclass, and as a view. One that cannot be is a plain
        tensor with its size, stride and dtype, with a note."""
        if not p.subclass:
            return False, view
        cls, why = resolve_type(p.type_name, self.allow_import)
        ctx, ok = logged_literal(p.ctx)
        if cls is not None and p.dtensor is not None:
            ctx, ok, why = self.dtensor(p, kw)
        elif cls is not None and not ok:
            why = f"its flatten context {p.ctx!r} is only a repr"
        if cls is not None and p.type_name == NJT and not {"_values", "_offsets"} <= set(p.attrs):
            cls, why = None, "a jagged tensor logged without its _values or _offsets"
        if cls is None or not ok:
            if not p.concrete():
                raise Failed(f"subclass not faked: {why}")
            self.note(
                p.id,
                f"subclass not rebuilt: {why}; a plain tensor with its size, stride "
                "and dtype stands in",
            )
            return False, False
        kw["attrs"] = {k: self.desc(i) for k, i in p.attrs.items()}
        kw["ctx"] = ctx
        kw["type"] = cls
        if not view:
            return True, False
        vf = self.view_func(p)
        if vf is None:
            self.note(p.id, "a view of another tensor: faked from its inner tensors, not a view")
            return True, False
        kw["view_func"] = vf
        return True, True

    def view_desc(self, p: TensorPlan, kw: dict[str, Any], view: bool) -> bool:
        """A view's base and creation meta into KW: whether it is faked as a view."""
        if not view:
            return False
        assert p.base is not None
        base = self.g.tensors.get(p.base)
        if base is None or base.error:
            self.note(p.id, "its base was not described: faked as a non-view")
            return False
        if base.subclass and not p.subclass:
            self.note(p.id, "a dense view of a subclass: faked as a non-view")
            return False
        kw["base"] = self.desc(p.base)
        cm = torch_creation_meta(self.torch, p.creation_meta or "CreationMeta.DEFAULT")
        kw["creation_meta"] = cm
        return True

    def layout_desc(self, p: TensorPlan, kw: dict[str, Any], subclass: bool) -> None:
        """Its storage, and what a sparse, compressed or mkldnn layout needs, into KW."""
        compressed = p.layout in COMPRESSED
        if p.storage is not None:
            kw["storage"] = self.sdesc(p.storage)
        elif not (p.sparse or compressed or subclass):
            kw["storage"] = self.sdesc(-1 - p.id, p.extent())
        if p.sparse:
            kw["sparse_dim"] = p.sparse_dim if p.sparse_dim is not None else p.ndim
            kw["dense_dim"] = p.dense_dim if p.dense_dim is not None else 0
            kw["is_coalesced"] = bool(p.coalesced)
            self.note(p.id, "sparse: the log has no nnz: faked with nnz 0")
        elif compressed:
            self.compressed(p, kw)
        elif p.mkldnn:
            self.note(p.id, "mkldnn: faked as torch fakes it, a strided tensor")
        elif p.layout not in ("strided", "jagged"):
            raise Failed(f"layout {p.layout} cannot be faked from the log")

    def fields(
        self, p: TensorPlan, kw: dict[str, Any], subclass: bool, view: bool
    ) -> dict[str, Any]:
        """The MetaTensorDesc's fields; grad left off where torch refuses it (a note says)."""
        torch = self.torch
        leaf, grad = p.leaf, p.requires_grad
        dtype = torch_dtype(p.dtype)
        if (why := grad_refused(p, dtype)) is not None:
            grad = False
            self.note(p.id, why)
        if not leaf and grad and not self.here(p.device):
            leaf = True  # its grad_fn would name the device, and torch aborts on that
            self.note(p.id, f"faked as a leaf: this machine has no {p.device}")
        return dict(
            id=p.id,
            ndim=p.ndim,
            dtype=dtype,
            device=torch.device(p.device),
            size=tuple(self.dim(x) for x in p.size),
            dynamo_dynamic_indices=list(p.dynamic_indices),
            dynamo_hint_overrides=dict(p.hint_overrides),
            layout=getattr(torch, p.layout, torch.strided),
            is_inference=False,
            is_leaf=leaf,
            requires_grad=grad,
            is_sparse=p.sparse,
            is_mkldnn=p.mkldnn,
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

    def compressed(self, p: TensorPlan, kw: dict[str, Any]) -> None:
        """A compressed sparse tensor's parts, as MetaConverter takes them (it fakes one with
        no entries, as torch does)."""
        quiet_sparse(self.torch)
        by_row = p.layout in ("sparse_csr", "sparse_bsr")
        parts = (
            ("crow_indices" if by_row else "ccol_indices", p.compressed),
            ("col_indices" if by_row else "row_indices", p.plain),
            ("values", p.values),
        )
        for field, tid in parts:
            if tid is None:
                raise Failed(f"{p.layout}: its {field} are not logged")
            kw[field] = self.desc(tid)
        kw["sparse_dim"] = p.sparse_dim if p.sparse_dim is not None else 2
        kw["dense_dim"] = p.dense_dim if p.dense_dim is not None else 0
        self.note(p.id, f"{p.layout}: faked as torch fakes it, with no entries")

    def dtensor(
        self, p: TensorPlan, kw: dict[str, Any]
    ) -> tuple[FlattenContext | None, bool, str | None]:
        """A DTensor's flatten context and mesh (`mesh.rebuilt_mesh`), or why not."""
        plan = p.dtensor or {}
        if "error" in plan:
            return None, False, f"DTensor not rebuilt: {plan['error']}"
        local = self.g.tensors.get(p.attrs.get("_local_tensor", -1))
        if local is None:
            return None, False, "DTensor not rebuilt: it has no _local_tensor"
        dev = str(plan["device"]).split(":")[0]
        if not Devices(self.torch, None, "real").available(dev):
            dev = "cpu"
        try:
            device_mesh, note = mesh.rebuilt_mesh(self.torch, plan, dev)
            ctx = mesh.flatten_context(self.torch, plan, torch_dtype(local.dtype))
        except Exception as e:
            return None, False, f"DTensor not rebuilt: {type(e).__name__}: {first_line(e)}"
        if note:
            self.note(p.id, note)
        kw["opaque_attrs"] = {"device_mesh": device_mesh}
        return ctx, True, None

    def unwrap(self, tid: int, name: str) -> Tensor:
        """A functorch or functional wrapper outside its transform: what the graph took, from
        the fake of the tensor it wraps (vmap's: one example of the batch, a view of it)."""
        p = self.g.tensors[tid]
        assert p.unwrapped is not None
        inner = self.get(p.unwrapped, f"{name}._unwrapped")
        if inner is None:
            raise Failed(f"the tensor it wraps was not faked: {self.errors.get(p.unwrapped)}")
        at = f" at level {p.level}" if p.level is not None else ""
        with self.torch.no_grad():
            if p.batched and p.bdim is not None and 0 <= p.bdim < inner.dim():
                r = inner.select(p.bdim, 0)
                self.note(
                    tid,
                    f"vmap's BatchedTensor{at} over dim {p.bdim} of a {list(inner.shape)} "
                    "tensor: faked outside vmap as the batch's first example, a view of it",
                )
            else:
                r = inner.view_as(inner)
                kind = "GradTrackingTensor" if p.functorch else "functional tensor"
                self.note(tid, f"a {kind}{at}: faked outside its transform as the tensor it wraps")
        if (
            p.requires_grad
            and not r.requires_grad
            and (r.dtype.is_floating_point or r.dtype.is_complex)
        ):
            r.requires_grad_(True)
        return r

    def dim(self, x: int | str) -> int | SymInt:
        if isinstance(x, int):
            return x
        m = NESTED.fullmatch(x)
        if not m:
            raise Failed(f"size {x!r} is not concrete")
        from torch.nested._internal.nested_int import NestedIntNode

        j, coeff = number(m.group(2)), number(m.group(1) or "1")
        if j is None or coeff is None:
            raise Failed(f"size {x[:80]!r} is not concrete")
        sym: SymInt = self.torch.SymInt(NestedIntNode(j, coeff))
        return sym

    def view_func(self, p: TensorPlan) -> ViewFunc[FakeTensor] | None:
        """Replays a jagged tensor's view of its values; other subclass views are not logged."""
        if p.type_name != NJT or p.base is None or p.base != p.attrs.get("_values"):
            return None
        try:
            from torch._subclasses.meta_utils import ViewFunc
        except ImportError:  # torch 2.4 replays views another way, which the log cannot feed
            raise Failed(
                f"torch {self.torch.__version__} cannot fake a jagged tensor from the log "
                "(it has no meta_utils.ViewFunc; torch 2.6 and newer can)"
            ) from None
        conv: Any = self.conv
        attrs = dict(p.attrs)
        ctx, _ = logged_literal(p.ctx)
        ragged = ctx.get("ragged_idx", 1) if isinstance(ctx, dict) else 1

        class NestedFromValues(ViewFunc):  # type: ignore[type-arg]
            """`_nested_view_from_jagged` over the fake values, with the fake offsets."""

            def apply(
                self,
                t: Tensor,
                new_base: Tensor,
                symint_visitor_fn: Callable[[int], int] | None = None,
                tensor_visitor_fn: Callable[[Tensor], Tensor] | None = None,
            ) -> Tensor:
                import torch
                from torch.nested._internal.nested_tensor import _nt_view_dummy

                def inner(name: str) -> Tensor | None:
                    i = attrs.get(name)
                    return None if i is None else conv.tensor_memo.get(i)

                return torch._nested_view_from_jagged(
                    new_base,
                    inner("_offsets"),  # type: ignore[arg-type]  # None: torch raises, get() says why
                    _nt_view_dummy(),
                    inner("_lengths"),
                    ragged,
                    inner("_min_seqlen_tensor"),
                    inner("_max_seqlen_tensor"),
                )

        return NestedFromValues()

    def context(self, tid: int, name: str) -> SymbolicContext:
        """The symbolic context saying which dims of this tensor were dynamic, and how."""
        from torch.fx.experimental.symbolic_shapes import (
            StatelessSymbolicContext,
            SubclassSymbolicContext,
        )

        p = self.g.tensors[tid]
        dims = [self.dim_dynamic(p, name, i) for i in range(p.ndim)]
        dyn = [d for d, _ in dims]
        cons = [c for _, c in dims]
        kw = self.stride_dynamic(p, name, dyn)
        base_ctx = None
        if p.view and p.base is not None and p.base in self.descs:
            base_ctx = self.context(p.base, f"{name}._base")
        if p.subclass and p.attrs:
            inner = {k: self.context(i, f"{name}.{k}") for k, i in p.attrs.items()}
            return SubclassSymbolicContext(
                dynamic_sizes=dyn,
                constraint_sizes=cons,
                view_base_context=base_ctx,
                tensor_source=logged_source(name),
                inner_contexts=inner,
                **_known_fields(SubclassSymbolicContext, kw),
            )
        return StatelessSymbolicContext(
            dynamic_sizes=dyn,
            constraint_sizes=cons,
            view_base_context=base_ctx,
            **_known_fields(StatelessSymbolicContext, kw),
        )

    def dim_dynamic(self, p: TensorPlan, name: str, i: int) -> tuple[DimDynamic, DimConstraint]:
        """How dim I was dynamic (unbacked, duck-sized, a nested int, static) and its range."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        dim = f"{name}.size()[{i}]"
        nested = isinstance(p.size[i], str)
        if dim in self.symbols.unbacked:
            # An older torch (2.6) names it SIZE_LIKE_UNBACKED.
            return getattr(DimDynamic, "UNBACKED", None) or DimDynamic["SIZE_LIKE_UNBACKED"], None
        if not (isinstance(self.symbols.names.get(dim), str) or nested):
            return DimDynamic.STATIC, None
        how = DimDynamic.DYNAMIC if nested else DimDynamic.DUCK
        rng = self.symbols.ranges.get(dim)
        return how, (_constraint(rng) if rng is not None else None)

    def stride_dynamic(
        self, p: TensorPlan, name: str, dyn: list[DimDynamic]
    ) -> dict[str, list[DimDynamic | None]]:
        """The graph's strides: its symbol where it has one (a stride no size gives, as a slice
        of a larger tensor has), else inferred (a value it pinned: create_symbol)."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        steps = [self.symbols.names.get(f"{name}.stride()[{i}]") for i in range(p.ndim)]
        if all(x is None for x in steps) or p.stride is None:
            return {}
        static = all(d is DimDynamic.STATIC for d in dyn)
        return {
            "dynamic_strides": [
                DimDynamic.DUCK
                if isinstance(x, str) and (static or _PLAIN_SYMBOL.fullmatch(x))
                else DimDynamic.INFER_STRIDE
                for x in steps
            ],
            "constraint_strides": [None] * p.ndim,
        }


def _constraint(rng: tuple[int | None, int | None]) -> StrictMinMaxConstraint:
    """A dim's logged value range as the constraint MetaConverter takes."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint
    from torch.utils._sympy.value_ranges import ValueRanges

    try:
        from torch.utils._sympy.numbers import int_oo
    except ImportError:  # torch 2.4: sympy's own infinity
        int_oo = sympy.oo
    lo = rng[0] if rng[0] is not None else 0
    hi: Any = rng[1] if rng[1] is not None else int_oo
    return StrictMinMaxConstraint(
        vr=ValueRanges(lower=sympy.Integer(lo), upper=hi), warn_only=False
    )
