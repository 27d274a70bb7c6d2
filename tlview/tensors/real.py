"""Real tensors (random, zeros) and meta tensors from the plans: storages shared as logged."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tlview.errors import EXIT_REFUSED, EXIT_USAGE, TlviewError
from tlview.index.dims import NJT
from tlview.model import Compile
from tlview.tensors import layouts, mesh
from tlview.tensors.dtypes import (
    grad_refused,
    logged_literal,
    need_torch,
    resolve_type,
    torch_creation_meta,
    torch_dtype,
    whole_dtype,
)
from tlview.tensors.fill import Devices, Filler, write_offsets
from tlview.tensors.logged import Logged, scalar_values, tensor_values
from tlview.tensors.options import MODES, RebuildOptions
from tlview.tensors.plans import GroupPlan, TensorPlan, plans_for, real_bytes
from tlview.tensors.rebuilt import Failed, Rebuilt, collect, first_line
from tlview.units import itemsize, nbytes

if TYPE_CHECKING:
    from types import ModuleType

    from torch import Generator, Tensor, UntypedStorage
    from torch import dtype as DType
    from torch.autograd import Function
    from torch.autograd.function import FunctionCtx

    # How `alone` makes a tensor of one dtype and device: the dtype, whether it can require
    # grad, the device, why that device, the generator of its normal values (None: the filler).
    Ready = tuple[DType, bool, str, str | None, Generator | None]

ZERO_NOTE = (
    "its storage is logged as 0 bytes (freed, as FSDP frees parameters between uses): rebuilt "
    "so, and reading its values crashes torch, as it would have in the program"
)


def _nonleaf_fn(torch: ModuleType) -> type[Function]:
    """An identity autograd function: its output aliases its input but is not a leaf."""
    global _NONLEAF
    if _NONLEAF is None:

        class NonLeafInput(torch.autograd.Function):  # type: ignore[misc,name-defined]
            @staticmethod
            def forward(ctx: FunctionCtx, x: Tensor) -> Tensor:
                return x.detach()

            @staticmethod
            def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
                return g

        _NONLEAF = NonLeafInput
    return _NONLEAF


_NONLEAF: type[Function] | None = None


class _StandIn(Exception):
    """The exact tensor cannot be built; a plain tensor of the same metadata stands in."""


class RealBuilder:
    """Builds one describer group's tensors: one storage per logged storage, views from bases."""

    def __init__(
        self,
        group: GroupPlan,
        opts: RebuildOptions,
        *,
        filler: Filler | None,
        devices: Devices,
        storages: Mapping[int, UntypedStorage] | None = None,
        valid_offsets: bool = True,
    ) -> None:
        self.torch = need_torch()
        self.g = group
        self.opts = opts  # its mode and allow_import; filler and devices say the rest
        self.filler = filler
        self.devices = devices
        self.given = storages or {}
        self.valid_offsets = valid_offsets
        self.storages: dict[int, UntypedStorage] = {}
        self.memo: dict[int, Tensor] = {}
        self.notes: dict[int, list[str]] = {}
        self.errors: dict[int, str] = {}
        self.busy: set[int] = set()
        self.fill_dtypes: dict[int, str] | None = None
        fills = filler is not None and filler.mode != "meta"
        self.quick: set[int] = group.whole if fills else set()
        self.ready: dict[tuple[str, str], Ready | tuple[()]] = {}  # (dtype, device) -> for `alone`
        # What Parameter(t, requires_grad) does for a plain tensor, without its Python frame.
        self.as_param: Callable[[Tensor, bool], Tensor] = functools.partial(
            self.torch.Tensor._make_subclass, self.torch.nn.Parameter
        )

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

    def get(self, tid: int) -> Tensor | None:
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
                raise Failed(p.error)
            r = self.make(p)
            self.memo[tid] = r
            return r
        except Failed as e:
            self.errors[tid] = str(e)
        except Exception as e:  # one tensor that fails never stops the others
            self.errors[tid] = f"{type(e).__name__}: {first_line(e)}"
        finally:
            self.busy.discard(tid)
        return None

    # -- storages -------------------------------------------------------------------------
    def storage(self, p: TensorPlan) -> UntypedStorage:
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
                raise Failed(
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

    def fill_dtype(self, sid: int, p: TensorPlan) -> DType:
        """The dtype whose random values fill a storage: that of its first non-view tensor."""
        if self.fill_dtypes is None:
            self.fill_dtypes = {}
            for q in self.g.tensors.values():
                if q.storage is not None and not q.view and q.error is None and not q.subclass:
                    self.fill_dtypes.setdefault(q.storage, q.dtype)
        return torch_dtype(self.fill_dtypes.get(sid, p.dtype))

    # -- tensors --------------------------------------------------------------------------
    def make(self, p: TensorPlan) -> Tensor:
        if p.id in self.quick:
            r = self.alone(p)
            if r is not None:
                return r
        if p.inference:
            self.note(p.id, "inference tensor: rebuilt as a normal tensor")
        r = self.kind_of(p)(p)
        if p.grad is not None:
            self.attach_grad(p, r)
        return r

    def kind_of(self, p: TensorPlan) -> Callable[[TensorPlan], Tensor]:
        """How a tensor of this plan is made: unwrapped, sparse, a subclass, a view, plain."""
        if p.unwrapped is not None and (p.functorch or p.functional):
            return self.unwrap
        if p.functorch or p.functional:
            self.note(p.id, "a functorch or functional wrapper logged without the tensor it wraps")
            return self.plain
        if p.mkldnn or p.sparse or p.layout not in ("strided", "jagged"):
            return self.sparse
        if p.subclass:
            return self.subclass_or_standin
        if p.view and p.base is not None:
            return self.view
        return self.plain

    def subclass_or_standin(self, p: TensorPlan) -> Tensor:
        """The subclass, else a plain tensor of its size, stride and dtype (with a note)."""
        try:
            return self.subclass(p)
        except _StandIn as e:
            self.note(p.id, f"{e}; a plain tensor with its size, stride and dtype stands in")
            return self.plain(p, outer=True)

    def attach_grad(self, p: TensorPlan, r: Tensor) -> None:
        """Its `.grad`, rebuilt; a note where it cannot be."""
        assert p.grad is not None
        g = self.get(p.grad)
        if g is None:
            self.note(p.id, f".grad not rebuilt: {self.errors.get(p.grad)}")
            return
        try:
            with self.torch.no_grad():
                r.grad = g
        except Exception as e:
            self.note(p.id, f".grad not attached: {first_line(e)}")

    def plain(self, p: TensorPlan, outer: bool = False) -> Tensor:
        torch = self.torch
        if not p.concrete() or p.stride is None:
            raise Failed("sizes are not concrete")
        r = self.whole(p) if not outer else None
        if r is None:
            st = self.storage(p) if not outer or p.storage is not None else self.storage_for(p)
            r = torch.empty(0, dtype=torch_dtype(p.dtype), device=st.device)
            r.set_(st, p.offset, p.size, p.stride)  # under build_all's no_grad
        return self.finish(p, r)

    def alone(self, p: TensorPlan) -> Tensor | None:
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
            r: Tensor = self.torch.empty_strided(p.size, p.stride, dtype=dt, device=dev)
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

    def ready_for(self, dtype: str, device: str) -> Ready | tuple[()]:
        """How `alone` makes tensors of one dtype and device; empty: it cannot."""
        kind = whole_dtype(dtype)
        dev, why = self.devices.map(device)
        if kind is None or dev.startswith("meta") or self.filler is None:
            return ()
        dt, grads = kind
        normal = self.filler.mode == "random" and dt in self.filler.normal
        return dt, grads, dev, why, self.filler.gen(dev) if normal else None

    def filler_for(self, r: Tensor, dev: str) -> None:
        assert self.filler is not None
        if self.filler.mode == "zeros":
            r.zero_()
        else:
            self.filler.fill(r, dev)

    def fresh(self, sid: int, p: TensorPlan, dt: DType, dev: str) -> Tensor:
        """A new tensor that is all of its storage, filled, and that storage kept."""
        filler = self.filler
        assert filler is not None
        r: Tensor = self.torch.empty_strided(p.size, p.stride, dtype=dt, device=dev)
        if filler.mode == "zeros":
            r.zero_()
        elif dt in filler.normal:
            r.normal_(generator=filler.gen(dev))
        else:
            filler.fill(r, dev)
        self.storages[sid] = r.untyped_storage()
        return r

    def whole(self, p: TensorPlan) -> Tensor | None:
        """The common case made fast: a tensor that is its whole storage, filled in place."""
        sid = p.storage
        if sid is None or self.filler is None or not self.fresh_storage(p, sid):
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

    def fresh_storage(self, p: TensorPlan, sid: int) -> bool:
        """Whether the tensor is all of storage SID, one not made, given or freed yet."""
        if p.offset or sid in self.storages or sid in self.given or sid in self.g.zero:
            return False
        nbytes = self.g.storages.get(sid)
        numel = 1
        for d in p.size:
            numel *= d  # type: ignore[assignment]
        return bool(nbytes) and nbytes == p.extent() == numel * (itemsize(p.dtype) or 1)

    def storage_for(self, p: TensorPlan) -> UntypedStorage:
        q = dataclasses.replace(p, storage=None)
        return self.storage(q)

    def finish(self, p: TensorPlan, r: Tensor) -> Tensor:
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

    def can_grad(self, p: TensorPlan, r: Tensor) -> bool:
        """Whether r requires grad as logged (the note says why not, when the log says so)."""
        why = grad_refused(p, r.dtype)
        if why is not None:
            self.note(p.id, why)
        return p.requires_grad and why is None

    def bits(self, p: TensorPlan, r: Tensor) -> None:
        torch = self.torch
        if p.conj and not r.is_conj():
            if r.dtype.is_complex:
                torch._C._set_conj(r, True)
            else:
                self.note(p.id, "conj bit on a real dtype: left off")
        if p.neg and not r.is_neg():
            torch._C._set_neg(r, True)

    def view(self, p: TensorPlan) -> Tensor:
        torch = self.torch
        assert p.base is not None
        base = self.get(p.base)
        if base is None:
            self.note(p.id, f"its base was not rebuilt ({self.errors.get(p.base)}): not a view")
            return self.plain(p)
        if not p.concrete() or p.stride is None:
            raise Failed("sizes are not concrete")
        dt = torch_dtype(p.dtype)
        try:
            r = _strided(torch, _as_dtype(torch, base, dt), p)
        except Exception as e:
            self.note(p.id, f"not rebuilt as a view of its base ({first_line(e)})")
            return self.plain(p)
        if p.creation_meta:
            cm = torch_creation_meta(torch, p.creation_meta)
            if cm is not None:
                with contextlib.suppress(Exception):
                    torch._C._autograd._set_creation_meta(r, cm)
        if p.param:
            self.note(p.id, "a Parameter that is a view: rebuilt as a Parameter, not a view")
            r = torch.nn.Parameter(r.detach(), requires_grad=self.can_grad(p, r))
        self.bits(p, r)
        return r

    def sparse(self, p: TensorPlan) -> Tensor:
        """A sparse (COO, compressed) or mkldnn tensor, from its parts where the log has them."""
        torch = self.torch
        if not p.concrete():
            raise Failed("sizes are not concrete")
        dt = torch_dtype(p.dtype)
        dev, why = self.devices.map(p.device)
        if why:
            self.note(p.id, why)
        note: str | None
        if p.mkldnn:
            r, note = layouts.mkldnn(torch, p, dt, dev, lambda t: self.fill(t, dev))
        elif p.layout == "sparse_coo" or p.sparse:
            r, note = layouts.coo(torch, p, dt, dev)
        elif p.layout in layouts.COMPRESSED and None in (p.compressed, p.plain, p.values):
            r, note = layouts.empty_compressed(torch, p, dt, dev)  # a damaged log's
        elif p.layout in layouts.COMPRESSED:
            write = self.valid_offsets and self.filler is not None and self.filler.mode != "meta"
            r, note = layouts.compressed(torch, p, self.compressed_parts(p), write)
        else:
            raise Failed(f"layout {p.layout} cannot be rebuilt from the log")
        if note:
            self.note(p.id, note)
        if p.requires_grad:
            r.requires_grad_(True)
        return r

    def compressed_parts(self, p: TensorPlan) -> tuple[Tensor, Tensor, Tensor]:
        """A compressed sparse tensor's indices and values, rebuilt."""
        parts = []
        for what, tid in (("indices", p.compressed), ("indices", p.plain), ("values", p.values)):
            part = self.get(tid) if tid is not None else None
            if part is None:
                why = self.errors.get(tid) if tid is not None else "not logged"
                raise Failed(f"{p.layout}: its {what} were not rebuilt ({why})")
            parts.append(part)
        return parts[0], parts[1], parts[2]

    def fill(self, t: Tensor, dev: str) -> None:
        if self.filler is None or self.filler.mode == "zeros":
            t.zero_()
        elif self.filler.mode != "meta":
            self.filler.fill(t, dev)

    def unwrap(self, p: TensorPlan) -> Tensor:
        """A functorch or functional wrapper outside the transform that made it: the tensor the
        graph took, from the rebuilt tensor it wraps (vmap's: one example of the batch)."""
        torch = self.torch
        assert p.unwrapped is not None
        inner = self.get(p.unwrapped)
        if inner is None:
            raise Failed(f"the tensor it wraps was not rebuilt: {self.errors.get(p.unwrapped)}")
        at = f" at level {p.level}" if p.level is not None else ""
        with torch.no_grad():
            if p.batched and p.bdim is not None and 0 <= p.bdim < inner.dim():
                r = inner.select(p.bdim, 0)
                what = (
                    f"vmap's BatchedTensor{at} over dim {p.bdim} of a {list(inner.shape)} "
                    "tensor: rebuilt outside vmap as the batch's first example, a view of it"
                )
            else:
                r = inner.view_as(inner) if inner.layout == torch.strided else inner
                kind = "GradTrackingTensor" if p.functorch else "functional tensor"
                what = f"a {kind}{at}: rebuilt outside its transform as the tensor it wraps"
        if p.concrete() and list(r.shape) != p.size:
            raise Failed(f"it wraps a {list(inner.shape)} tensor, which does not give its size")
        self.note(p.id, what)
        if self.can_grad(p, r) and not r.requires_grad:
            r.requires_grad_(True)
        return r

    def subclass(self, p: TensorPlan) -> Tensor:
        if p.type_name == NJT:
            return self.njt(p)
        if p.dtensor is not None:
            return self.dtensor(p)
        cls, why = resolve_type(p.type_name, self.opts.allow_import)
        if cls is None:
            raise _StandIn(f"subclass not rebuilt: {why}")
        if not hasattr(cls, "__tensor_unflatten__"):
            raise _StandIn(f"{p.type_name} has no __tensor_unflatten__")
        inner = self.inner(p)
        ctx, ok = logged_literal(p.ctx)
        if not ok:
            raise _StandIn(f"subclass not rebuilt: its flatten context {p.ctx!r} is only a repr")
        if not p.concrete() or p.stride is None:
            raise _StandIn("subclass not rebuilt: its outer sizes are not concrete")
        try:
            # A traceable wrapper subclass's (hasattr above): no stub of torch.Tensor has it.
            r = cls.__tensor_unflatten__(inner, ctx, tuple(p.size), tuple(p.stride))  # type: ignore[attr-defined]
        except Exception as e:
            raise _StandIn(f"{p.type_name}.__tensor_unflatten__ failed: {first_line(e)}") from e
        if p.view:
            self.note(p.id, "a view of another tensor: rebuilt from its inner tensors, not a view")
        return self.finish_subclass(p, r)

    def dtensor(self, p: TensorPlan) -> Tensor:
        """A DTensor over its local tensor, on a mesh of the logged shape (`mesh.rebuilt_mesh`)."""
        plan = p.dtensor or {}
        if "error" in plan:
            raise _StandIn(f"DTensor not rebuilt: {plan['error']}")
        from torch.distributed.tensor import DTensor

        inner = self.inner(p)
        local = inner.get("_local_tensor")
        if local is None:
            raise _StandIn("DTensor not rebuilt: it has no _local_tensor")
        dev = str(plan["device"]).split(":")[0]  # the mesh's, whatever the tensors are on
        if dev == "meta" or not self.devices.available(dev):
            dev = "cpu"
        try:
            device_mesh, note = mesh.rebuilt_mesh(self.torch, plan, dev)
            ctx = mesh.flatten_context(self.torch, plan, local.dtype)
            r = DTensor.__tensor_unflatten__(
                {"_local_tensor": local, "device_mesh": device_mesh},
                ctx,
                self.torch.Size(plan["shape"]),
                tuple(plan["stride"]),
            )
        except Exception as e:
            raise _StandIn(f"DTensor not rebuilt: {type(e).__name__}: {first_line(e)}") from e
        if note:
            self.note(p.id, note)
        return self.finish_subclass(p, r)

    def inner(self, p: TensorPlan) -> dict[str, Tensor]:
        inner: dict[str, Tensor] = {}
        for name, iid in p.attrs.items():
            t = self.get(iid)
            if t is None:
                raise _StandIn(f"inner tensor {name} not rebuilt: {self.errors.get(iid)}")
            inner[name] = t
        return inner

    def finish_subclass(self, p: TensorPlan, r: Tensor) -> Tensor:
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

    def njt(self, p: TensorPlan) -> Tensor:
        """A jagged nested tensor from its values and valid offsets (min/max seqlen kept)."""
        from torch.nested._internal import nested_tensor as nt

        got, ok = logged_literal(p.ctx)
        ctx = got if ok and isinstance(got, dict) else None
        ragged = ctx.get("ragged_idx", 1) if ctx is not None else 1
        if not isinstance(ragged, int) or ragged < 1:
            ragged = 1
        inner = self.inner(p)
        values, offsets = inner.get("_values"), inner.get("_offsets")
        if values is None or offsets is None:
            raise _StandIn("jagged tensor without _values or _offsets")
        lengths = inner.get("_lengths")
        min_len, max_len = _seqlens(inner, ctx)
        if self.valid_offsets and self.opts.mode != "meta":
            why = write_offsets(
                self.torch, offsets, lengths, values.shape[ragged - 1], min_len, max_len
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


def _as_dtype(torch: ModuleType, base: Tensor, dt: DType) -> Tensor:
    """BASE seen as dtype DT, as a view of another dtype is (real and complex too)."""
    with torch.no_grad():
        if base.dtype != dt:
            if base.dtype.is_complex and not dt.is_complex:
                base = torch.view_as_real(base)
            elif dt.is_complex and not base.dtype.is_complex:
                base = torch.view_as_complex(base)
            if base.dtype != dt:
                base = base.view(dt)
    return base


def _strided(torch: ModuleType, base: Tensor, p: TensorPlan) -> Tensor:
    """The view of BASE at the plan's size, stride and offset, with the autograd state logged:
    a leaf that requires grad, or a non-leaf of a base that does (or of one made to). Its
    sizes and strides are concrete (the caller checked): ints, never nested ints."""
    if p.leaf or not p.requires_grad:
        with torch.no_grad():
            r = base.as_strided(p.size, p.stride, p.offset)  # type: ignore[arg-type]
        if p.requires_grad:
            r.requires_grad_(True)
        return r
    if not base.requires_grad:
        with torch.no_grad():
            base = base.view(base.shape)
        base.requires_grad_(True)
    with torch.enable_grad():
        return base.as_strided(p.size, p.stride, p.offset)  # type: ignore[arg-type]


def _seqlens(inner: dict[str, Tensor], ctx: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """A jagged tensor's min and max sequence lengths: its inner tensors' sizes, else (torch
    2.4) its context's metadata cache."""
    mn, mx = inner.get("_min_seqlen_tensor"), inner.get("_max_seqlen_tensor")
    min_len = mn.shape[0] if mn is not None else None
    max_len = mx.shape[0] if mx is not None else None
    cache = ctx.get("metadata_cache") if ctx is not None else None
    if isinstance(cache, dict):  # torch 2.4 logs them in the ctx, not as inner tensors
        got = cache.get("min_seqlen")
        min_len = got if min_len is None and type(got) is int else min_len
        got = cache.get("max_seqlen")
        max_len = got if max_len is None and type(got) is int else max_len
    return min_len, max_len


def build_real(compile: Compile, opts: RebuildOptions) -> Rebuilt:
    """Real (random, zeros) or meta tensors for every input of a compile, aliasing kept."""
    mode = opts.mode
    if mode not in MODES:
        raise TlviewError(f"mode {mode!r}: expected one of {', '.join(MODES)}", EXIT_USAGE)
    torch = need_torch()
    _symbols, groups = plans_for(compile)
    if mode != "meta":
        need = real_bytes(groups)
        if need > opts.max_bytes:
            raise TlviewError(
                f"compile {compile.key} of {compile.log}: its inputs need {nbytes(need)} of "
                f"memory, over --max-bytes {nbytes(opts.max_bytes)}; use --mode meta or raise "
                "--max-bytes",
                EXIT_REFUSED,
            )
    devices = Devices(torch, opts.device, mode)
    filler = Filler(torch, mode, opts.seed)
    out = Rebuilt({}, {}, {}, groups)
    described = {src for g in groups for _name, _tid, src in g.sources}
    values = tensor_values(compile, described)
    for g in groups:
        b = RealBuilder(g, opts, filler=filler, devices=devices)
        b.build_all()
        if values:
            out.logged.update(_fill_logged(b, values))
        collect(out, g, b.memo, b.notes, b.errors)
        out.storages.update(((g.describer, key), st) for key, st in b.storages.items())
    out.logged.update(scalar_values(compile, described))
    return out


def _fill_logged(b: RealBuilder, values: Mapping[str, Logged]) -> dict[str, Logged]:
    """Give each tensor the log holds a value for that value (not in meta mode), with a note:
    source name -> the value, of each."""
    got: dict[str, Logged] = {}
    for name, tid, src in b.g.sources:
        v, t = values.get(src), b.memo.get(tid)
        if v is None or t is None:
            continue
        got[name] = v
        if b.opts.mode == "meta":
            continue
        if t.numel() != 1:
            b.note(tid, f"the log recorded {v.words()}, for a tensor of {t.numel()} values")
            continue
        with b.torch.no_grad():
            t.fill_(v.value)
        b.note(tid, f"its value is as logged: {v.words()}")
    return got
