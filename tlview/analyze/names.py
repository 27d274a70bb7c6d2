"""How a report names its compiles and graphs, and which one a `--compile-id` picks.

Every command takes the same names: the id torch logged (`0/1`, `0/0_1`, `!0/1/0`, `0/0@2` in a
later run; also in brackets, `[0/1]`, as torch's messages and tlparse write it), `LOG:ID` or `rankN:ID` when a report holds several logs, `LOG:pidN:ID` in a file
that several processes wrote to, and `ID#N` for the Nth graph filed under one compile (repro).
A compile's artifacts (`tlview show`) are named by their kind, `KIND#N` for the Nth of a kind,
and `KIND[SUBGRAPH]` (`KIND#N[SUBGRAPH]`) for the Nth of a kind in one region of regional inductor.
A job's processes are `rank3`, `rank3#2` for a rank's second log, and `ranks 0-6, 8` in text.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tlview.errors import EXIT_NO_REPRO, EXIT_USAGE, TlviewError
from tlview.inert import command
from tlview.model import Compile, CompileId, Input, InputSet, Payload, Report
from tlview.units import number


def rank_ref(c: Compile) -> str | None:
    """`rankN:ID`: a compile of a job's rank log, by its rank (None: no rank logged)."""
    return None if c.rank is None else f"rank{c.rank}:{c.key}"


def compile_ref(c: Compile, many_logs: bool, by_pid: bool = False, short: bool = False) -> str:
    """How a compile is named across a report: its id, prefixed by its log when there are
    several (`short`: without torch's prefix), and by its process too in a file that several
    processes wrote to."""
    return f"{log_ref(c, by_pid, short)}:{c.key}" if many_logs else c.key


TORCH_PREFIX = "dedicated_log_torch_trace_"  # how torch begins the name of every log it writes


def log_label(name: str) -> str:
    """A log's file name without the prefix torch gives every log: the part that tells a
    folder's logs apart (`dedicated_log_torch_trace_4oku3kw2.log` is `4oku3kw2.log`)."""
    return name.removeprefix(TORCH_PREFIX) or name


def log_ref(c: Compile, by_pid: bool = False, short: bool = False) -> str:
    """The LOG of a LOG:ID: the compile's log file (`short`: its label), and its process
    (LOG:pidN) with `by_pid`."""
    name = log_label(c.log) if short else c.log
    return f"{name}:pid{c.pid}" if by_pid and c.pid is not None else name


@dataclass(frozen=True, slots=True)
class Refs:
    """`compile_ref` for every compile of one report: each process of a file that several
    wrote to numbers its compiles from 0/0, so there its compiles are LOG:pidN:ID."""

    many: bool
    shared: frozenset[str] = frozenset()  # files several processes wrote to
    by_rank: bool = False  # a job's logs, one per rank: rankN:ID, shorter than LOG:ID
    short: bool = False  # logs named by their labels (`4oku3kw2.log:0/0`): no two alike

    @classmethod
    def of(cls, report: Report) -> Refs:
        counts = Counter(log.name for log in report.logs)
        shared = frozenset(name for name, n in counts.items() if n > 1)
        ranks = [log.rank for log in report.logs]
        by_rank = len(ranks) > 1 and None not in ranks and len(set(ranks)) == len(ranks)
        labels = {log_label(name) for name in counts}
        short = len(labels) == len(counts) and not labels & (set(counts) - labels)
        return cls(len(report.logs) > 1, shared, by_rank and not shared, short)

    def __call__(self, c: Compile) -> str:
        by_rank = rank_ref(c) if self.by_rank else None
        return by_rank or compile_ref(c, self.many, c.log in self.shared, self.short)

    def named(self, log: str, pid: int | None, rank: int | None, key: str) -> str:
        """The compile KEY of a log (its process and rank given), named as `__call__` names it."""
        if self.by_rank and rank is not None:
            return f"rank{rank}:{key}"
        if not self.many:
            return key
        by_pid = log in self.shared and pid is not None
        return f"{log}:pid{pid}:{key}" if by_pid else f"{log}:{key}"


