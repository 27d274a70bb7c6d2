"""Compare the ranks of a job: which ranks differ from the majority, and how."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tlview.analyze.summary import break_title, frame_label, is_recompile, short_place
from tlview.index.digests import (
    COLLECTIVE_SCHEDULE,
    COMPARED_GRAPHS,
    GRAPH_EXECUTION,
    RUNTIME_ESTIMATE,
    compared_kind,
)
from tlview.model import Compile, CompileId, Divergence, LogIndex, Payload, Report
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
    """A log's compiles as small values, computed where the log is read and merged per rank."""

    rank: int | None
    # compile (its id without the attempt) -> aspect -> value, of its final attempt: a rank whose
    # compile restarted is compared by what it ended with, not by the attempt it gave up
    compiles: dict[str, dict[str, Hashable]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)  # every compile id, attempts too
    final: dict[str, str] = field(default_factory=dict)  # compile -> its final attempt's id
    recompiles: int = 0
    graph_breaks: int = 0
    execution: tuple[Hashable, ...] = ()  # graph_execution artifacts: (md5, calls, runs)


def fingerprint(log: LogIndex, graphs: bool = True) -> Fingerprint:
    """The values of every compared aspect of every compile of one log; without `graphs`, the
    graphs are left out (their hashes were not masked, and GPU ranks' graphs name their device)."""
    f = Fingerprint(log.rank)
    execution: list[Hashable] = []
    for c in log.compiles:
        execution += [_execution_value(p) for p in c.artifacts if p.kind == GRAPH_EXECUTION]
        if c.id is None:
            continue
        f.ids.append(c.key)
        values = {
            kind: value(c) if graphs or kind != "graph" else None for kind, value, _ in _PER_COMPILE
        }
        base = str(c.id.base)
        before = f.compiles.get(base)
        if before is not None:  # a later attempt (they come in order): the final one stays,
            # with the breaks of the attempts it restarted from (torch logs a break on those)
            values["break"] = tuple(dict.fromkeys((*before["break"], *values["break"])))  # type: ignore[misc]
        f.compiles[base] = values
        f.final[base] = c.key
        f.recompiles += is_recompile(c)
        f.graph_breaks += len(c.graph_breaks)
    f.execution = tuple(execution)
    return f


def divergence_of(report: Report) -> list[Divergence]:
    """Ways in which some ranks of a report differ from the others; empty when all agree."""
    return find_in([fingerprint(log) for log in report.logs])


def find_in(logs: Iterable[Fingerprint]) -> list[Divergence]:
    """Divergence between ranks from their logs' facts (a rank with several logs gets them all)."""
    ranks: dict[int, Fingerprint] = {}
    for f in logs:
        if f.rank is None:
            continue
        r = ranks.get(f.rank)
        if r is None:
            ranks[f.rank] = Fingerprint(
                f.rank,
                dict(f.compiles),
                list(f.ids),
                dict(f.final),
                f.recompiles,
                f.graph_breaks,
                f.execution,
            )
            continue
        for k, v in f.compiles.items():
            if k not in r.compiles:
                r.compiles[k], r.final[k] = v, f.final[k]
        r.ids += f.ids
        r.recompiles += f.recompiles
        r.graph_breaks += f.graph_breaks
        r.execution += f.execution
    if len(ranks) < 2:
        return []
    ranks = dict(sorted(ranks.items()))
    out = _compile_ids(ranks)
    for kind, _, describe in _PER_COMPILE:
        out += _per_compile(ranks, kind, describe)
    out += _per_rank(ranks, "recompiles", lambda r: r.recompiles, lambda v: count(v, "recompile"))
    out += _per_rank(
        ranks, "graph_breaks", lambda r: r.graph_breaks, lambda v: count(v, "graph break")
    )
    out += _per_rank(ranks, "graph_execution", lambda r: r.execution, _execution_text)
    return out


# -- grouping ---------------------------------------------------------------------------------
def _reference(groups: dict[Any, list[int]]) -> Any:
    """The most common value; on a tie, the one of the lowest rank."""
    return max(groups, key=lambda v: (len(groups[v]), -min(groups[v])))


