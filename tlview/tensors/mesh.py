"""DTensors: their mesh and placements read from the reprs torch logs of them (with `ast`, never
run), and the one-process world they are rebuilt on: a world of one rank for a mesh of one,
torch's fake process group for a larger mesh, or the process group this process already has."""

from __future__ import annotations

import ast
import functools
import re
from typing import TYPE_CHECKING, Any

from tlview.units import MAX_DIGITS, number

if TYPE_CHECKING:
    from types import ModuleType
    from typing import TypedDict

    from torch import dtype as DType
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor._dtensor_spec import ShardOrderEntry, TensorMeta
    from torch.distributed.tensor.placement_types import Placement

    # A placement as plain data: ["Shard", 0], ["Replicate"], ["Partial", "sum"],
    # ["_StridedShard", 0, 2] (dim, then split factor).
    PlacementPlan = list[str | int]
    OrderPlan = list[int | list[int]]  # a shard order entry: [tensor dim, [mesh dims]]

    class DTensorPlan(TypedDict, total=False):
        """What rebuilds a DTensor, as plain data (`dtensor_plan`): every key but `error`; or
        `error` alone, why the log's text does not say it (`plans.TensorPlan.dtensor`)."""

        error: str
        mesh: list[int]
        device: str
        names: list[str] | None
        contiguous: bool
        placements: list[PlacementPlan]
        order: list[OrderPlan] | None
        shape: list[int]
        stride: list[int]
        requires_grad: bool
        rank: int
        rank_logged: int | None

    # DTensor's `__tensor_flatten__` context: placements, TensorMeta, [shard order,] grad.
    FlattenContext = (
        tuple[tuple[Placement, ...], TensorMeta, bool]
        | tuple[tuple[Placement, ...], TensorMeta, tuple[ShardOrderEntry, ...] | None, bool]
    )

DTENSOR = "torch.distributed.tensor.DTensor"
_DTENSOR_TYPES = {
    DTENSOR,
    "torch.distributed._tensor.api.DTensor",
    "torch.distributed.tensor._api.DTensor",
}
# `DeviceMesh((2,), 'cpu', stride=(1,))`, `DeviceMesh((dp=2, tp=4), 'cuda', stride=(4, 1))`
_MESH = re.compile(
    r"DeviceMesh\(\((?P<dims>[^)]*)\), '(?P<device>[\w:]+)'(?:, stride=(?P<stride>.*))?\)"
)
_MESH_DIM = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*)=)?(?P<size>[0-9]+)\s*")
_PLACEMENTS = {"Shard", "Replicate", "Partial", "_StridedShard"}


MAX_MESH_RANKS = 1 << 16  # ranks of a mesh (its dims' product) a DTensor is rebuilt on
MESH_BYTES_PER_RANK = 8  # the mesh's int64 tensor of ranks: counted by --max-bytes


def mesh_ranks(shape: list[int]) -> int:
    """The ranks of a mesh of SHAPE, or MAX_MESH_RANKS + 1 once past it (never a huge int)."""
    size = 1
    for k in shape:
        size *= max(k, 0)
        if size > MAX_MESH_RANKS:
            return MAX_MESH_RANKS + 1
    return size


def is_dtensor(type_name: str | None) -> bool:
    return type_name in _DTENSOR_TYPES


