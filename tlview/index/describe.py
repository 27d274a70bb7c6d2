"""Describe records: the tensors, storages and sources of each compile's input sets."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tlview.index import inputs as inputs_mod
from tlview.index.core import State
from tlview.index.kinds import count_kind, is_int, peek
from tlview.model import InputSet, StorageDesc, TensorDesc
from tlview.parse import Record

MAX_DESCRIBED = 100_000  # storages, tensors and sources kept per describer and compile (each)
KEEP_DESCRIBERS = 4  # describers whose tensors stay at hand for cross-compile references


def on_storage(ix: State, rec: Record) -> None:
    """describe_storage: a storage of a describer's tensors, with its size."""
    got = _described(ix, rec)
    if got is None:
        return
    b, d, i, s = got
    if len(s.storages) >= MAX_DESCRIBED and i not in s.storages:
        s.dropped += 1
        return
    size = b.get("size")
    if not (is_int(size) or isinstance(size, str) or size is None):
        ix.bad(rec, f"storage size is not a number or expression: {peek(size)}")
        size = None
    st = StorageDesc(i, size, rec.line)
    describer(ix.storages, d)[i] = st
    s.storages[i] = st


def on_tensor(ix: State, rec: Record) -> None:
    """describe_tensor: a tensor as its describer saw it (MetaTensorDesc)."""
    got = _described(ix, rec)
    if got is None:
        return
    b, d, i, s = got
    if len(s.tensors) >= MAX_DESCRIBED:
        s.dropped += 1
        return
    problem = inputs_mod.check_tensor(b)
    if problem:
        ix.bad(rec, problem)
    t = TensorDesc(i, inputs_mod.compact(b, ix.intern), rec.line)
    describer(ix.tensors, d)[i] = t
    s.tensors[i] = t
    borrow(ix, s, t)


def on_source(ix: State, rec: Record) -> None:
    """describe_source: the source (`L['x']`) a described tensor is the input of."""
    got = _described(ix, rec)
    if got is None:
        return
    b, d, i, s = got
    if len(s.sources) >= MAX_DESCRIBED:
        s.dropped += 1
        return
    src = b.get("source")
    if not isinstance(src, str):
        ix.bad(rec, "source is not a string")
        src = str(src)
    s.sources.append((i, src))
    if i not in s.tensors:
        known = ix.tensors.get(d, {}).get(i)
        if known is not None:
            s.tensors[i] = known
            borrow(ix, s, known)


def on_other_describe(ix: State, rec: Record) -> None:
    """A describe_ kind torch 2.13 does not write: counted as unknown, in its compile."""
    if _described(ix, rec) is not None:
        count_kind(ix.log.unknown_kinds, rec.kind)


def _described(ix: State, rec: Record) -> tuple[dict[str, Any], int, int, InputSet] | None:
    """A describe record's fields, describer id, id and input set (made at its first record);
    None, and a bad line, for a record without them."""
    c = ix.compile_of(rec)
    b = rec.body
    if not isinstance(b, dict):
        ix.bad(rec, "expected an object")
        return None
    d, i = b.get("describer_id"), b.get("id")
    if type(d) is not int or type(i) is not int:
        ix.bad(rec, "describer_id and id must be integers")
        return None
    for s in c.input_sets:
        if s.describer == d:
            return b, d, i, s
    s = InputSet(describer=d, where=ix.user_frame(rec.meta.get("stack"), rec))
    c.input_sets.append(s)
    return b, d, i, s


def describer(table: OrderedDict[int, dict[int, Any]], d: int) -> dict[int, Any]:
    got = table.get(d)
    if got is None:
        got = table[d] = {}
        while len(table) > KEEP_DESCRIBERS:
            table.popitem(last=False)
    else:
        table.move_to_end(d)
    return got


def borrow(ix: State, s: InputSet, t: TensorDesc) -> None:
    """Copy into a set the storage and linked tensors its tensor names from elsewhere."""
    d = s.describer
    sid = t.storage
    if sid is not None and sid not in s.storages:
        st = ix.storages.get(d, {}).get(sid)
        if st is not None:
            s.storages[sid] = st
    if inputs_mod.LINKING.isdisjoint(t.fields):
        return  # most tensors name no other tensor
    for link in (*inputs_mod.links(t), *t.attrs.values()):
        if link not in s.tensors:
            other = ix.tensors.get(d, {}).get(link)
            if other is not None:
                s.tensors[link] = other
                borrow(ix, s, other)
