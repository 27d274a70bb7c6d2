"""vLLM's compiles in a log: each compile call (its `prefix`) with its config, split graph and
pieces, each piece per compile range or size with its artifacts, time and cache outcomes; and
the calls of a tensor-parallel job's ranks side by side.

vLLM logs a piece's records after its `vllm_piecewise_compile_start`, either without a compile
id (it compiled them at run time, before its PR #35472) or under the frame's id (since): so a
piece's artifacts are the records after its start, up to the next start, config or compile
event, that are filed under the same compile as the start (docs/vllm.md).

A report imports this module only for a log that holds vLLM's records: vllm_records.py gathers
them as the compiles go past."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tlview.analyze.names import Refs
from tlview.analyze.passes import pass_step
from tlview.analyze.vllm_records import (
    CONFIG,
    EVENT,
    FRAME_KINDS,
    SPLIT,
    START,
    Gather,
    Item,
    LogRef,
    is_vllm,
)
from tlview.model import Compile, LogIndex, Payload, Report

_PIECE_GRAPH = re.compile(r"vllm_(?:submod|subgraph)_\w+")
_CACHE = re.compile(r"(?P<cache>.+)_cache_(?P<outcome>hit|miss|bypass)")
_INDUCTOR_S = re.compile(r"\binductor (\d+(?:\.\d+)?) s\b")  # index/metrics.py's runtime words
_LISTS = ("custom_ops", "splitting_ops", "compile_sizes", "inductor_passes", "enabled_passes")
_KNOWN = (
    *_LISTS,
    "model",
    "prefix",
    "mode",
    "backend",
    "cudagraph_mode",
    "compile_ranges_split_points",
    "compile_ranges_endpoints",
    "use_inductor_graph_partition",
    "dynamic_shapes_type",
    "dynamic_shapes_evaluate_guards",
    "time",
)


@dataclass(frozen=True, slots=True)
class VllmConfig:
    """A compile call's `vllm_compilation_config`, its lists split (vLLM joins them with ", ")."""

    line: int
    model: str | None = None
    prefix: str | None = None
    mode: str | None = None
    backend: str | None = None
    cudagraph_mode: str | None = None
    custom_ops: list[str] = field(default_factory=list)
    splitting_ops: list[str] = field(default_factory=list)
    compile_sizes: list[str] = field(default_factory=list)
    # compile_ranges_split_points, named compile_ranges_endpoints in newer vLLM
    compile_ranges: list[str] = field(default_factory=list)
    inductor_passes: list[str] = field(default_factory=list)
    enabled_passes: list[str] = field(default_factory=list)
    use_inductor_graph_partition: bool | None = None
    dynamic_shapes_type: str | None = None
    dynamic_shapes_evaluate_guards: bool | None = None
    other: dict[str, Any] = field(default_factory=dict)  # keys a later vLLM adds, as logged

    def same(self, other: VllmConfig) -> bool:
        """Whether two calls (or two ranks) were configured alike, wherever they were logged."""
        mine = {k: v for k, v in _fields(self).items() if k != "line"}
        return mine == {k: v for k, v in _fields(other).items() if k != "line"}


def _fields(c: VllmConfig) -> dict[str, Any]:
    return {name: getattr(c, name) for name in VllmConfig.__slots__}


def config_of(p: Payload) -> VllmConfig:
    """The config a `vllm_compilation_config` payload's meta holds (index/vllm.py read it)."""
    m = p.meta or {}
    lists = {k: split_list(m.get(k)) for k in _LISTS}
    ranges = m.get("compile_ranges_endpoints", m.get("compile_ranges_split_points"))
    return VllmConfig(
        p.line,
        _str(m.get("model")),
        _str(m.get("prefix")),
        _str(m.get("mode")),
        _str(m.get("backend")),
        _str(m.get("cudagraph_mode")),
        compile_ranges=split_list(ranges),
        use_inductor_graph_partition=_bool(m.get("use_inductor_graph_partition")),
        dynamic_shapes_type=_str(m.get("dynamic_shapes_type")),
        dynamic_shapes_evaluate_guards=_bool(m.get("dynamic_shapes_evaluate_guards")),
        other={k: v for k, v in m.items() if k not in _KNOWN},
        **lists,
    )