def dtensor_plan(ctx: str | None, mesh: str | None, rank: int | None) -> DTensorPlan | str:
    """What rebuilds a DTensor, as plain data (it is saved beside emitted tensors): its mesh's
    shape, device and dim names, its placements, shard order, outer shape and stride and
    requires_grad; or why the log's text does not say it."""
    if not isinstance(mesh, str):
        return "its device mesh is not logged"
    m = _MESH.fullmatch(mesh.strip())
    if m is None:
        return f"its device mesh {mesh[:80]!r} is not a mesh repr tlview reads"
    dims = _mesh_dims(mesh, m.group("dims"))
    if isinstance(dims, str):
        return dims
    shape, names = dims
    got = _flatten_context(ctx, len(shape))
    if isinstance(got, str):
        return got
    placements, meta, order, grad = got
    size = mesh_ranks(shape)
    if size > MAX_MESH_RANKS:
        return (
            f"its device mesh {mesh[:80]!r} has over {MAX_MESH_RANKS:,} ranks, the largest world "
            "tlview rebuilds a DTensor on"
        )
    return {
        "mesh": shape,
        "device": m.group("device"),
        "names": names or None,
        "contiguous": _contiguous(m.group("stride"), shape),
        "placements": placements,
        "order": order,
        "shape": meta[0],
        "stride": meta[1],
        "requires_grad": grad,
        "rank": rank if rank is not None and 0 <= rank < size else 0,
        "rank_logged": rank,
    }


def _mesh_dims(mesh: str, text: str) -> tuple[list[int], list[str]] | str:
    """A mesh repr's dims: their sizes and names (every dim named, or none); or why not."""
    shape: list[int] = []
    names: list[str] = []
    for part in text.split(","):
        if not part.strip():
            continue
        d = _MESH_DIM.fullmatch(part)
        if d is None:
            return f"its device mesh {mesh[:80]!r} has a dim tlview does not read"
        size = number(d.group("size"))
        if size is None:
            return f"its device mesh {mesh[:80]!r} has a dim of over {MAX_DIGITS} digits"
        shape.append(size)
        if d.group("name"):
            names.append(d.group("name"))
    if not shape or (names and len(names) != len(shape)):
        return f"its device mesh {mesh[:80]!r} has no shape"
    return shape, names


def _flatten_context(
    ctx: str | None, ndim: int
) -> tuple[list[PlacementPlan], tuple[list[int], list[int]], list[OrderPlan] | None, bool] | str:
    """A DTensor's flatten context, `(placements, meta, [order,] requires_grad)`, read for a
    mesh of NDIM dims; or why not."""
    if not isinstance(ctx, str) or len(ctx) > 10_000:
        return "its placements are not logged"
    try:
        tree = ast.parse(ctx.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"its flatten context {ctx[:80]!r} does not parse"
    if not isinstance(tree, ast.Tuple) or len(tree.elts) not in (3, 4):
        return f"its flatten context {ctx[:80]!r} is not (placements, meta, [order,] grad)"
    try:
        placements = [_placement(e) for e in _items(tree.elts[0])]
        meta = _tensor_meta(tree.elts[1])
        order = [_order(e) for e in _items(tree.elts[2])] if len(tree.elts) == 4 else None
        grad = _literal(tree.elts[-1])
    except _Unread as e:
        return f"its flatten context {ctx[:80]!r}: {e}"
    if len(placements) != ndim or not isinstance(grad, bool):
        return f"its flatten context {ctx[:80]!r} does not fit a mesh of {ndim} dims"
    return placements, meta, order, grad


class _Unread(Exception):
    pass


def _items(n: ast.expr) -> list[ast.expr]:
    if not isinstance(n, ast.Tuple | ast.List):
        raise _Unread("expected a tuple")
    return list(n.elts)


def _literal(n: ast.expr) -> Any:
    try:
        return ast.literal_eval(n)
    except (ValueError, TypeError, SyntaxError, RecursionError) as e:
        raise _Unread(f"expected a value, not {ast.dump(n)[:40]}") from e


def _call(n: ast.expr) -> tuple[str, list[ast.expr], dict[str, ast.expr]]:
    if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Name):
        raise _Unread("expected a placement")
    return n.func.id, list(n.args), {k.arg: k.value for k in n.keywords if k.arg}


