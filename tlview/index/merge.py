"""A log read in two parts: fold what the reader of the later part found into the earlier's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tlview.index.core import CLOSED_SHIFT, OpenState, State
from tlview.index.describe import MAX_DESCRIBED
from tlview.index.kinds import MAX_EVENTS, MAX_KINDS, OTHER_KINDS
from tlview.model import Compile, CompileId, Event, InputSet, LogIndex
from tlview.parse import MAX_BAD_KEPT


def merge(ix: State, b: State) -> None:
    """Take in what another reader found in the part of this log after ours: one reader's
    index, from two readers' of a log's parts."""
    _merge_log(ix.log, b.log)
    ix.strings.update(b.strings)
    ix.started |= b.started
    ix.ended |= b.ended  # both in the first run (else the later part is read on, not merged)
    depth = _depths(ix, b)
    _merge_compiles(ix, b, depth)
    for cid, name, ts in b.unmatched:
        ix.end_event(cid, name, ts)
    for cid, st in b.open.items():
        ix.open.setdefault(cid, OpenState()).chromium.extend(
            (n, t, depth(cid, d)) for n, t, d in st.chromium
        )


def _merge_compiles(ix: State, b: State, depth: _Depths) -> None:
    """The later part's compiles: one finished there as one reader finishes it is taken as it
    is; one with records in both parts (or events begun in ours) is taken as read, and merged."""
    ix.compiles.fin.take_names(b.compiles.fin)
    for base in b.compiles.bases():
        rewrite = [cid for cid in b.compiles.attempts[base] if depth.moves(cid)]
        if base not in ix.compiles.attempts and b.compiles.is_closed(base) and not rewrite:
            ix.compiles.adopt(b.compiles, base)
            continue
        for theirs in b.compiles.take(base):
            if theirs.id in rewrite:
                theirs.phases = [p._replace(depth=depth(theirs.id, p.depth)) for p in theirs.phases]
            _merge_one(ix, b, theirs)


def _merge_log(la: LogIndex, lb: LogIndex) -> None:
    """What the later part's reader counted of the log, added to ours."""
    la.records += lb.records
    _add_kinds(la.kinds, lb.kinds)
    _add_kinds(la.unknown_kinds, lb.unknown_kinds)
    la.first_time = la.first_time or lb.first_time
    la.last_time = lb.last_time or la.last_time
    if la.rank is None:
        la.rank, la.rank_from = lb.rank, lb.rank_from
    la.torch_version = la.torch_version or lb.torch_version
    la.bad_count += lb.bad_count
    la.bad_lines = (la.bad_lines + lb.bad_lines)[:MAX_BAD_KEPT]
    la.notes.extend(n for n in lb.notes if n not in la.notes)


def _add_kinds(table: dict[str, int], other: dict[str, int]) -> None:
    for k, n in other.items():  # at most MAX_KINDS names, as one reader counts them
        k = OTHER_KINDS if k not in table and len(table) >= MAX_KINDS else k
        table[k] = table.get(k, 0) + n


class _Depths:
    """The depth one reader gives an event of the later part: events begun in our part and still
    open are the outer ones of b's; b counted depths from its own stack and noted how many of
    ours it had closed by then (an end whose begin was lost, a damaged record, closes nothing,
    as one reader finds)."""

    def __init__(self, deeper: dict[CompileId | None, int], closes: dict[Any, list[int]]) -> None:
        self.deeper = deeper
        self.closes = closes  # per compile: how many of b's first k unmatched ends close ours

    def moves(self, cid: CompileId | None) -> bool:
        return cid in self.deeper or cid in self.closes

    def __call__(self, cid: CompileId | None, d: int) -> int:
        closed, local = d >> CLOSED_SHIFT, d & ((1 << CLOSED_SHIFT) - 1)
        counts = self.closes.get(cid)
        if counts is not None:
            closed = counts[min(closed, len(counts) - 1)]
        return local + max(0, self.deeper.get(cid, 0) - closed)