def describer_marks(inputs: list[Input]) -> dict[int, str]:
    """` [describer N]` for each input (by id) whose source an earlier fake mode of the compile
    named too (several exports outside any compile, `-/-`): as `tlview inputs` names them."""
    first: dict[str, int] = {}
    out: dict[int, str] = {}
    for i in inputs:
        if first.setdefault(i.source, i.describer) != i.describer:
            out[id(i)] = f" [describer {i.describer}]"
    return out


_BRACKETED = re.compile(r"\[([^\[\]]+)\]((?:#[0-9]+)?)")
_RANK = re.compile(r"\[(rank[0-9]+)\]")


def plain_ref(ref: str) -> str:
    """A --compile-id as tlview names compiles: `[0/1]` and `[0/1_1]`, as torch's messages and
    tlparse write an id, are `0/1` and `0/1_1`; `[rank3]:[0/1]` is `rank3:0/1`."""
    if "[" not in ref:
        return ref
    prefix, sep, key = ref.strip().rpartition(":")
    m = _BRACKETED.fullmatch(key)
    if m is not None:
        key = m.group(1).strip() + m.group(2)
    r = _RANK.fullmatch(prefix)
    return (r.group(1) if r else prefix) + sep + key


def is_named(c: Compile, ref: str) -> bool:
    """Whether a --compile-id REF names this compile: by its id, as LOG:ID, LOG:pidN:ID, or
    rankN:ID (a job's logs, one per rank); an id in brackets as torch writes it too."""
    ref = plain_ref(ref)
    if ref == c.key or ref == rank_ref(c):
        return True
    return any(
        ref == compile_ref(c, True, pid, short) for pid in (False, True) for short in (False, True)
    )


def no_compile(report: Report, ref: str) -> str:
    """The error for a --compile-id that names no compile: the ids there are, and with several
    logs how to name one of them."""
    known = ", ".join(sorted({c.key for c in report.attempts})[:12])
    if len(report.logs) < 2:
        return f"{report.path}: no compile {ref!r}; the log has: {known}"
    c = next((c for c in report.attempts if c.id is not None), None)
    how = "LOG:ID"
    if c is not None:
        by_rank = rank_ref(c)
        how += f" ({compile_ref(c, True)}" + (f" or {by_rank})" if by_rank else ")")
    return f"{report.path}: no compile {ref!r}; its {len(report.logs)} logs have: {known}; name one as {how}"


def check_named(report: Report, ref: str) -> None:
    """Stop with a usage error when --compile-id REF names no compile of the report."""
    ref = plain_ref(ref)
    if not any(is_named(c, ref) for c in report.attempts):
        raise TlviewError(no_compile(report, ref), EXIT_USAGE)


def picker(ref: str | None) -> Callable[[Compile], bool] | None:
    """Whether a compile is the one --compile-id REF names (None: every compile is)."""
    if ref is None:
        return None
    plain = plain_ref(ref)
    return lambda c: is_named(c, plain)