def _placement(n: ast.expr) -> PlacementPlan:
    """`Shard(dim=0)` -> ["Shard", 0]; `Replicate()`; `Partial(sum)` -> ["Partial", "sum"];
    `_StridedShard(dim=0, sf=2)` -> ["_StridedShard", 0, 2]."""
    name, args, kw = _call(n)
    if name not in _PLACEMENTS:
        raise _Unread(f"placement {name} is not one tlview rebuilds")
    if name == "Replicate":
        return ["Replicate"]
    if name == "Partial":
        op = args[0] if args else kw.get("reduce_op")
        text = op.id if isinstance(op, ast.Name) else _literal(op) if op is not None else "sum"
        return ["Partial", str(text)]
    dim = _literal(kw["dim"] if "dim" in kw else args[0]) if (args or "dim" in kw) else None
    if type(dim) is not int:
        raise _Unread(f"{name} without a dim")
    if name == "Shard":
        return ["Shard", dim]
    return ["_StridedShard", dim, _split_factor(args, kw)]


def _split_factor(args: list[ast.expr], kw: dict[str, ast.expr]) -> int:
    """A `_StridedShard`'s split factor: `sf=`, `split_factor=` or its second argument."""
    got = kw.get("sf") or kw.get("split_factor") or (args[1] if len(args) > 1 else None)
    sf = _literal(got) if got is not None else None
    if type(sf) is not int:
        raise _Unread("_StridedShard without a split factor")
    return sf


def _tensor_meta(n: ast.expr) -> tuple[list[int], list[int]]:
    """`TensorMeta(shape=torch.Size([16, 8]), stride=(8, 1), dtype=torch.float32)`."""
    if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Name):
        raise _Unread("expected TensorMeta(...)")
    kw = {k.arg: k.value for k in n.keywords if k.arg}
    shape = kw.get("shape")
    if isinstance(shape, ast.Call) and len(shape.args) == 1:  # torch.Size([16, 8])
        shape = shape.args[0]
    dims, steps = _literal(shape) if shape is not None else None, None
    if "stride" in kw:
        steps = _literal(kw["stride"])
    if not _ints(dims) or not _ints(steps):
        raise _Unread("its TensorMeta has no concrete shape and stride")
    return list(dims or ()), list(steps or ())


def _order(n: ast.expr) -> OrderPlan:
    """`ShardOrderEntry(tensor_dim=0, mesh_dims=(0,))` -> [0, [0]]."""
    name, args, kw = _call(n)
    if name != "ShardOrderEntry":
        raise _Unread(f"expected ShardOrderEntry, not {name}")
    dim = _literal(kw.get("tensor_dim") or args[0])
    dims = _literal(kw.get("mesh_dims") or args[1])
    if type(dim) is not int or not _ints(dims):
        raise _Unread("a shard order entry without dims")
    return [dim, list(dims)]


def _ints(v: object) -> bool:
    return isinstance(v, list | tuple) and all(type(x) is int for x in v)


def _contiguous(stride: str | None, shape: list[int]) -> bool:
    """Whether the mesh's ranks are the whole world in order (else it was a slice of one)."""
    if stride is None:
        return True
    try:
        got = ast.literal_eval(stride.strip())
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return True
    got = got if isinstance(got, tuple) else (got,)
    want: list[int] = []
    step = 1
    for d in reversed(shape):
        want.insert(0, step)
        step *= d
    flat = [g if type(g) is int else (want[i] if g == () else None) for i, g in enumerate(got)]
    return flat == want


# -- built with torch ------------------------------------------------------------------------


