"""Describe records: the tensors, storages and sources of each compile's input sets."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tlview.index import inputs as inputs_mod
from tlview.index.core import State
from tlview.index.kinds import count_kind, is_int, peek
from tlview.model import Compile, InputSet, StorageDesc, TensorDesc
from tlview.parse import Record

MAX_DESCRIBED = 100_000  # storages, tensors and sources kept per describer and compile (each)
KEEP_DESCRIBERS = 4  # describers whose tensors stay at hand for cross-compile references


def on_describe(ix: State, rec: Record, c: Compile) -> None:
    """A describer's storage, tensor or source, into its input set of the compile."""
    b = rec.body
    if not isinstance(b, dict):
        ix.bad(rec, "expected an object")
        return
    d, i = b.get("describer_id"), b.get("id")
    if (
        not isinstance(d, int)
        or not isinstance(i, int)
        or isinstance(d, bool)
        or isinstance(i, bool)
    ):
        ix.bad(rec, "describer_id and id must be integers")
        return
    s = None
    for x in c.input_sets:
        if x.describer == d:
            s = x
            break
    if s is None:
        s = InputSet(describer=d, where=ix.user_frame(rec.meta.get("stack"), rec))
        c.input_sets.append(s)
    if rec.kind == "describe_storage":
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
    elif rec.kind == "describe_tensor":
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
    elif rec.kind == "describe_source":
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
    else:
        count_kind(ix.log.unknown_kinds, rec.kind)


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
