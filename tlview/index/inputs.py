"""Turn a compile's describe records into its inputs: one per tensor, every source, alias groups."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tlview.model import Compile, Dim, Input, InputSet, StorageDesc, TensorDesc
from tlview.reprs import as_id

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# Fields that link one described tensor to another in the same describer.
LINK_FIELDS = (
    "base",
    "grad",
    "unwrapped",
    "values",
    "crow_indices",
    "col_indices",
    "ccol_indices",
    "row_indices",
)
_DIMS = ("size", "stride")


def _dim_list(v: object) -> bool:
    return isinstance(v, list) and all(
        (isinstance(x, int) and not isinstance(x, bool)) or isinstance(x, str) for x in v
    )


# The type each checked field has in a well-formed record, for `_well_formed`.
_TYPES: dict[str, type] = {
    **dict.fromkeys(_DIMS, list),
    **dict.fromkeys(("dtype", "device", "layout", "type"), str),
    **dict.fromkeys(("storage", "ndim", *LINK_FIELDS), int),
    "storage_offset": int,
    "attrs": dict,
}


def _well_formed(b: dict[str, Any]) -> bool:
    """True when `check_tensor` finds nothing, decided in one pass (nearly every record);
    False only means it has to look."""
    for name, v in b.items():
        want = _TYPES.get(name)
        if want is None:
            ok = type(v) is bool or not (name.startswith("is_") or name == "requires_grad")
        else:
            ok = type(v) is want and _parts_fit(v)
        if not ok:
            return False
    return True


def _parts_fit(v: object) -> bool:
    """A list of dims holds ints and expressions; `attrs` holds tensor ids."""
    if type(v) is list:
        return all(type(x) is int or type(x) is str for x in v)
    if type(v) is dict:
        return all(type(x) is int for x in v.values())
    return True


def check_tensor(b: dict[str, Any]) -> str | None:
    """The first field of a describe_tensor that has the wrong type, said plainly."""
    if _well_formed(b):
        return None
    for check in _CHECKS:
        problem = check(b)
        if problem is not None:
            return f"tensor {b.get('id')}: {problem}"
    return None


def _is_id(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _wrong_dims(b: dict[str, Any]) -> str | None:
    bad = next((n for n in _DIMS if n in b and not _dim_list(b[n])), None)
    return None if bad is None else f"{bad} is not a list of ints or expressions"


def _wrong_names(b: dict[str, Any]) -> str | None:
    bad = next(
        (n for n in ("dtype", "device", "layout") if n in b and not isinstance(b[n], str)), None
    )
    return None if bad is None else f"{bad} is not a string"


def _wrong_offset(b: dict[str, Any]) -> str | None:
    off = b.get("storage_offset", 0)
    if _is_id(off) or isinstance(off, str):
        return None
    return "storage_offset is not an int or expression"


def _wrong_ids(b: dict[str, Any]) -> str | None:
    for name in ("storage", "ndim", *LINK_FIELDS):
        v = b.get(name)
        if (v is not None or name == "ndim" and name in b) and not _is_id(v):
            return f"{name} is not an integer id"
    return None


def _wrong_attrs(b: dict[str, Any]) -> str | None:
    attrs = b.get("attrs", {})
    if isinstance(attrs, dict) and all(_is_id(i) for i in attrs.values()):
        return None
    return "attrs is not an object of tensor ids"


def _wrong_type(b: dict[str, Any]) -> str | None:
    return "type is not a string" if "type" in b and not isinstance(b["type"], str) else None


def _wrong_flags(b: dict[str, Any]) -> str | None:
    for name, v in b.items():
        if (name.startswith("is_") or name == "requires_grad") and not isinstance(v, bool):
            return f"{name} is not true or false: {v!r:.40}"
    return None


# In the order they are told: the first that fails is the record's bad line.
_CHECKS: tuple[Callable[[dict[str, Any]], str | None], ...] = (
    _wrong_dims,
    _wrong_names,
    _wrong_offset,
    _wrong_ids,
    _wrong_attrs,
    _wrong_type,
    _wrong_flags,
)


def compact(b: dict[str, Any], intern: Callable[[str], str]) -> dict[str, Any]:
    """The record's fields with object addresses removed, so repeated reprs share one string."""
    out: dict[str, Any] = {}
    for k, v in b.items():
        if type(v) is str:
            v = intern(_ADDRESS.sub("", v)) if " at 0x" in v else intern(v)
        elif k == "describer_id":
            continue
        out[k] = v
    return out


LINKING = frozenset((*LINK_FIELDS, "attrs"))  # fields that name another tensor


def links(t: TensorDesc) -> list[int]:
    """Ids of the tensors this one names: its base, grad, sparse parts."""
    return [
        v
        for name in LINK_FIELDS
        if isinstance(v := t.fields.get(name), int) and not isinstance(v, bool)
    ]


def _referenced(tensors: dict[int, TensorDesc]) -> set[int]:
    refs: set[int] = set()
    for t in tensors.values():
        if LINKING.isdisjoint(t.fields):
            continue  # most tensors name no other tensor
        refs.update(links(t))
        refs.update(t.attrs.values())
    return refs


# Fields that can make a tensor need a note; most tensors have none of them.
_NOTED = frozenset(
    {
        "is_sparse",
        "is_functorch_wrapped",
        "is_batchedtensor",
        "is_gradtrackingtensor",
        "is_functional",
    }
)