def _depths(ix: State, b: State) -> _Depths:
    deeper = {cid: len(st.chromium) for cid, st in ix.open.items() if st.chromium}
    closes: dict[CompileId | None, list[int]] = {}
    names = {cid: [n for n, _, _ in st.chromium] for cid, st in ix.open.items()}
    for cid, name, _ts in b.unmatched:
        open_here = names.get(cid, [])
        hit = name in open_here
        if hit:
            del open_here[len(open_here) - 1 - open_here[::-1].index(name)]
        counts = closes.setdefault(cid, [0])
        counts.append(counts[-1] + hit)
    return _Depths(deeper, closes)


def _merge_one(ix: State, b: State, theirs: Compile) -> None:
    """A compile of the later part, as read, into ours (merged with our records of it)."""
    cid = theirs.id
    mine = ix.compiles.get(cid)
    if mine is None:
        ix.compiles.put(cid, theirs)
        return
    if cid not in b.started and mine.stack:
        theirs.stack = []  # a graph's stack only fills in for a missing dynamo_start
    early = b.undescribed.get(cid, 0)
    if early and mine.input_sets:  # made under the fake mode our part described last
        d = mine.input_sets[-1].describer
        theirs.symbols[:early] = [s._replace(describer=d) for s in theirs.symbols[:early]]
    merge_compile(mine, theirs, b.metrics_events.get(cid))


# Compile fields set once from one record: the first part's value wins, else the later's.
_SET_ONCE = frozenset({"restart_reasons", "recompile_reasons", "inputs", "status"})


def merge_compile(a: Compile, b: Compile, metrics_event: Event | None = None) -> None:
    """Fold the later part `b` of one compile's records into `a`. When both parts have metrics
    (records outside any compile, a record written twice), b's are an event of `a`, as one
    reader keeps them (`metrics_event`), and what b took from them (function, failure, reasons)
    is dropped."""
    if a.metrics is not None and b.metrics is not None:
        b = _metrics_dropped(a, b, metrics_event)
    for f in dataclasses.fields(Compile):
        name = f.name
        va, vb = getattr(a, name), getattr(b, name)
        how = _MERGE.get(name)
        if how is not None:
            setattr(a, name, how(va, vb))
        elif isinstance(va, list) and name not in _SET_ONCE:
            va.extend(vb)
        elif not va and vb:
            setattr(a, name, vb)


def _metrics_dropped(a: Compile, b: Compile, metrics_event: Event | None) -> Compile:
    b = dataclasses.replace(
        b,
        metrics=None,
        fail_type=None,
        fail_reason=None,
        fail_where=None,
        function=None,
        file=None,
        source_line=None,
        restart_reasons=[],
        recompile_reasons=[],
    )
    if metrics_event is not None:
        if len(a.events) + len(b.events) < MAX_EVENTS:
            b.events = sorted([*b.events, metrics_event], key=lambda e: e.line)
        else:
            b.events_dropped += 1
    return b


def _input_sets(va: list[InputSet], vb: list[InputSet]) -> list[InputSet]:
    """Each describer's set of the later part into ours: at most MAX_DESCRIBED of each, as one
    reader keeps them; the rest counted."""
    for sb in vb:
        sa = next((x for x in va if x.describer == sb.describer), None)
        if sa is None:
            va.append(sb)
            continue
        sa.dropped += sb.dropped + _join(sa.storages, sb.storages)
        sa.dropped += _join(sa.tensors, sb.tensors)
        room = max(0, MAX_DESCRIBED - len(sa.sources))
        sa.sources.extend(sb.sources[:room])
        sa.dropped += max(0, len(sb.sources) - room)
        sa.where = sa.where or sb.where
    return va


# Fields merged their own way: (ours, the later part's) -> merged.
_MERGE: dict[str, Callable[[Any, Any], Any]] = {
    "last_log_line": lambda va, vb: vb,
    "end": lambda va, vb: vb,
    "events_dropped": lambda va, vb: va + vb,
    "input_sets": _input_sets,
    "stack": lambda va, vb: vb or va,  # each dynamo_start record replaces it
}


def _join(a: dict[int, Any], b: dict[int, Any]) -> int:
    """B's entries into A while A holds fewer than MAX_DESCRIBED; how many did not fit."""
    if len(a) + len(b) <= MAX_DESCRIBED:
        a.update(b)
        return 0
    left = 0
    for k, v in b.items():
        if k in a or len(a) < MAX_DESCRIBED:
            a[k] = v
        else:
            left += 1
    return left