# A config's fields as every format names them, in the order they are shown.
_SHOWN = (
    ("model", "model"),
    ("mode", "mode"),
    ("backend", "backend"),
    ("cudagraph_mode", "cudagraph mode"),
    ("compile_sizes", "compile sizes"),
    ("compile_ranges", "compile ranges"),
    ("splitting_ops", "splitting ops"),
    ("custom_ops", "custom ops"),
    ("inductor_passes", "inductor passes"),
    ("enabled_passes", "enabled passes"),
    ("use_inductor_graph_partition", "graph partition"),
    ("dynamic_shapes_type", "dynamic shapes"),
)


def config_facts(c: VllmConfig) -> list[tuple[str, list[str]]]:
    """A config's fields that were logged, by the names every format shows them by; a list
    as its items, any other value as one."""
    out: list[tuple[str, list[str]]] = []
    for attr, label in _SHOWN:
        v = getattr(c, attr)
        if isinstance(v, list):
            if v:
                out.append((label, v))
        elif v is not None:
            out.append((label, [str(v).lower() if isinstance(v, bool) else v]))
    out += [(str(k), [str(v)]) for k, v in c.other.items()]
    return out


def split_list(v: Any) -> list[str]:
    """vLLM's `", ".join(...)` of a list back as the list; "" and None as none."""
    if not isinstance(v, str) or not v.strip():
        return []
    return [x.strip() for x in v.split(",") if x.strip()]


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


@dataclass(slots=True)
class VllmPiece:
    """One piece compiled for one compile range or size, and the records that compile left."""

    submod: str  # `submod_N` (N counts every split piece), else `subgraph_<index>`
    line: int  # its vllm_piecewise_compile_start
    compile: str  # the compile its records are filed under (`-/-`: none)
    index: int | None = None  # its place among the compiled pieces
    total: int | None = None  # compiled pieces of the call
    start: int | None = None
    end: int | None = None
    single_size: bool = False
    capture_size: bool = False  # its size is one of the config's compile_sizes
    graph: str | None = None  # the artifact name of its `vllm_submod_N` graph
    artifacts: list[tuple[str, Payload]] = field(default_factory=list)
    cache: dict[str, str] = field(default_factory=dict)  # cache -> hit | miss | bypass
    seconds: float | None = None
    seconds_from: str | None = None  # "inductor" (its metrics) or "log times"
    time: str | None = None  # its start's log time
    ref: str | None = None  # its compile as the report names it (`rank1:-/-`), for `tlview show`

    @property
    def label(self) -> str:
        """`size 8` or `range [1, 16]`, as vLLM's compile ranges are named."""
        if self.start is None or self.end is None:
            return "range ?"
        if self.single_size or self.start == self.end:
            return f"size {self.start}"
        return f"range [{self.start}, {self.end}]"

    @property
    def pass_graphs(self) -> list[str]:
        """The names of the graphs each post-grad pass left in this piece's compile."""
        return [n for n, p in self.artifacts if (s := pass_step(n, p)) and s.role == "pass"]


@dataclass(slots=True)
class RangeGroup:
    """The pieces compiled for one range or size, in the order they were."""

    label: str
    pieces: list[VllmPiece] = field(default_factory=list)

    @property
    def capture_size(self) -> bool:
        return any(p.capture_size for p in self.pieces)