def _notes(t: TensorDesc, storage: StorageDesc | None) -> list[str]:
    if storage is not None and storage.size != 0 and _NOTED.isdisjoint(t.fields):
        return []  # the common case, decided without looking further
    notes = []
    if t.flag("is_sparse"):
        notes.append("sparse: the log has no indices, values or nnz")
    if any(
        t.flag(f) for f in ("is_functorch_wrapped", "is_batchedtensor", "is_gradtrackingtensor")
    ):
        notes.append(functorch_note(t))
    if t.flag("is_functional"):
        notes.append("functional tensor: logged without its wrapper state")
    if t.storage is not None and storage is None:
        notes.append(f"storage {t.storage} was never described")
    if storage is not None and storage.size == 0 and _all_nonzero(t.size):
        notes.append("storage of 0 bytes under a non-empty tensor (resized to zero, as FSDP does)")
    return notes


def _all_nonzero(size: list[Dim] | None) -> bool:
    """A shape of known sizes, none of them 0 (and at least one dim)."""
    return bool(size) and all(isinstance(d, int) and d for d in size or [])


def functorch_note(t: TensorDesc) -> str:
    """What a functorch wrapper is, as logged: vmap's BatchedTensor or grad's GradTrackingTensor,
    its level and the tensor it wraps."""
    f = t.fields
    inner = f.get("unwrapped")
    level = f.get("level")
    of = f" of tensor {inner}" if as_id(inner) is not None else ""
    at = f" at level {level}" if isinstance(level, int | str) else ""
    if t.flag("is_batchedtensor"):
        bdim = f.get("bdim")
        dim = f", batch dim {bdim}" if as_id(bdim) is not None else ""
        return f"vmap's BatchedTensor{at}{dim}{of}: the graph took one example of the batch"
    if t.flag("is_gradtrackingtensor"):
        return f"torch.func's GradTrackingTensor{at}{of}"
    return "a functorch wrapper" + of


def storages_reached(t: TensorDesc, tensors: dict[int, TensorDesc], describer: int) -> list[str]:
    """The storage keys a tensor reaches: its own, and its inner tensors' (a subclass's,
    a functorch wrapper's, a sparse tensor's parts), so sharing through them is sharing."""
    out: list[str] = []
    seen: set[int] = set()
    todo = [t]
    while todo:
        cur = todo.pop()
        if cur.id in seen:
            continue
        seen.add(cur.id)
        sid = cur.storage
        if sid is not None:
            key = f"{describer}:{sid}"
            if key not in out:
                out.append(key)
        f = cur.fields
        if LINKING.isdisjoint(f):
            continue
        inner = [v for k in LINK_FIELDS if k not in ("base", "grad") and (v := as_id(f.get(k)))]
        inner += list(cur.attrs.values())
        todo.extend(tensors[i] for i in reversed(inner) if i in tensors)
    return out


def resolve(c: Compile) -> list[Input]:
    """The inputs of a compile: described tensors named by a source, plus unnamed top-level ones."""
    out: list[Input] = []
    for s in c.input_sets:
        out.extend(_input(s, tid, srcs) for tid, srcs in _named(s).items())
        if s.dropped:
            c.events_dropped += s.dropped
    _alias_groups(out, c)
    return out


def _named(s: InputSet) -> dict[int, list[str]]:
    """Each input tensor of a set with its sources, in order; then the unnamed top-level ones
    (tensors no other tensor of the set names)."""
    named: dict[int, list[str]] = {}
    for tid, src in s.sources:
        srcs = named.setdefault(tid, [])
        if src not in srcs:
            srcs.append(src)
    refs = _referenced(s.tensors)
    for tid in s.tensors:
        if tid not in named and tid not in refs:
            named[tid] = []
    return named


def _input(s: InputSet, tid: int, srcs: list[str]) -> Input:
    """One input of a set: its tensor, storage, base, grad and inner tensors, and notes."""
    by_id = s.tensors
    t = by_id.get(tid)
    notes: list[str] = []
    if t is None:
        t = TensorDesc(tid, {})
        notes.append(f"tensor {tid} was named by a source but never described")
    f = t.fields
    sid, base, grad = as_id(f.get("storage")), as_id(f.get("base")), as_id(f.get("grad"))
    st = s.storages.get(sid) if sid is not None else None
    inp = Input(
        tensor=t,
        sources=srcs,
        storage=st,
        storage_key=None if sid is None else f"{s.describer}:{sid}",
        describer=s.describer,
        base=by_id.get(base) if base is not None else None,
        grad=by_id.get(grad) if grad is not None else None,
        inner={k: by_id[i] for k, i in t.attrs.items() if i in by_id} if "attrs" in f else {},
        superseded=s.superseded,
        notes=notes + _notes(t, st),
    )
    if not srcs:
        inp.notes.append("no source was logged for this tensor")
    return inp


def _alias_groups(out: list[Input], c: Compile) -> None:
    """Inputs that reach one storage (themselves or through inner tensors) share a group."""
    reach: list[list[str]] = []
    sets = {s.describer: s for s in c.input_sets}
    for inp in out:
        t = inp.tensor
        if LINKING.isdisjoint(t.fields) or inp.describer not in sets:
            reach.append([inp.storage_key] if inp.storage_key is not None else [])
        else:
            reach.append(storages_reached(t, sets[inp.describer].tensors, inp.describer))
    counts: dict[str, int] = {}
    for keys in reach:
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    if not any(n > 1 for n in counts.values()):
        return
    # Union of the inputs through every storage two of them reach, in input order.
    first: dict[str, int] = {}
    parent = list(range(len(out)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, keys in enumerate(reach):
        for k in keys:
            if counts[k] > 1:
                j = first.setdefault(k, i)
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, int] = {}
    for i, keys in enumerate(reach):
        if any(counts[k] > 1 for k in keys):
            out[i].alias_group = groups.setdefault(root(i), len(groups) + 1)