def find_compile(report: Report, compile_id: str) -> Compile:
    """A compile by torch's id string, or `LOG:ID` when the report holds several logs."""
    compile_id = plain_ref(compile_id)
    hits = [c for c in report.attempts if is_named(c, compile_id)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise TlviewError(no_compile(report, compile_id), EXIT_USAGE)
    refs = Refs.of(report)
    logs = ", ".join(command(refs(c)) for c in hits[:6])  # as a shell takes each
    raise TlviewError(
        f"{report.path}: compile {compile_id!r} is in several logs; use {logs}", EXIT_USAGE
    )


def compiles_with_inputs(report: Report, compile_id: str | None = None) -> Iterator[Compile]:
    """The compiles to rebuild: one by id, or every compile that described inputs."""
    if compile_id is not None:
        yield find_compile(report, compile_id)
        return
    for c in report.attempts:
        if c.inputs or c.input_sets:
            yield c


GRAPH_KIND = "dynamo_output_graph"


def views(c: Compile) -> list[Compile]:
    """One compile per dynamo graph it holds: each view keeps the inputs described before its
    graph. (A program that resets dynamo reuses compile ids, but the index gives each run its own
    compiles, `0/1@2`; two graphs under one compile are rarer still.)
    """
    found = [g for g in c.graphs if g.kind == GRAPH_KIND]
    if len(found) <= 1:
        return [c] if found else []
    out: list[Compile] = []
    prev = 0
    for g in found:
        sets = [s for s in c.input_sets if prev < _first_line(s) < g.line]
        describers = {s.describer for s in sets}
        inputs = [i for i in c.inputs if i.describer in describers]
        out.append(dataclasses.replace(c, graphs=[g], input_sets=sets, inputs=inputs))
        prev = g.line
    return out


def _first_line(s: InputSet) -> int:
    lines = [t.line for t in s.tensors.values()] + [st.line for st in s.storages.values()]
    return min(lines, default=0)


def _in_log(c: Compile, prefix: str) -> bool:
    """Whether LOG (or LOG:pidN) of a LOG:ID names c's log (or process); "" names any."""
    return not prefix or any(
        prefix == log_ref(c, pid, short) for pid in (False, True) for short in (False, True)
    )


def graphs(report: Report) -> list[tuple[str, Compile]]:
    """Every graph dynamo captured, named as the report names compiles (`ID#2`: the second graph
    filed under one id)."""
    refs = Refs.of(report)
    out = []
    for c in report.attempts:
        ref = refs(c)
        for n, v in enumerate(views(c)):
            out.append((ref if n == 0 else f"{ref}#{n + 1}", v))
    return out


def _as_named(report: Report, ref: str) -> str:
    """A --compile-id as the report names its graphs: out of brackets, and LOG:ID by the log's
    label when that is how the report names a log."""
    ref = plain_ref(ref)
    return log_label(ref) if Refs.of(report).short else ref


def select(report: Report, compile_id: str) -> tuple[str, Compile, str | None]:
    """The graph the user named (`ID`, `LOG:ID`, `ID#N`), or the attempt of that compile that
    holds a graph, with a note saying so."""
    compile_id = _as_named(report, compile_id)
    found = graphs(report)
    hits = _named_graphs(report, found, compile_id)
    if len(hits) == 1:
        return hits[0][0], hits[0][1], None
    prefix, _, key = compile_id.rpartition(":")
    base, _, nth = key.partition("#")  # ID#N: the Nth graph filed under the compile
    known = ", ".join(r for r, _ in found[:12]) or "none"
    have = [c for c in report.attempts if c.key == base and _in_log(c, prefix)]
    if have and base == "-/-":
        raise TlviewError(
            f"{report.path}: no graph outside any compile ({GRAPH_KIND} records come with a "
            f"compile id); the log's graphs: {known}",
            EXIT_NO_REPRO,
        )
    later = _later_attempt(report, found, compile_id)
    if later is not None:
        r, v = later
        return r, v, f"compile {base} was restarted; its graph is in attempt {r}"
    if not have or nth:  # no such compile, or no such graph of it
        what = "graph" if have else "compile"
        raise TlviewError(
            f"{report.path}: no {what} {compile_id!r}; the log's graphs: {known}", EXIT_USAGE
        )
    # The compile is there, with no graph (it failed, or compiled autograd's outer id): it
    # gives no repro, as a graph skipped by --all does.
    raise TlviewError(
        f"{report.path}: no graph for compile {compile_id!r} (status {have[0].status}, no "
        f"{GRAPH_KIND} record); the log's graphs: {known}",
        EXIT_NO_REPRO,
    )


def _named_graphs(
    report: Report, found: list[tuple[str, Compile]], compile_id: str
) -> list[tuple[str, Compile]]:
    """The graphs named exactly COMPILE_ID (at most one: a name in several logs is refused)."""
    names = {log.name for log in report.logs}
    prefix, _, key = compile_id.rpartition(":")
    if len(names) == 1 and prefix in names | {log_label(n) for n in names}:
        compile_id = key  # LOG:ID of the only log: the ID, as `report` and `inputs` take it
    hits = [(r, v) for r, v in found if r == compile_id or r.endswith(f":{compile_id}")]
    if len(hits) > 1:
        listed = ", ".join(command(r) for r, _ in hits[:6])
        raise TlviewError(
            f"{report.path}: {compile_id!r} is in several logs; use {listed}", EXIT_USAGE
        )
    return hits


def _later_attempt(
    report: Report, found: list[tuple[str, Compile]], compile_id: str
) -> tuple[str, Compile] | None:
    """The graph of the last attempt after the one named (it restarted), or None."""
    prefix, _, key = compile_id.rpartition(":")
    base, _, nth = key.partition("#")
    try:
        wanted = CompileId.parse(base)
    except ValueError:
        raise TlviewError(
            f"{report.path}: {compile_id!r} is not a compile id (like 0/1 or LOG:0/1)", EXIT_USAGE
        ) from None
    refs = Refs.of(report)
    suffix = f"#{nth}" if nth else ""
    for r, v in reversed(found):
        own = refs(v)  # the graph's compile, as refs name it
        if v.id is None or v.id.base != wanted.base or v.id.attempt <= wanted.attempt:
            continue
        if _in_log(v, prefix) and r[len(own) :] == suffix:
            return r, v
    return None


def artifact_name(kind: str, nth: int) -> str:
    """The name of the NTH payload of KIND in its compile: KIND for the first, `KIND#N` after;
    a kind that itself ends in `#digits` or in a graph's role (a log's artifact may be named
    so) always takes its `#N`, so that no name the log gives can stand for another's."""
    plain = nth == 1 and not _NTH.search(kind) and not _ROLE.search(kind)
    return kind if plain else f"{kind}#{nth}"


_NTH = re.compile(r"#[0-9]+\Z")
_ROLE = re.compile(r" \((forward|backward|inference)\)\Z")
# What inductor writes once for each graph it compiles: a compile's forward graph, then its
# backward (at the first backward call); or its one inference graph.
PER_GRAPH = frozenset(
    {
        "fx_graph_runnable",
        "before_post_grad_graph",
        "after_post_grad_graph",
        "inductor_post_grad_graph",
        "inductor_output_code",
        "inductor_provenance_tracking_node_mappings",
        "inductor_provenance_tracking_kernel_stack_traces",
        "fx_graph_cache_hit",
        "fx_graph_cache_miss",
        "fx_graph_cache_bypass",
    }
)


def artifact_roles(c: Compile) -> dict[int, str]:
    """Which graph each of inductor's per-graph artifacts of a compile is of, by log line:
    forward and backward when it compiled both (two of the kind, in that order), inference
    when AOT traced no backward; none where the count leaves it open."""
    kinds = {g.kind for g in c.graphs}
    if "aot_inference_graph" in kinds:
        roles: tuple[str, ...] = ("inference",)
    elif "aot_backward_graph" in kinds:
        roles = ("forward", "backward")
    else:
        return {}
    lines: dict[str, list[int]] = {}
    for p in c.payloads():
        if p.kind in PER_GRAPH:
            lines.setdefault(p.kind, []).append(p.line)
    out: dict[int, str] = {}
    for found in lines.values():
        if len(found) == len(roles):
            out.update(zip(sorted(found), roles, strict=True))
    return out


def listed_artifacts(c: Compile) -> list[tuple[str, Payload]]:
    """A compile's artifacts by the names `tlview show` lists: `artifact_names`', with the graph
    an artifact of inductor's is of (`inductor_output_code#2 (backward)`)."""
    roles = artifact_roles(c)
    return [
        (n + (f" ({roles[p.line]})" if p.line in roles else ""), p) for n, p in artifact_names(c)
    ]


def artifact_position(name: str) -> tuple[str, int]:
    """The kind and position (1 for the first) an artifact's name stands for: the inverse of
    `artifact_name`, whatever the kinds a log holds."""
    m = _NTH.search(name)
    if m is None:
        return name, 1
    digits = name[m.start() + 1 :]
    return name[: m.start()], int(digits) if len(digits) <= 19 else 0


def artifact_names(
    c: Compile, kinds: Callable[[str], bool] | None = None
) -> list[tuple[str, Payload]]:
    """A compile's payloads in log order, each named by its kind (the artifact's name, the
    record's kind), the second and later of one kind `KIND#2`, `KIND#3`, ...; with `kinds`,
    only the payloads of the kinds it takes (a name counts its own kind alone, so each is the
    same)."""
    seen: Counter[str] = Counter()
    out = []
    payloads = c.payloads() if kinds is None else (p for p in c.payloads() if kinds(p.kind))
    for p in sorted(payloads, key=lambda p: p.line):
        seen[p.kind] += 1
        out.append((artifact_name(p.kind, seen[p.kind]), p))
    return out


def artifact_kind(name: str) -> str:
    """The kind an artifact's name (`KIND`, `KIND#N`, `KIND (ROLE)`) stands for."""
    return artifact_position(_without_role(name)[0])[0]


def _without_role(name: str) -> tuple[str, str | None]:
    """NAME without its graph's role (` (backward)`), and the role."""
    m = _ROLE.search(name)
    return (name, None) if m is None else (name[: m.start()], m.group(1))


def _named_artifact(
    named: list[tuple[str, Payload]], roles: dict[int, str], name: str
) -> tuple[str, Payload] | None:
    """The artifact NAME names by its kind and position (`KIND#N`), its graph (`KIND (ROLE)`)
    or both, of a compile's NAMED artifacts; None when none, or when they disagree."""
    base, role = _without_role(name)
    kind, nth = artifact_position(base)
    found = [(n, p) for n, p in named if p.kind == kind]
    if role is not None and not _NTH.search(base):  # by its role alone
        found = [(n, p) for n, p in found if roles.get(p.line) == role]
        nth = 1
    if not 1 <= nth <= len(found):
        return None
    hit = found[nth - 1]
    return hit if role is None or roles.get(hit[1].line) == role else None


def find_artifact(report: Report, c: Compile, name: str) -> tuple[str, Payload]:
    """The artifact of a compile that NAME names, found by its kind and position, by the graph
    it is of (`KIND (backward)`) or by its region (`KIND[SUBGRAPH]`), never by a name a log
    could give another payload; a usage error listing its names otherwise."""
    named = listed_artifacts(c)
    hit = _named_artifact(named, artifact_roles(c), name) or _in_region(named, name)
    if hit is not None:
        return hit
    raise TlviewError(
        f"{report.path}: compile {c.key} has no artifact {name!r}; it has: {_have(named)}",
        EXIT_USAGE,
    )


def _have(named: list[tuple[str, Payload]]) -> str:
    """A compile's artifact names for an error, the first 40, and the regions NAME[SUBGRAPH]
    takes."""
    have = ", ".join(n for n, _ in named[:40]) or "none"
    if len(named) > 40:
        have += f" (and {len(named) - 40} more)"
    regions = sorted({p.subgraph for _, p in named if p.subgraph is not None})
    if regions:
        have += f"; its subgraphs: {', '.join(regions[:20])}"
    return have


# `NAME[SUBGRAPH]`: an artifact of one region of regional inductor (its `subgraph_name`).
_REGION = re.compile(r"(?s)(.+)\[([^\[\]]+)\]")


def split_region(name: str) -> tuple[str, str | None]:
    """`NAME[SUBGRAPH]` as the name and its region; any other name as itself and None."""
    m = _REGION.fullmatch(name)
    return (m.group(1), m.group(2)) if m else (name, None)


def _in_region(named: list[tuple[str, Payload]], name: str) -> tuple[str, Payload] | None:
    """The artifact `KIND[SUBGRAPH]` (`KIND#N[SUBGRAPH]`) names: the Nth of that kind among
    those of that region; None when the name has no region or the region no such artifact."""
    base, region = split_region(name)
    if region is None:
        return None
    kind, nth = artifact_position(base)
    found = [(n, p) for n, p in named if p.kind == kind and p.subgraph == region]
    return found[nth - 1] if 1 <= nth <= len(found) else None


# -- the processes of a job ------------------------------------------------------------------
def process_name(rank: int, n: int) -> str:
    """The name of a rank's Nth log: `rank3`, then `rank3#2`, `rank3#3`."""
    return f"rank{rank}" if n == 1 else f"rank{rank}#{n}"


def names_text(names: Iterable[str]) -> str:
    """Process names as short text: `0-6, 8-1023` for first logs, `1#2` for a rank's second."""
    plain: list[int] = []
    other: list[str] = []
    for name in names:
        tail = name.removeprefix("rank")
        rank = number(tail)
        if rank is not None and rank >= 0:
            plain.append(rank)
        else:
            other.append(tail)
    return ", ".join(([rank_ranges(plain)] if plain else []) + other)


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