@dataclass(slots=True)
class VllmCall:
    """One compile call of vLLM (one VllmBackend): a compiled component such as `backbone`."""

    index: int  # its place among the log's calls
    log: str
    line: int  # its first record (its compile event, else its config)
    rank: int | None = None
    time: str | None = None  # its first record's log time
    event: str | None = None  # its vllm_compile_event: aot_cache_hit | fresh_compile
    config: VllmConfig | None = None
    compile: str | None = None  # the frame's compile, where its config is
    ref: str | None = None  # that compile as the report names it (`rank1:0/0`)
    split_graph: str | None = None
    patterns: list[str] = field(default_factory=list)  # vllm_patterns.<Pass> artifacts
    frame: list[str] = field(default_factory=list)  # the frame's dynamo artifacts
    other: list[str] = field(default_factory=list)  # its frame's other artifacts, before pieces
    pieces: list[VllmPiece] = field(default_factory=list)

    @property
    def prefix(self) -> str | None:
        return self.config.prefix if self.config else None

    @property
    def cache_hit(self) -> bool:
        return self.event == "aot_cache_hit"

    @property
    def submods(self) -> list[str]:
        """Its compiled pieces, each once, in the order they first compiled."""
        return list(dict.fromkeys(p.submod for p in self.pieces))

    @property
    def seconds(self) -> float | None:
        got = [p.seconds for p in self.pieces if p.seconds is not None]
        return sum(got) if got else None

    @property
    def compiles(self) -> int:
        """Its piece compiles, over every range and size."""
        return len(self.pieces)

    @property
    def hits(self) -> int:
        """Its piece compiles that were FX graph cache hits."""
        return sum(1 for p in self.pieces if p.cache.get("fx_graph") == "hit")

    def by_range(self) -> list[RangeGroup]:
        """Its pieces by range or size, each range where it first compiled (tlparse's order)."""
        groups: dict[str, RangeGroup] = {}
        for p in self.pieces:
            groups.setdefault(p.label, RangeGroup(p.label)).pieces.append(p)
        return list(groups.values())


def calls_of(gather: Gather, log: LogRef, refs: Refs | None = None) -> list[VllmCall]:
    """The log's calls from what GATHER took of its compiles, in log order ([] when vLLM wrote
    nothing into it); REFS names the compiles of their pieces as the report does (else by their
    keys)."""
    found = gather.logs.get((log.name, log.pid))
    if found is None:
        return []
    walk = _Walk(log)
    for it in sorted(found.items, key=lambda i: i.line):
        walk.add(it)
    for call in walk.calls:
        _fill_graphs(call)
        if call.compile is not None:
            call.frame = found.frames.get(call.compile, [])
    _fill_seconds(walk.calls, found.ends)
    for call in walk.calls:
        _name(call, log, refs)
    return walk.calls


def vllm_report(gather: Gather, logs: list[LogRef], refs: Refs | None = None) -> VllmReport | None:
    """Every log's calls, log by log, and a job's ranks side by side; None without any."""
    per_log = [(log, calls_of(gather, log, refs)) for log in logs]
    per_log = [(log, calls) for log, calls in per_log if calls]
    if not per_log:
        return None
    calls = [call for _, calls in per_log for call in calls]
    return VllmReport(calls, rank_rows(per_log) if len(per_log) > 1 else [])


class _Walk:
    """The log's calls as its records go past (one pass, in log order)."""

    def __init__(self, log: LogRef) -> None:
        self.log = log
        self.calls: list[VllmCall] = []
        self.call: VllmCall | None = None
        self.piece: VllmPiece | None = None

    def new_call(self, it: Item) -> VllmCall:
        time = _str((it.payload.meta or {}).get("time")) if it.payload else None
        self.call = VllmCall(len(self.calls), self.log.name, it.line, self.log.rank, time)
        self.calls.append(self.call)
        self.piece = None
        return self.call

    def add(self, it: Item) -> None:
        kind = it.kind
        if kind == EVENT:
            self.new_call(it).event = _str(
                (it.payload.meta or {}).get("type") if it.payload else None
            )
        elif kind == CONFIG:
            self.on_config(it)
        elif kind == START:
            self.on_start(it)
        elif self.piece is not None and it.compile == self.piece.compile:
            self.to_piece(self.piece, it)
        elif self.call is not None and it.compile == self.call.compile:
            self.to_call(self.call, it)

    def on_config(self, it: Item) -> None:
        """A config opens a call, unless it is the one its compile event announced."""
        call = self.call
        if call is None or call.config is not None or call.pieces or call.compile is not None:
            call = self.new_call(it)
        assert it.payload is not None
        call.config = config_of(it.payload)
        call.compile = it.compile
        self.piece = None

    def on_start(self, it: Item) -> None:
        call = self.call or self.new_call(it)
        assert it.payload is not None
        self.piece = _piece(it.payload, it.compile)
        call.pieces.append(self.piece)

    def to_piece(self, piece: VllmPiece, it: Item) -> None:
        if it.event is not None:
            m = _INDUCTOR_S.search(it.event.summary)
            if m and piece.seconds is None:
                piece.seconds, piece.seconds_from = float(m.group(1)), "inductor"
            return
        assert it.payload is not None and it.name is not None
        if FRAME_KINDS.fullmatch(it.kind):
            return  # the frame's own (vllm_calls lists them with its call)
        piece.artifacts.append((it.name, it.payload))
        if _PIECE_GRAPH.fullmatch(it.kind):
            piece.graph = it.name
        m = _CACHE.fullmatch(it.kind)
        if m:
            piece.cache[m.group("cache")] = m.group("outcome")

    def to_call(self, call: VllmCall, it: Item) -> None:
        if it.name is None:
            return
        if it.kind == SPLIT:
            call.split_graph = it.name
        elif it.kind.startswith("vllm_patterns."):
            call.patterns.append(it.name)
        elif not FRAME_KINDS.fullmatch(it.kind):
            call.other.append(it.name)