def rebuilt_mesh(
    torch: ModuleType, plan: DTensorPlan, device: str
) -> tuple[DeviceMesh, str | None]:
    """The DeviceMesh a DTensor of this plan is rebuilt on, and what to note about its world:
    this process's process group when it has one of the mesh's size, else one made here (a
    world of one rank for a mesh of one, torch's fake process group for a larger mesh)."""
    dist = torch.distributed
    shape = tuple(plan["mesh"])
    n = 1
    for d in shape:
        n *= d
    rank = int(plan.get("rank") or 0) if n > 1 else 0
    if not dist.is_available():
        raise RuntimeError("this torch has no torch.distributed")
    _world(dist, n, rank)
    note = None
    if dist.get_backend() == "fake":
        logged = plan.get("rank_logged")
        was = f" (the log's rank {logged} is not in it)" if logged not in (None, rank) else ""
        note = (
            f"on torch's fake process group of {n} ranks, as rank {dist.get_rank()}{was}: its "
            "collectives move no data, so values differ from the job's"
        )
    if not plan.get("contiguous", True):
        extra = "its mesh was a slice of a larger world: rebuilt as a world of its own"
        note = f"{note}; {extra}" if note else extra
    names = tuple(plan.get("names") or ())
    return _mesh(device, shape, names, id(dist.distributed_c10d._get_default_group())), note


def _world(dist: ModuleType, n: int, rank: int) -> None:
    """A process group of N ranks, this process as RANK: the one it has, or one made here (a
    world of one rank for N = 1, torch's fake process group for more); one tlview made for
    another mesh is made again."""
    global _MADE
    if dist.is_initialized() and _MADE is not None and (n, rank) != _MADE:
        dist.destroy_process_group()
        _MADE = None
    if dist.is_initialized():
        have = dist.get_world_size()
        if have != n:
            raise RuntimeError(
                f"this process's process group has {have} ranks and the DTensor's mesh {n}"
            )
    elif n == 1:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        _MADE = (n, rank)
    else:
        import torch.testing._internal.distributed.fake_pg as fake_pg

        dist.init_process_group("fake", store=fake_pg.FakeStore(), rank=rank, world_size=n)
        _MADE = (n, rank)


_MADE: tuple[int, int] | None = None  # (ranks, rank) of the process group tlview made here


@functools.cache
def _mesh(device: str, shape: tuple[int, ...], names: tuple[str, ...], _world: int) -> DeviceMesh:
    """One DeviceMesh per shape and world in a process: each makes process groups for its
    dims."""
    import torch
    from torch.distributed.device_mesh import DeviceMesh

    n = 1
    for d in shape:
        n *= d
    ranks = torch.arange(n).view(shape)
    return DeviceMesh(device, ranks, mesh_dim_names=names or None)


def placements(plan: DTensorPlan) -> tuple[Placement, ...]:
    """The placement objects of a plan's placements."""
    from torch.distributed.tensor import placement_types as pt

    out: list[Placement] = []
    for p in plan["placements"]:  # its kind, then that kind's ints or reduce op (`_placement`)
        kind = p[0]
        if kind == "Replicate":
            out.append(pt.Replicate())
        elif kind == "Shard":
            out.append(pt.Shard(p[1]))  # type: ignore[arg-type]
        elif kind == "Partial":
            out.append(pt.Partial(p[1]))  # type: ignore[arg-type]
        else:
            out.append(pt._StridedShard(p[1], split_factor=p[2]))  # type: ignore[arg-type]
    return tuple(out)


def flatten_context(torch: ModuleType, plan: DTensorPlan, dtype: DType) -> FlattenContext:
    """DTensor's `__tensor_flatten__` context for this torch: placements, TensorMeta, shard
    order (torch 2.10 and newer), requires_grad."""
    from torch.distributed.tensor._dtensor_spec import TensorMeta

    meta = TensorMeta(torch.Size(plan["shape"]), tuple(plan["stride"]), dtype)
    ps = placements(plan)
    try:
        from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
    except ImportError:  # an older torch: no shard order in the context
        return ps, meta, plan["requires_grad"]
    order = plan.get("order")
    if order is None or any(p[0] == "_StridedShard" for p in plan["placements"]):
        return ps, meta, None, plan["requires_grad"]  # the spec derives it
    entries = tuple(
        ShardOrderEntry(tensor_dim=d, mesh_dims=tuple(m))  # type: ignore[arg-type]  # [int, [int]]
        for d, m in order
    )
    return ps, meta, entries, plan["requires_grad"]