def _group(values: dict[int, Any]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = {}
    for rank, v in values.items():
        groups.setdefault(v, []).append(rank)
    return groups


def _label(ref: list[int], total: int) -> str:
    """How a detail names what it compares with: the majority, or the ranks of a tie."""
    if len(ref) * 2 > total:
        return "majority"
    return ("rank " if len(ref) == 1 else "ranks ") + rank_ranges(ref)


def rank_ranges(ranks: Iterable[int]) -> str:
    """Ranks as short text: `0-3, 5, 7-999`."""
    rs = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(parts)


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
def _compile_ids(ranks: dict[int, Fingerprint]) -> list[Divergence]:
    n = len(ranks)
    lowest = next(iter(ranks.values()))
    have: dict[str, int] = {}
    for r in ranks.values():
        for k in set(r.ids):
            have[k] = have.get(k, 0) + 1
    first = set(lowest.ids)
    ref = {k for k, m in have.items() if m * 2 > n or (m * 2 == n and k in first)}
    diffs: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
    for rank, r in ranks.items():
        keys = set(r.ids)
        if keys != ref:
            diffs[rank] = (frozenset(ref - keys), frozenset(keys - ref))
    out = []
    for (missing, extra), rs in sorted(_group(diffs).items(), key=lambda kv: kv[1]):
        parts = []
        if missing:
            parts.append(f"missing {_ids(missing)}")
        if extra:
            parts.append(f"extra {_ids(extra)}")
        tie = any(have[k] * 2 == n for k in missing | extra)
        note = f" (no majority for some: compared with rank {lowest.rank})" if tie else ""
        out.append(Divergence("compile_ids", rs, "; ".join(parts) + note))
    return out


# -- aspects of one compile, compared between the ranks that have it ---------------------------
Describe = Callable[[str, Any, Any, str], str]


def _per_compile(ranks: dict[int, Fingerprint], kind: str, describe: Describe) -> list[Divergence]:
    keys: dict[str, None] = {}
    for r in ranks.values():
        keys.update(dict.fromkeys(r.compiles))
    diffs: dict[int, list[str]] = {}
    for key in sorted(keys, key=_key_order):
        values = {rank: r.compiles[key][kind] for rank, r in ranks.items() if key in r.compiles}
        groups = _group(values)
        if len(groups) < 2:
            continue
        ref = _reference(groups)
        label = _label(groups[ref], len(values))
        # Named by the attempt the ranks ended with (0/0_1 after a restart), when they agree.
        finals = {r.final.get(key, key) for r in ranks.values() if key in r.compiles}
        shown = finals.pop() if len(finals) == 1 else key
        for v, rs in groups.items():
            if v != ref:
                text = describe(shown, v, ref, label)
                for rank in rs:
                    diffs.setdefault(rank, []).append(text)
    details = _group({rank: _join(parts) for rank, parts in diffs.items()})
    return [Divergence(kind, rs, d) for d, rs in sorted(details.items(), key=lambda kv: kv[1])]


def _frame(c: Compile) -> Hashable:
    """What the compile id compiles, by file name: each rank may run from its own folder."""
    return frame_label(c.function or "?", c.file, c.firstline)


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
        for n, (x, y) in enumerate(zip(ops_a, ops_b, strict=False)):
            if x != y:
                return f"{key} collective {n + 1} is {x} ({label}: {y})"
        if n_a != n_b:
            return f"{key} {n_a} collectives ({label}: {n_b})"
        return f"{key} collective schedule md5 {_short([md5_a])} ({label}: {_short([md5_b])})"
    return f"{key} collective schedules differ"


def _runtimes(c: Compile) -> Hashable:
    return tuple(_sig((p.meta or {}).get("runtime_ns")) for p in _artifacts(c, RUNTIME_ESTIMATE))


def _sig(v: Any) -> Any:
    """A runtime rounded to 3 significant digits: estimates that close are equal."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return None
    return float(f"{v:.3g}")


def _describe_runtimes(key: str, mine: Any, ref: Any, label: str) -> str:
    def total(vs: tuple[Any, ...]) -> str:
        return " + ".join(_ns(v) for v in vs) or "none"

    return f"{key} estimated runtime {total(mine)} ({label}: {total(ref)})"


def _ns(v: Any) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return "?"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} ns"


def _tensor_meta(c: Compile) -> Hashable:
    return tuple(
        ((p.meta or {}).get("tensor_meta"), (p.meta or {}).get("ops"))
        for p in _artifacts(c, RUNTIME_ESTIMATE)
    )


def _describe_tensor_meta(key: str, mine: Any, ref: Any, label: str) -> str:
    def ops(v: tuple[Any, ...]) -> str:
        return "+".join(str(n) for _, n in v) or "no"

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
    ("runtime_estimate", _runtimes, _describe_runtimes),
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
    ranks: dict[int, Fingerprint],
    kind: str,
    value: Callable[[Fingerprint], Hashable],
    show: Callable[[Any], str],
) -> list[Divergence]:
    groups = _group({rank: value(r) for rank, r in ranks.items()})
    if len(groups) < 2:
        return []
    ref = _reference(groups)
    label = _label(groups[ref], len(ranks))
    return [
        Divergence(kind, rs, f"{show(v)} ({label}: {show(ref)})")
        for v, rs in sorted(groups.items(), key=lambda kv: kv[1])
        if v != ref
    ]