def _piece(p: Payload, compile_key: str) -> VllmPiece:
    m = p.meta or {}
    index = m.get("piecewise_index")
    name = m.get("submod_name")
    return VllmPiece(
        name if isinstance(name, str) else f"subgraph_{index if index is not None else '?'}",
        p.line,
        compile_key,
        index,
        m.get("total_piecewise_compiles"),
        m.get("compile_range_start"),
        m.get("compile_range_end"),
        bool(m.get("is_single_size")),
        bool(m.get("is_cudagraph_capture_size")),
        time=_str(m.get("time")),
    )


def _name(call: VllmCall, log: LogRef, refs: Refs | None) -> None:
    """The call's compile and its pieces' as the report names them (by key without REFS)."""

    def named(key: str) -> str:
        return key if refs is None else refs.named(log.name, log.pid, log.rank, key)

    call.ref = None if call.compile is None else named(call.compile)
    for p in call.pieces:
        p.ref = named(p.compile)


def vllm_calls(log: LogIndex) -> list[VllmCall]:
    """The vLLM compile calls of one log (one process, one rank), in log order; [] for a log
    vLLM wrote nothing into. Its compiles are read once, one at a time."""
    gather = Gather()
    for c in log.compiles:
        gather.add(c)
    return calls_of(gather, LogRef.of(log))


def _fill_graphs(call: VllmCall) -> None:
    """A piece's graph is logged with its first range only: later ranges name that one."""
    seen: dict[str, str] = {}
    for p in call.pieces:
        if p.graph is not None:
            seen.setdefault(p.submod, p.graph)
        else:
            p.graph = seen.get(p.submod)


def _fill_seconds(calls: list[VllmCall], ends: dict[str, str | None]) -> None:
    """A piece without inductor's own figure (compiled in the frame's compile) takes the log
    time from its start to the next start, config or event, else (the last piece, with records
    of its own) to its compile's last record."""
    starts = [p for call in calls for p in call.pieces]
    marks = sorted((c.line, c.time) for c in calls)
    for k, p in enumerate(starts):
        if p.seconds is not None or p.time is None:
            continue
        end = _next_time(p, starts[k + 1 :], marks)
        if end is None and p.artifacts:  # the last piece: to the end of its compile's records
            end = ends.get(p.compile)
        got = seconds_between(p.time, end)
        if got is not None:
            p.seconds, p.seconds_from = got, "log times"


def _next_time(
    piece: VllmPiece, later: list[VllmPiece], marks: list[tuple[int, str | None]]
) -> str | None:
    """The log time of the next boundary after a piece's start: a later start, else a later
    call's first record."""
    nxt = later[0] if later else None
    call_line = next((line for line, _ in marks if line > piece.line), None)
    if nxt is not None and (call_line is None or nxt.line < call_line):
        return nxt.time
    return next((t for line, t in marks if line > piece.line and t), None)


_STAMP = "%m%d %H:%M:%S.%f"


