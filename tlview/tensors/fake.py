"""Fake tensors through torch's MetaConverter, with the original run's symbols and sources."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tlview.index.dims import NJT, GraphDims
from tlview.model import Compile
from tlview.tensors.dtypes import (
    grad_refused,
    logged_literal,
    need_torch,
    resolve_type,
    torch_creation_meta,
    torch_dtype,
)
from tlview.tensors.exprs import sympy_expr
from tlview.tensors.fill import Devices
from tlview.tensors.plans import NESTED, GroupPlan, TensorPlan, plans_for
from tlview.tensors.rebuilt import Failed, Rebuilt, collect, first_line

_PLAIN_SYMBOL = re.compile(r"s\d+")
_DIM_SUFFIX = re.compile(r"\.(?:size\(\)\[\d+\]|stride\(\)\[\d+\]|storage_offset\(\))$")


def build_fakes(
    c: Compile,
    *,
    fake_mode: Any = None,
    shape_env: Any = None,
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


def named_shape_env(symbols: GraphDims) -> Any:
    """A ShapeEnv that gives each dynamic dim the symbol name it had in the original run."""
    return _named_shape_env_cls()(symbols.names)


@functools.cache
def _named_shape_env_cls() -> Any:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    class NamedShapeEnv(ShapeEnv):
        """ShapeEnv whose symbols take the graph's names (`index.dims.graph_dims`).

        A size, stride or offset the graph has as a symbol gets that symbol: a fresh one of its
        name the first time, the same one again where the graph shares it (as duck sizing or a
        guard made it share); one the graph has as an expression of symbols made before
        (`s20*s92`) gets that expression.
        """

        def __init__(self, names: Mapping[str, Any]) -> None:
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
            nested = _is_nested(val)
            if type(want) is int and type(val) is int and want == val:
                import sympy

                return sympy.Integer(val)  # the graph took the value (a guard pinned it)
            if (
                not isinstance(want, str)
                or dynamic_dim in (DimDynamic.STATIC, getattr(DimDynamic, "UNBACKED", None))
                or not (type(val) is int or nested)
            ):
                return super().create_symbol(val, source, dynamic_dim, *a, **k)
            m = re.fullmatch(r"s(\d+)", want)
            if m is None:  # an expression of the graph's symbols
                expr = self.tlview_expr(want, val)
                if expr is not None:
                    return expr
                return super().create_symbol(val, source, dynamic_dim, *a, **k)
            made = self.tlview_made.get(want)
            if made is not None and _same_hint(self.tlview_hint(made), val):
                self.source_to_var[str(name)] = made
                self.var_to_sources.setdefault(made, []).append(source)
                return made
            self.tlview_want = int(m.group(1))
            try:
                out = super().create_symbol(val, source, DimDynamic.DYNAMIC, *a, **k)
            finally:
                self.tlview_want = None
            if str(out) == want:
                self.tlview_made[want] = out
                if dynamic_dim is DimDynamic.DUCK and not nested and val not in self.val_to_var:
                    self.val_to_var[val] = out  # later dims of this value share it, as they did
            return out

        def tlview_hint(self, sym: Any) -> Any:
            hints = getattr(self, "backed_var_to_val", None)
            if hints is None:  # an older torch's name for it
                hints = self.var_to_val
            return hints.get(sym)

        def tlview_expr(self, text: str, val: int) -> Any:
            """The sympy expression of a logged one over the symbols made so far, if its value
            is `val`; never runs the text (`exprs.sympy_expr`)."""
            made = {str(s): s for s in self.tlview_made.values()}
            hints = getattr(self, "backed_var_to_val", None) or self.var_to_val
            for s in hints:
                made.setdefault(str(s), s)
            expr = sympy_expr(text, made)
            if expr is None or type(val) is not int:
                return None
            try:
                got = expr.xreplace(hints)
                return expr if int(got) == val else None
            except (TypeError, ValueError):
                return None

        def _generate_unique_id(self, source_name: str) -> int:
            w = self.tlview_want
            if w is not None and w not in self.unique_ids:
                self.unique_ids.add(w)
                return w
            return super()._generate_unique_id(source_name)

    return NamedShapeEnv


def _is_nested(val: Any) -> bool:
    node = getattr(val, "node", None)
    return node is not None and getattr(node, "is_nested_int", lambda: False)()


def _same_hint(hint: Any, val: Any) -> bool:
    """Whether a symbol's value in this env is `val` (an int, or a nested int as `j1`)."""
    if hint is None:
        return False
    if type(val) is int:
        try:
            return int(hint) == val
        except (TypeError, ValueError):
            return False
    node = val.node
    return (node.nested_int(), node.nested_int_coeff()) == (
        getattr(hint, "_val", None),
        getattr(hint, "_coeff", None),
    )


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
            raise Failed(f"tensor {tid} was never described")
        if p.error:
            raise Failed(p.error)
        if tid in self.busy:
            raise Failed(f"tensor {tid} refers to itself through base, grad or attrs")
        self.busy.add(tid)
        try:
            for n in p.notes:
                self.note(tid, n)
            kw: dict[str, Any] = {}
            view = p.view and p.base is not None
            subclass = p.subclass
            if subclass:
                cls, why = resolve_type(p.type_name, self.allow_import)
                ctx, ok = logged_literal(p.ctx)
                if cls is not None and not ok:
                    why = f"its flatten context {p.ctx!r} is only a repr"
                if cls is None or not ok:
                    if not p.concrete():
                        raise Failed(f"subclass not faked: {why}")
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
                    cm = torch_creation_meta(torch, p.creation_meta or "CreationMeta.DEFAULT")
                    kw["creation_meta"] = cm
            if p.grad is not None:
                try:
                    kw["grad"] = self.desc(p.grad)
                except Failed as e:
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
                raise Failed(f"layout {p.layout} cannot be faked from the log")
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
        m = NESTED.fullmatch(x)
        if not m:
            raise Failed(f"size {x!r} is not concrete")
        from torch.nested._internal.nested_int import NestedIntNode

        return self.torch.SymInt(NestedIntNode(int(m.group(2)), int(m.group(1) or 1)))

    def view_func(self, p: TensorPlan) -> Any:
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
        names = self.symbols.names
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
            elif isinstance(names.get(dim), str) or nested:
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
        kw: dict[str, Any] = {}
        steps = [names.get(f"{name}.stride()[{i}]") for i in range(p.ndim)]
        if any(x is not None for x in steps) and p.stride is not None:
            # The graph's strides: its symbol where it has one (a stride no size gives, as a
            # slice of a larger tensor has), else inferred (a value it pinned: create_symbol).
            static = all(d is DimDynamic.STATIC for d in dyn)
            kw["dynamic_strides"] = [
                DimDynamic.DUCK
                if isinstance(x, str) and (static or _PLAIN_SYMBOL.fullmatch(x))
                else DimDynamic.INFER_STRIDE
                for x in steps
            ]
            kw["constraint_strides"] = [None] * p.ndim
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
