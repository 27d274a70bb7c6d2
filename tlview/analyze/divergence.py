"""Compare the ranks of a job: which ranks differ from the majority, and how."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tlview.analyze.breaks import break_title
from tlview.analyze.collectives import parity
from tlview.analyze.compiles import is_recompile
from tlview.analyze.names import names_text, process_name
from tlview.analyze.summary import frame_label, short_place
from tlview.index.digests import (
    COLLECTIVE_SCHEDULE,
    COMPARED_GRAPHS,
    GRAPH_EXECUTION,
    RUNTIME_ESTIMATE,
    compared_kind,
)
from tlview.model import Compile, CompileId, Divergence, LogIndex, Payload
from tlview.units import count

# Input fields compared between ranks, as the JSON report names them.
INPUT_FIELDS = (
    "size",
    "stride",
    "storage_offset",
    "dtype",
    "device",
    "layout",
    "requires_grad",
    "is_parameter",
    "type",
    "alias",
)
DIVERGENCE_KINDS = (
    "compile_ids",
    "frame",
    "status",
    "break",
    "graph",
    "inputs",
    "recompiles",
    "graph_breaks",
    "cache",
    "collective_schedule",
    "runtime_estimate",
    "tensor_meta",
    "graph_execution",
)
MAX_DETAIL = 600  # characters of one divergence's detail


# -- what one log says, reduced to the values ranks are compared by ------------------------------
@dataclass(slots=True)
class Fingerprint:
    """A log's compiles as small values, computed where the log is read; each log is a process,
    compared as it is (two logs that claim one rank are two processes, never merged)."""

    rank: int | None
    # compile (its id without the attempt) -> aspect -> value, of its final attempt: a rank whose
    # compile restarted is compared by what it ended with, not by the attempt it gave up
    compiles: dict[str, dict[str, Hashable]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)  # every compile id, attempts too
    final: dict[str, str] = field(default_factory=dict)  # compile -> its final attempt's id
    recompiles: int = 0
    graph_breaks: int = 0
    execution: tuple[Hashable, ...] = ()  # graph_execution artifacts: (md5, calls, runs)
    parity: dict[str, str] = field(default_factory=dict)  # compile -> what its collectives lack
    name: str = ""  # the process's name in the job (`rank1`, `rank1#2`), given when reduced


def fingerprint(log: LogIndex, graphs: bool = True) -> Fingerprint:
    """The values of every compared aspect of every compile of one log; without `graphs`, the
    graphs are left out (their hashes were not masked, and GPU ranks' graphs name their device)."""
    f = Fingerprint(log.rank, name=log.process)
    execution: list[Hashable] = []
    for c in log.compiles:
        execution += [_execution_value(p) for p in c.artifacts if p.kind == GRAPH_EXECUTION]
        if c.id is not None:
            _take(f, c, graphs)
    f.execution = tuple(execution)
    return f


def _take(f: Fingerprint, c: Compile, graphs: bool) -> None:
    """One compile's values into its log's fingerprint."""
    assert c.id is not None
    f.ids.append(c.key)
    values = {
        kind: value(c) if graphs or kind != "graph" else None for kind, value, _ in _PER_COMPILE
    }
    values["runtime_estimate"] = _runtimes(c)
    base = str(c.id.base)
    before = f.compiles.get(base)
    if before is not None:  # a later attempt (they come in order): the final one stays,
        # with the breaks of the attempts it restarted from (torch logs a break on those)
        values["break"] = tuple(dict.fromkeys((*before["break"], *values["break"])))  # type: ignore[misc]
    f.compiles[base] = values
    f.final[base] = c.key
    f.recompiles += is_recompile(c)
    f.graph_breaks += len(c.graph_breaks)
    got = parity(c)
    if got is not None and not got.matched:
        f.parity[c.key] = got.text()


def find_in(logs: Iterable[Fingerprint]) -> list[Divergence]:
    """Divergence between the processes of a job, each log its own (a rank with two logs is
    compared as two), and what each process's collectives lack."""
    units = [f for f in logs if f.rank is not None]
    if len(units) < 2:
        return []
    job = Processes(units)
    out = _compile_ids(job)
    for kind, _, describe in _PER_COMPILE:
        out += _per_compile(job, kind, describe)
    out += _runtime_outliers(job)
    out += _per_rank(job, "recompiles", lambda r: r.recompiles, lambda v: count(v, "recompile"))
    out += _per_rank(
        job, "graph_breaks", lambda r: r.graph_breaks, lambda v: count(v, "graph break")
    )
    out += _per_rank(job, "graph_execution", lambda r: r.execution, _execution_text)
    out += _parity(job)
    return out


class Processes:
    """The processes of a job in rank order (a rank's second log after its first), by slot."""

    def __init__(self, units: list[Fingerprint]) -> None:
        seen: dict[int, int] = {}
        named = []
        for f in units:
            assert f.rank is not None
            n = seen[f.rank] = seen.get(f.rank, 0) + 1
            named.append((f.rank, n, f.name or process_name(f.rank, n)))
        order = sorted(range(len(units)), key=lambda i: named[i][:2])
        self.units = {slot: units[i] for slot, i in enumerate(order)}
        self.names = [named[i][2] for i in order]

    def who(self, slots: Iterable[int]) -> str:
        """`rank 3`, `ranks 0-6, 8`, `ranks 1, 1#2`: processes as a detail names them."""
        names = [self.names[s] for s in sorted(set(slots))]
        return ("rank " if len(names) == 1 else "ranks ") + names_text(names)

    def divergence(self, kind: str, slots: list[int], detail: str) -> Divergence:
        ranks = sorted({r for s in slots if (r := self.units[s].rank) is not None})
        return Divergence(kind, ranks, detail, [self.names[s] for s in sorted(slots)])


# -- grouping ---------------------------------------------------------------------------------
def _reference(groups: dict[Any, list[int]]) -> Any:
    """The majority's value; with none, the lowest process's (rank 0's): each is compared once."""
    best = max(groups, key=lambda v: (len(groups[v]), -min(groups[v])))
    if len(groups[best]) * 2 > sum(len(v) for v in groups.values()):
        return best
    return min(groups, key=lambda v: min(groups[v]))


def _group(values: dict[int, Any]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = {}
    for rank, v in values.items():
        groups.setdefault(v, []).append(rank)
    return groups


def _label(job: Processes, ref: list[int], total: int) -> str:
    """How a detail names what it compares with: the majority, or with none the lowest rank's."""
    if len(ref) * 2 > total:
        return "majority"
    if total == 2:
        return job.who(ref)
    return f"no majority; {job.who(ref)}"


def _join(parts: list[str]) -> str:
    text = ""
    for n, p in enumerate(parts):
        nxt = p if not text else f"{text}; {p}"
        if len(nxt) > MAX_DETAIL and text:
            return f"{text}; and {len(parts) - n} more"
        text = nxt
    return text


def _ids(keys: Iterable[str], limit: int = 12) -> str:
    ks = sorted(keys, key=_key_order)
    shown = ", ".join(ks[:limit])
    return shown + (f" and {len(ks) - limit} more" if len(ks) > limit else "")


def _key_order(key: str) -> tuple[int, ...]:
    try:
        return CompileId.parse(key).sort_key
    except ValueError:
        return (1 << 30, 0, 0, 0)


# -- compile ids ------------------------------------------------------------------------------
def _compile_ids(job: Processes) -> list[Divergence]:
    units = job.units
    n = len(units)
    have: dict[str, int] = {}
    for r in units.values():
        for k in set(r.ids):
            have[k] = have.get(k, 0) + 1
    first = set(units[0].ids)
    ref = {k for k, m in have.items() if m * 2 > n or (m * 2 == n and k in first)}
    diffs: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
    for slot, r in units.items():
        keys = set(r.ids)
        if keys != ref:
            diffs[slot] = (frozenset(ref - keys), frozenset(keys - ref))
    out = []
    for (missing, extra), rs in sorted(_group(diffs).items(), key=lambda kv: kv[1]):
        tie = any(have[k] * 2 == n for k in missing | extra)
        out.append(job.divergence("compile_ids", rs, _ids_words(job, missing, extra, tie)))
    return out


def _ids_words(job: Processes, missing: frozenset[str], extra: frozenset[str], tie: bool) -> str:
    """The compile ids a process lacks or has beyond the others, in words."""
    parts = [f"missing {_ids(missing)}"] if missing else []
    if extra:
        parts.append(f"extra {_ids(extra)}")
    note = f" (no majority for some: compared with {job.who([0])})" if tie else ""
    return "; ".join(parts) + note


# -- aspects of one compile, compared between the ranks that have it ---------------------------
Describe = Callable[[str, Any, Any, str], str]


def _per_compile(job: Processes, kind: str, describe: Describe) -> list[Divergence]:
    diffs: dict[int, list[str]] = {}
    for key, values in _values(job, kind):
        groups = _group(values)
        if len(groups) < 2:
            continue
        ref = _reference(groups)
        label = _label(job, groups[ref], len(values))
        shown = _shown(job, key)
        for v, rs in groups.items():
            if v != ref:
                text = describe(shown, v, ref, label)
                for slot in rs:
                    diffs.setdefault(slot, []).append(text)
    return _grouped(job, kind, diffs)


def _values(job: Processes, kind: str) -> Iterable[tuple[str, dict[int, Any]]]:
    """Each compile, with the value of one aspect on each process that has it."""
    keys: dict[str, None] = {}
    for r in job.units.values():
        keys.update(dict.fromkeys(r.compiles))
    for key in sorted(keys, key=_key_order):
        yield key, {s: r.compiles[key][kind] for s, r in job.units.items() if key in r.compiles}


def _shown(job: Processes, key: str) -> str:
    """A compile as a detail names it: by the attempt the ranks ended with (0/0_1 after a
    restart), when they agree."""
    finals = {r.final.get(key, key) for r in job.units.values() if key in r.compiles}
    return finals.pop() if len(finals) == 1 else key


def _grouped(job: Processes, kind: str, diffs: dict[int, list[str]]) -> list[Divergence]:
    """One divergence per group of processes that differ the same way."""
    details = _group({slot: _join(parts) for slot, parts in diffs.items()})
    return [job.divergence(kind, rs, d) for d, rs in sorted(details.items(), key=lambda kv: kv[1])]


def _frame(c: Compile) -> Hashable:
    """What the compile id compiles, by file name: each rank may run from its own folder."""
    return frame_label(c.function or "?", c.file, c.source_line)


def _describe_frame(key: str, mine: Any, ref: Any, label: str) -> str:
    return f"{key} compiles {mine} ({label}: {ref})"


def _breaks(c: Compile) -> Hashable:
    return tuple((break_title(g.reason), short_place(g.where or "?")) for g in c.graph_breaks)


def _describe_breaks(key: str, mine: Any, ref: Any, label: str) -> str:
    def text(v: Any) -> str:
        return "; ".join(f"{title} at {where}" for title, where in v) or "no graph break"

    return f"{key} {text(mine)} ({label}: {text(ref)})"


def _status(c: Compile) -> Hashable:
    return c.status


def _describe_status(key: str, mine: Any, ref: Any, label: str) -> str:
    return f"{key} {mine} ({label}: {ref})"


def _graphs(c: Compile) -> Hashable:
    out = []
    for p in c.graphs:
        kind = compared_kind(p.kind, p.meta)
        if kind is not None:
            out.append((kind, p.masked_md5 or p.md5))
    return tuple(out)


def _describe_graphs(key: str, mine: Any, ref: Any, label: str) -> str:
    a_all, b_all = _by_kind(mine), _by_kind(ref)
    parts = []
    for kind in COMPARED_GRAPHS:
        a, b = a_all.get(kind, []), b_all.get(kind, [])
        if a == b:
            continue
        parts.append(f"{kind} content {_short(a)} ({label}: {_short(b)})")
    return f"{key} " + ", ".join(parts)


def _by_kind(pairs: tuple[tuple[str, str | None], ...]) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for kind, md5 in pairs:
        out.setdefault(kind, []).append(md5)
    return out


def _short(md5s: list[str | None]) -> str:
    return ",".join((m or "?")[:8] for m in md5s) or "none"


def _inputs(c: Compile) -> Hashable:
    out: dict[str, tuple[Any, ...]] = {}
    for i in c.inputs:
        if i.superseded:
            continue
        t = i.tensor
        out.setdefault(
            i.source,
            (
                _frozen(t.size),
                _frozen(t.stride),
                t.storage_offset,
                t.fields.get("dtype"),
                t.device.split(":")[0],  # each rank has its own device index
                t.get("layout"),
                t.flag("requires_grad"),
                t.flag("is_parameter"),
                t.type_name,
                i.alias_group,
            ),
        )
    return tuple(out.items())


def _frozen(v: list[Any] | None) -> tuple[Any, ...] | None:
    return None if v is None else tuple(v)


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def _describe_inputs(key: str, mine: Any, ref: Any, label: str) -> str:
    a, b = dict(mine), dict(ref)
    parts = []
    for src, fields in a.items():
        other = b.get(src)
        if other is None:
            parts.append(f"{key} {src}: an input the {label} does not have")
            continue
        for name, x, y in zip(INPUT_FIELDS, fields, other, strict=True):
            if x != y:
                parts.append(f"{key} {src} {name} {_show(x)} ({label}: {_show(y)})")
    parts += [f"{key} {src}: missing (an input of the {label})" for src in b if src not in a]
    return "; ".join(parts)


def _cache(c: Compile) -> Hashable:
    return tuple((e.cache, e.outcome) for e in c.cache)


def _describe_cache(key: str, mine: Any, ref: Any, label: str) -> str:
    def seq(events: tuple[tuple[str, str], ...]) -> str:
        return ", ".join(f"{cache} {outcome}" for cache, outcome in events) or "no cache lookup"

    return f"{key} {seq(mine)} ({label}: {seq(ref)})"


def _artifacts(c: Compile, kind: str) -> list[Payload]:
    return [p for p in c.artifacts if p.kind == kind]


def _collectives(c: Compile) -> Hashable:
    out = []
    for p in _artifacts(c, COLLECTIVE_SCHEDULE):
        m = p.meta or {}
        out.append((p.md5, m.get("collectives"), tuple(m.get("ops") or ())))
    return tuple(out)


def _describe_collectives(key: str, mine: Any, ref: Any, label: str) -> str:
    if len(mine) != len(ref):
        return f"{key} {len(mine)} collective schedules ({label}: {len(ref)})"
    for (md5_a, n_a, ops_a), (md5_b, n_b, ops_b) in zip(mine, ref, strict=True):
        if md5_a == md5_b:
            continue
        first = first_difference(list(ops_a), list(ops_b), label)
        if first:
            return f"{key} {first}"
        if n_a != n_b:
            return f"{key} {n_a} collectives ({label}: {n_b})"
        return f"{key} collective schedule md5 {_short([md5_a])} ({label}: {_short([md5_b])})"
    return f"{key} collective schedules differ"


def first_difference(mine: list[str], ref: list[str], label: str) -> str:
    """Where two op sequences first part: a run of collectives missing, one extra, or another
    collective in that place."""
    n = next((i for i, (a, b) in enumerate(zip(mine, ref, strict=False)) if a != b), None)
    if n is None:
        n = min(len(mine), len(ref))
        if len(mine) == len(ref):
            return ""
    for k in range(1, len(ref) - n + 1):
        if mine[n:] == ref[n + k :]:
            return f"misses {', '.join(ref[n : n + k][:4])} at collective {n + 1} ({label} has it)"
    for k in range(1, len(mine) - n + 1):
        if mine[n + k :] == ref[n:]:
            return f"has {', '.join(mine[n : n + k][:4])} at collective {n + 1} ({label}: not)"
    return f"collective {n + 1} is {mine[n]} ({label}: {ref[n]})"


def _runtimes(c: Compile) -> tuple[float | None, ...]:
    """Each graph's estimated runtime in ns, as logged (compared within a tolerance)."""
    return tuple(_number((p.meta or {}).get("runtime_ns")) for p in _artifacts(c, RUNTIME_ESTIMATE))


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _ns(v: Any) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return "?"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} ns"


def _tensor_meta(c: Compile) -> Hashable:
    out = []
    for p in _artifacts(c, RUNTIME_ESTIMATE):
        m = p.meta or {}
        kernels = tuple(tuple(k) for k in m.get("kernels") or ())
        out.append((m.get("tensor_meta"), m.get("ops"), kernels))
    return tuple(out)


def _describe_tensor_meta(key: str, mine: Any, ref: Any, label: str) -> str:
    def ops(v: tuple[Any, ...]) -> str:
        return "+".join(str(n) for _, n, _ in v) or "no"

    for g, ((digest_a, _, ks_a), (digest_b, _, ks_b)) in enumerate(zip(mine, ref, strict=False)):
        if digest_a == digest_b:
            continue
        where = f" graph {g + 1}" if len(mine) > 1 else ""
        for n, (a, b) in enumerate(zip(ks_a, ks_b, strict=False)):
            if a != b:
                return (
                    f"{key}{where} kernel {n + 1} ({a[0]}) outputs {a[1]} "
                    f"({label}: {b[0] if b[0] != a[0] else ''}{' ' if b[0] != a[0] else ''}{b[1]})"
                )
    return (
        f"{key} output shapes, strides or dtypes of its kernels differ "
        f"({ops(mine)} kernels; {label}: {ops(ref)})"
    )


_PER_COMPILE: list[tuple[str, Callable[[Compile], Hashable], Describe]] = [
    ("frame", _frame, _describe_frame),
    ("status", _status, _describe_status),
    ("break", _breaks, _describe_breaks),
    ("graph", _graphs, _describe_graphs),
    ("inputs", _inputs, _describe_inputs),
    ("cache", _cache, _describe_cache),
    ("collective_schedule", _collectives, _describe_collectives),
    ("tensor_meta", _tensor_meta, _describe_tensor_meta),
]


# -- whole-rank figures -----------------------------------------------------------------------
def _execution_value(p: Payload) -> Hashable:
    m = p.meta or {}
    return (p.md5, m.get("calls"), tuple(tuple(r) for r in m.get("runs") or ()))


def _execution_text(v: tuple[Any, ...]) -> str:
    if not v:
        return "no graph_execution record"
    texts = []
    for _, calls, runs in v:
        order = ", ".join(f"{cid}" + (f" x{n}" if n > 1 else "") for cid, n in runs[:8])
        texts.append(f"{calls} graph calls: {order}" + (", ..." if len(runs) > 8 else ""))
    return "; ".join(texts)


def _per_rank(
    job: Processes,
    kind: str,
    value: Callable[[Fingerprint], Hashable],
    show: Callable[[Any], str],
) -> list[Divergence]:
    groups = _group({slot: value(r) for slot, r in job.units.items()})
    if len(groups) < 2:
        return []
    ref = _reference(groups)
    label = _label(job, groups[ref], len(job.units))
    return [
        job.divergence(kind, rs, f"{show(v)} ({label}: {show(ref)})")
        for v, rs in sorted(groups.items(), key=lambda kv: kv[1])
        if v != ref
    ]


# -- runtime estimates: numbers, equal within a tolerance --------------------------------------
RUNTIME_TOLERANCE = 0.05  # estimates within 5% of the median of the ranks' agree
RUNTIME_FLOOR_NS = 1000.0  # and so do estimates within 1 us of it


def _runtime_outliers(job: Processes) -> list[Divergence]:
    """Graphs whose estimated runtime on some ranks is off the ranks' median; the slowest named."""
    diffs: dict[int, list[str]] = {}
    for key, values in _values(job, "runtime_estimate"):
        graphs = max((len(v) for v in values.values()), default=0)
        for g in range(graphs):
            ns = {s: v[g] for s, v in values.items() if len(v) > g and v[g] is not None}
            what = f"{_shown(job, key)}" + (f" graph {g + 1}" if graphs > 1 else "")
            for s, text in _off_median(job, what, ns):
                diffs.setdefault(s, []).append(text)
    return _grouped(job, "runtime_estimate", diffs)


def _off_median(job: Processes, what: str, ns: dict[int, Any]) -> list[tuple[int, str]]:
    """Each rank whose estimate of one graph is off the median, with the words that say so."""
    if len(ns) < 2:
        return []
    mid = statistics.median(ns.values())
    off = [s for s, v in ns.items() if abs(v - mid) > _tolerance(mid)]
    slowest = max(ns, key=lambda s: (ns[s], -s))
    out = []
    for s in off:
        text = f"{what} estimated runtime {_ns(ns[s])} (median of {len(ns)}: {_ns(mid)}"
        text += (
            "; the slowest)"
            if s == slowest
            else f"; the slowest: {job.who([slowest])} {_ns(ns[slowest])})"
        )
        out.append((s, text))
    return out


def _tolerance(mid: float) -> float:
    return max(abs(mid) * RUNTIME_TOLERANCE, RUNTIME_FLOOR_NS)


# -- collectives parity: each process's schedules against its output code ----------------------
def _parity(job: Processes) -> list[Divergence]:
    diffs = {
        slot: [
            f"{key} {text}"
            for key, text in sorted(r.parity.items(), key=lambda kv: _key_order(kv[0]))
        ]
        for slot, r in job.units.items()
        if r.parity
    }
    return _grouped(job, "collective_parity", diffs)