def seconds_between(a: str | None, b: str | None) -> float | None:
    """Seconds from one log time (`MMDD HH:MM:SS.ffffff`) to a later one; None if either is
    not one, or b is before a."""
    if a is None or b is None:
        return None
    try:
        t0 = datetime.strptime(f"2000{a}", f"%Y{_STAMP}")
        t1 = datetime.strptime(f"2000{b}", f"%Y{_STAMP}")
    except ValueError:
        return None
    d = (t1 - t0).total_seconds()
    return d if d >= 0 else None


@dataclass(slots=True)
class RankCell:
    """One rank's figures for one call."""

    rank: int | None
    log: str
    pieces: int
    compiles: int  # piece compiles, over every range and size
    hits: int  # of those, FX graph cache hits
    seconds: float | None
    config: VllmConfig | None


@dataclass(slots=True)
class RankRow:
    """One call (by its place and prefix) across the ranks of a job, and what differs."""

    index: int
    prefix: str | None
    cells: list[RankCell] = field(default_factory=list)

    @property
    def differs(self) -> list[str]:
        """Which of pieces, compiles, cache hits and config differ between the ranks."""
        out = [
            what
            for what in ("pieces", "compiles", "hits")
            if len({getattr(c, what) for c in self.cells}) > 1
        ]
        configs = [c.config for c in self.cells if c.config is not None]
        if any(not configs[0].same(x) for x in configs[1:]):
            out.append("config")
        return out


def by_rank(report: Report) -> list[RankRow]:
    """Each call across the logs of a job (one per rank), side by side, by rank."""
    return rank_rows([(LogRef.of(log), vllm_calls(log)) for log in report.logs])


def rank_rows(per_log: list[tuple[LogRef, list[VllmCall]]]) -> list[RankRow]:
    """Each call (by its place and prefix) across logs, each log's calls given, by rank."""
    rows: dict[tuple[int, str | None], RankRow] = {}
    ordered = sorted(per_log, key=lambda x: (x[0].rank is None, x[0].rank or 0, x[0].name))
    for log, calls in ordered:
        for call in calls:
            row = rows.setdefault((call.index, call.prefix), RankRow(call.index, call.prefix))
            row.cells.append(_cell(log, call))
    return list(rows.values())


def _cell(log: LogRef, call: VllmCall) -> RankCell:
    return RankCell(
        log.rank, log.name, len(call.submods), call.compiles, call.hits, call.seconds, call.config
    )


@dataclass(slots=True)
class VllmReport:
    """vLLM's compile calls in a report: every log's, log by log; and, for a job of several
    logs with calls, each call across them (`ranks`)."""

    calls: list[VllmCall]
    ranks: list[RankRow]

    @property
    def compiles(self) -> int:
        return sum(c.compiles for c in self.calls)

    @property
    def hits(self) -> int:
        return sum(c.hits for c in self.calls)

    def distinct(self) -> list[VllmCall]:
        """The calls a report shows in full: every call of a single log; of a job, the first
        log's, and another rank's call only where the ranks differ in it."""
        if not self.ranks:
            return self.calls
        first = (self.calls[0].log, self.calls[0].rank)
        differ = {(r.index, r.prefix) for r in self.ranks if r.differs}
        return [c for c in self.calls if (c.log, c.rank) == first or (c.index, c.prefix) in differ]


def all_calls(report: Report) -> Iterator[VllmCall]:
    """Every call of every log of the report, log by log."""
    for log in report.logs:
        yield from vllm_calls(log)


def pieces_by_artifact(report: Report, c: Compile) -> dict[str, tuple[VllmCall, VllmPiece]]:
    """For each artifact of compile `c` that a vLLM piece compiled, by its name: its call and
    piece (none for a compile without vLLM's records)."""
    log = next((g for g in report.logs if g.name == c.log and g.pid == c.pid), None)
    if log is None or not is_vllm(log):
        return {}
    out: dict[str, tuple[VllmCall, VllmPiece]] = {}
    for call in vllm_calls(log):
        for p in _in_compile(call.pieces, c.key):
            out.update((name, (call, p)) for name, _ in p.artifacts)
    return out


def _in_compile(pieces: list[VllmPiece], key: str) -> list[VllmPiece]:
    return [p for p in pieces if p.compile == key]
