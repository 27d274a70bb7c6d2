"""Typed records passed between the stages: parse -> index -> rebuild / render."""

from __future__ import annotations

import builtins
import operator
import re
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar, get_args

from tlview.counting import Counted
from tlview.reprs import as_id, class_name, device_name

if TYPE_CHECKING:
    from tlview.aside import CodeState, Lined, Loose, RunMetrics, Trouble

Dim = int | str  # a size, stride or offset: an int, or a symbolic expression as logged ("s0", "j1")

_T = TypeVar("_T")


def pickled_by_fields(cls: type[_T]) -> type[_T]:
    """Pickle as the class and its field values: a third faster both ways than a slotted
    dataclass's default, and compiles go to spill files and between processes by the thousand."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    values = operator.attrgetter(*names) if len(names) > 1 else lambda x: (getattr(x, names[0]),)

    def __reduce__(self: Any) -> tuple[type[_T], tuple[Any, ...]]:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls


# A compile's status (docs/statuses.md); mypy checks every status a module writes or compares.
Status = Literal[
    "failed", "incomplete", "graph_break", "restarted", "empty", "traced", "ok", "outside"
]
STATUSES: tuple[Status, ...] = get_args(Status)  # in order of severity
# How bad each status is, lower first: the one order of every table, diff and gate. An export's
# traced graph is as good as a compiled one; records outside any compile are no compile at all.
_SEVERITY: dict[str, int] = {s: i for i, s in enumerate(STATUSES)}
_SEVERITY["ok"] = _SEVERITY["traced"]


def severity(status: str) -> int:
    """How bad a status is (0: failed); a status tlview does not know ranks last."""
    return _SEVERITY.get(status, len(STATUSES))


class CompileId(NamedTuple):
    """A compile as torch names it: frame, recompile, attempt, compiled-autograd id; and which
    run of its process it is in (torch._dynamo.reset() starts the ids over: '0/0@2')."""

    frame: int | None
    frame_compile: int | None
    attempt: int = 0
    autograd: int | None = None
    run: int = 0  # resets of the process before this compile

    def __str__(self) -> str:
        text = self.torch_name
        return f"{text}@{self.run + 1}" if self.run else text

    @property
    def torch_name(self) -> str:
        """The id as torch writes it, without the run."""
        if self.autograd is not None:
            text = f"!{self.autograd}"
            if self.frame is not None:
                text += f"/{self.frame}/{self.frame_compile}"
        else:
            text = f"{self.frame}/{self.frame_compile}"
        return text if not self.attempt else f"{text}_{self.attempt}"

    @property
    def base(self) -> CompileId:
        """The same compile with attempt 0: restarts of one compile share it."""
        return CompileId(self.frame, self.frame_compile, 0, self.autograd, self.run)

    def in_run(self, run: int) -> CompileId:
        return CompileId(self.frame, self.frame_compile, self.attempt, self.autograd, run)

    @property
    def sort_key(self) -> tuple[int, ...]:
        return (
            self.run,
            -1 if self.frame is None else self.frame,
            -1 if self.autograd is None else self.autograd,
            -1 if self.frame_compile is None else self.frame_compile,
            self.attempt,
        )

    @classmethod
    def parse(cls, text: str) -> CompileId:
        """Read torch's string form: '0/0', '0/0_1', '!0/1/0', '!1'; and tlview's run: '0/0@2'."""
        m = _COMPILE_ID.fullmatch(text.strip())
        if not m or m.group(7) == "0":
            raise ValueError(f"not a compile id: {text!r}")
        ag, f1, c1, f2, c2, attempt, run = m.groups()
        if any(len(g) > 18 for g in m.groups() if g):  # past int64: what no writer takes
            raise ValueError(f"not a compile id: {text[:60]!r}: a number over 64 bits")
        frame, fcid = (f1, c1) if ag is not None else (f2, c2)
        return cls(
            None if frame is None else int(frame),
            None if fcid is None else int(fcid),
            int(attempt or 0),
            None if ag is None else int(ag),
            int(run) - 1 if run else 0,
        )


_COMPILE_ID = re.compile(r"(?:!(\d+)(?:/(\d+)/(\d+))?|(\d+)/(\d+))(?:_(\d+))?(?:@(\d+))?", re.ASCII)


class StackFrame(NamedTuple):
    """One frame of a user stack, with its interned file name resolved."""

    file: str
    line: int
    name: str
    loc: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.name}"


class BadLine(NamedTuple):
    """A line tlview could not read, with the reason, so nothing is dropped silently."""

    log: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.log}:{self.line}: {self.reason}"


@pickled_by_fields
@dataclass(slots=True)
class Payload:
    """A record's payload: its size and hash always, its text only when a report keeps it."""

    kind: str  # the record kind, or the artifact name for `artifact` records
    line: int
    bytes: int
    lines: int
    md5: str | None
    ok: bool  # the md5 matched (or there was none to check)
    encoding: str | None = None
    text: str | None = None  # kept text, possibly cut (see `cut`)
    cut: int = 0  # bytes of the payload left out of `text`
    meta: dict[str, Any] | None = None  # small metadata beside the payload (e.g. graph `sizes`)
    masked_md5: str | None = None  # graphs: md5 with device indices and addresses masked (ranks)
    # dynamo's graph: each placeholder of its forward and its annotation, as printed there
    # (`{"L_x_": "f32[s0, 4][4, 1]cpu"}`): the graph's own symbols, kept without its text.
    placeholders: dict[str, str] | None = None
    data: builtins.bytes | None = None  # the exact bytes, whole, when asked for (`tlview show`)
    # the region torch's regional inductor compiled it for (`subgraph_name`, torch 2.13), so
    # two `fx_graph_runnable` of one compile can be told apart
    subgraph: str | None = None
    # False: the md5 was not checked (no report read this payload's bytes; docs/formats.md).
    checked: bool = True

    @property
    def absent(self) -> bool:
        """Torch wrote the record without a payload (see index.kinds.PAYLOAD_OPTIONAL)."""
        return self.md5 is None and self.bytes == 0 and self.lines == 0


@pickled_by_fields
@dataclass(slots=True)
class StorageDesc:
    """A logged `describe_storage`: size in bytes, or a symbolic expression."""

    id: int
    size: int | str | None
    line: int = 0


# Defaults of MetaTensorDesc fields that `as_json` leaves out when equal to them.
TENSOR_DEFAULTS: dict[str, Any] = {
    "layout": "torch.strided",
    "is_inference": False,
    "is_leaf": False,
    "requires_grad": False,
    "is_sparse": False,
    "is_mkldnn": False,
    "is_functorch_wrapped": False,
    "is_batchedtensor": False,
    "is_legacy_batchedtensor": False,
    "is_gradtrackingtensor": False,
    "is_view": False,
    "is_nested": False,
    "is_traceable_wrapper_subclass": False,
    "is_functional": False,
    "is_conj": False,
    "is_neg": False,
    "is_parameter": False,
    "storage_offset": 0,
}


@pickled_by_fields
@dataclass(slots=True)
class TensorDesc:
    """A logged `describe_tensor`: the MetaTensorDesc fields as logged, defaults left out."""

    id: int
    fields: dict[str, Any]
    line: int = 0

    def get(self, name: str) -> Any:
        return self.fields.get(name, TENSOR_DEFAULTS.get(name))

    @property
    def dtype(self) -> str:
        return str(self.fields.get("dtype", "?"))

    @property
    def device(self) -> str:
        return device_name(self.fields.get("device"))

    @property
    def size(self) -> list[Dim] | None:
        v = self.fields.get("size")
        return v if isinstance(v, list) else None

    @property
    def stride(self) -> list[Dim] | None:
        v = self.fields.get("stride")
        return v if isinstance(v, list) else None

    @property
    def storage_offset(self) -> Dim:
        v = self.fields.get("storage_offset", 0)
        return v if isinstance(v, int | str) and not isinstance(v, bool) else 0

    @property
    def storage(self) -> int | None:
        return as_id(self.fields.get("storage"))

    @property
    def base(self) -> int | None:
        return as_id(self.fields.get("base"))

    @property
    def grad(self) -> int | None:
        return as_id(self.fields.get("grad"))

    @property
    def attrs(self) -> dict[str, int]:
        v = self.fields.get("attrs")
        if not isinstance(v, dict):
            return {}
        return {str(k): i for k, i in v.items() if as_id(i) is not None}

    @property
    def type_name(self) -> str | None:
        """The subclass type as a dotted name, from the logged `<class '...'>` repr."""
        return class_name(self.fields.get("type"))

    def flag(self, name: str) -> bool:
        # Every boolean field defaults to False (TENSOR_DEFAULTS).
        return bool(self.fields.get(name))


@pickled_by_fields
@dataclass(slots=True)
class Input:
    """One tensor that went into a compile, with every source that named it."""

    tensor: TensorDesc
    sources: list[str]
    storage: StorageDesc | None
    storage_key: str | None  # equal for two inputs of one compile exactly when they share storage
    describer: int
    alias_group: int | None = None  # 1, 2, ... for storages shared by several inputs
    base: TensorDesc | None = None
    grad: TensorDesc | None = None
    inner: dict[str, TensorDesc] = field(default_factory=dict)
    superseded: bool = False  # described in an attempt that was restarted
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return self.sources[0] if self.sources else f"<tensor {self.tensor.id}>"


@pickled_by_fields
@dataclass(slots=True)
class InputSet:
    """The describe records of one describer (one FakeTensorMode) in one compile attempt."""

    describer: int
    storages: dict[int, StorageDesc] = field(default_factory=dict)
    tensors: dict[int, TensorDesc] = field(default_factory=dict)
    sources: list[tuple[int, str]] = field(default_factory=list)  # (tensor id, source), log order
    superseded: bool = False
    dropped: int = 0  # records beyond the per-log cap, counted not kept
    where: StackFrame | None = None  # user line that fakified them, for records outside a compile


class Symbol(NamedTuple):
    """A symbol the shape env created or specialized, with the user line that caused it."""

    kind: str  # created | unbacked | specialized
    symbol: str
    value: str | None = None
    range: str | None = None
    source: str | None = None
    reason: str | None = None
    where: StackFrame | None = None
    describer: int | None = None  # the fake mode whose tensors were described last before it
    origin: StackFrame | None = None  # its record's stack's user frame (`where`: user_stack's)


class GraphBreak(NamedTuple):
    """A graph break: the reason as torch words it and the user line where it happened."""

    reason: str
    where: str | None  # "file:line" from "Graph break in user code at ..."
    line: int  # log line of the record
    text: str = ""  # the whole logged message, kept short


class CacheEvent(NamedTuple):
    cache: str  # fx_graph, aotautograd, ...
    outcome: str  # hit | miss | bypass
    key: str | None = None
    reason: str | None = None


class Phase(NamedTuple):
    """One compile phase from `chromium_event` begin/end pairs, for the timeline."""

    name: str
    start_us: float
    dur_us: float | None  # None: began and never ended (a crashed run)
    depth: int = 0


@pickled_by_fields
@dataclass(slots=True)
class Event:
    """A record the report shows as it is: guards added, export errors, unknown kinds."""

    kind: str
    line: int
    summary: str
    where: StackFrame | None = None


@pickled_by_fields
@dataclass(slots=True)
class ExportIssue:
    """What export (draft export above all) could not do soundly, as torch.export reports it:
    a data-dependent expression it had to decide, a guard on an input's dynamic dim, a custom
    op's missing or wrong fake kernel."""

    kind: str  # ISSUE_KINDS' values
    line: int
    subject: str  # the expression, or the op
    detail: str  # what was done about it, or why
    where: StackFrame | None = None  # the user's frame that caused it


@pickled_by_fields
@dataclass(slots=True)
class OutsideCompile:
    """A compile torch logged metrics for outside any compile id: AOTInductor's, export's AOT
    step. Dynamo did not start it, so it is no compile of a frame, but its time is compile time."""

    line: int
    seconds: float | None  # its compile time, else from its start to its end
    fail_type: str | None = None
    fail_reason: str | None = None


class InputChange(NamedTuple):
    """One way an input differs from the previous compile of the same frame."""

    source: str
    field: str  # "size[0]", "stride", "dtype", "device", "requires_grad", "added", "removed", ...
    before: Any
    after: Any


@pickled_by_fields
@dataclass(slots=True)
class Recompile:
    """Why a frame compiled again: the guards that failed and what changed in its inputs."""

    previous: str | None  # key of the previous compile of the same frame
    reasons: list[str] = field(default_factory=list)
    input_changes: list[InputChange] = field(default_factory=list)
    limit_hit: bool = False  # the frame reached torch's recompile limit
    compared: bool = False  # both compiles described their inputs, so input_changes is whole


@dataclass(frozen=True, slots=True)
class Divergence:
    """A way some ranks of a job differ from the majority (or are wrong on their own)."""

    kind: str
    ranks: list[int]
    detail: str
    # the processes that differ, as the report names them: `rank1`, or `rank1#2` for the second
    # log that claims rank 1 (each log is a process; two that claim one rank are kept apart)
    processes: list[str] = field(default_factory=list)


# A compile id as torch writes it before a failed guard ("0/1: tensor 'x' ..."): frame and
# compile, compiled autograd's "!0/1/0", an attempt's "_1".
ID_TEXT = r"!?\d+(?:/\d+)+(?:_\d+)?"
# RecompileError (error_on_recompile): "... triggered by the following guard failure(s):" then
# one "- 0/0: tensor 'x' ..." line per failed guard.
_GUARD_IN_ERROR = re.compile(rf"^\s*- ({ID_TEXT}: .+)$", re.M)


def refused_guards(fail_reason: str | None) -> list[str]:
    """The failed guards a recompile torch refused names in its error (none for any other)."""
    return _GUARD_IN_ERROR.findall(fail_reason or "")


# The seconds that compilation_metrics gives, and the microseconds torch logs beside them since
# 2.6 (some versions log only those): the same clock, so either gives the time.
MICROS = {
    "entire_frame_compile_time_s": "dynamo_cumulative_compile_time_us",
    "backend_compile_time_s": "aot_autograd_cumulative_compile_time_us",
    "inductor_compile_time_s": "inductor_cumulative_compile_time_us",
    "code_gen_time_s": "inductor_code_gen_cumulative_compile_time_us",
}


# A compile's time by phase: (name, its metric of `compilation_metrics`), in MICROS' order.
PHASES = tuple(zip(("total", "backend", "inductor", "code_gen"), MICROS, strict=True))


def seconds_of(metrics: dict[str, Any], name: str) -> float | None:
    """A time of compilation_metrics (`name`, in seconds), or its microsecond twin when a torch
    logged only that; None when it has neither."""
    v = metrics.get(name)
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    us = metrics.get(MICROS[name])
    if isinstance(us, int | float) and not isinstance(us, bool):
        return us / 1e6
    return None


@pickled_by_fields
@dataclass(slots=True)
class Provenance:
    """One inductor provenance artifact (INDUCTOR_PROVENANCE=1 or TORCH_COMPILE_DEBUG=1): per
    kernel ("cpp_fused_relu_0:2"), the FX nodes it computes or the user code they came from."""

    line: int
    kind: str  # "nodes" (its cppCodeToPost) or "code" (kernel stack traces)
    by_kernel: dict[str, list[str]]
    # "nodes": each of its maps between pre-grad nodes, post-grad nodes and kernels (preToPost,
    # postToPre, cppCodeToPost, postToCppCode), as logged; for the page's provenance view.
    links: dict[str, dict[str, list[str]]] = field(default_factory=dict)


class Kernel(NamedTuple):
    """A kernel inductor wrote for a graph: the FX nodes it computes, the user code behind them."""

    graph: str  # "forward", "backward", "inference", or "graph N"
    order: int  # its place in the graph's code
    name: str  # "cpp_fused_relu_0", "extern_kernels.addmm"
    nodes: list[str]
    code: list[StackFrame]  # the innermost user frame of each stack torch gave it


@pickled_by_fields
@dataclass(slots=True)
class Compile:
    """Everything the log says about one compile attempt (or about records outside any compile)."""

    id: CompileId | None
    log: str
    pid: int | None = None
    rank: int | None = None
    status: Status = "incomplete"
    first_log_line: int = 0  # the log's lines of its first and last records
    last_log_line: int = 0
    stack: list[StackFrame] = field(default_factory=list)
    function: str | None = None
    file: str | None = None
    source_line: int | None = None  # the function's first line in `file` (co_firstlineno)
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_where: str | None = None
    restart_reasons: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    graphs: list[Payload] = field(default_factory=list)  # graphs and generated code
    artifacts: list[Payload] = field(default_factory=list)  # every other payload
    guards: list[Payload] = field(default_factory=list)  # dynamo_guards, dynamo_cpp_guards_str
    metrics: dict[str, Any] | None = None
    bwd_metrics: list[dict[str, Any]] = field(default_factory=list)
    cache: list[CacheEvent] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    export_issues: list[ExportIssue] = field(default_factory=list)
    outside: list[OutsideCompile] = field(default_factory=list)  # of `-/-`
    provenance: list[Provenance] = field(default_factory=list)  # kernels: see summary.kernels
    phases: list[Phase] = field(default_factory=list)
    input_sets: list[InputSet] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    start: str | None = None  # prefix timestamps "MMDD HH:MM:SS.ffffff"
    end: str | None = None
    events_dropped: int = 0
    recompile: Recompile | None = None  # recompiles: index/recompiles.py (`explain_frame`)
    runtime: list[RunMetrics] = field(default_factory=list)  # tlview.aside: work when it ran,
    troubles: list[Trouble] = field(default_factory=list)  # failures logged as artifacts,
    code_states: list[CodeState] = field(default_factory=list)  # profile-guided code states,
    loose: list[Loose] = field(default_factory=list)  # of `-/-`: records without an id

    @property
    def key(self) -> str:
        """The id as tlparse and torch files it: '-/-' for records outside a compile."""
        return "-/-" if self.id is None else str(self.id)

    @property
    def compile_time_s(self) -> float | None:
        if self.id is None:  # the compiles outside any compile id, added up
            times = [o.seconds for o in self.outside if o.seconds is not None]
            return sum(times) if times else None
        return seconds_of(self.metrics or {}, "entire_frame_compile_time_s")

    @property
    def non_compliant_ops(self) -> list[str]:
        """Custom ops of the graph without torch's pt2_compliant_tag (tlparse shows them too)."""
        ops = (self.metrics or {}).get("non_compliant_ops")
        return [o for o in ops if isinstance(o, str)] if isinstance(ops, list) else []

    @property
    def is_retry(self) -> bool:
        """Compiled again only because the compile before it left nothing cached (it failed):
        its metrics count no cache entry for the frame, and no guard failed."""
        n = (self.metrics or {}).get("cache_size")
        if type(n) is not int or n != 0 or self.recompile_reasons:
            return False
        return not refused_guards(self.fail_reason)  # error_on_recompile: a guard did fail

    @property
    def graph_ops(self) -> int | None:
        v = (self.metrics or {}).get("graph_op_count")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def payloads(self) -> Iterator[Payload]:
        yield from self.graphs
        yield from self.guards
        yield from self.artifacts

    def shift_lines(self, n: int) -> None:
        """Move every log line number by n: a later part of a log is read before the lines
        above it are counted (index/parts.py). Source lines (stacks, `source_line`) stay."""
        self.first_log_line += n
        self.last_log_line += n
        for p in self.payloads():
            p.line += n
        for e in self.events:
            e.line += n
        for x in self.export_issues:
            x.line += n
        for o in self.outside:
            o.line += n
        for k in self.provenance:
            k.line += n
        aside: list[Lined] = [*self.runtime, *self.troubles, *self.code_states, *self.loose]
        for a in aside:
            a.line += n
        self.graph_breaks = shifted_breaks(self.graph_breaks, n)
        seen: set[int] = set()  # a tensor or storage can be in several sets: move it once
        described: list[TensorDesc | StorageDesc] = []
        for s in self.input_sets:
            described += s.tensors.values()
            described += s.storages.values()
        for d in described:
            if id(d) not in seen:
                seen.add(id(d))
                d.line += n

    def drop_texts(self, lines: Set[int]) -> None:
        """Forget the kept text of the payloads at these log lines (see `index.keep.Keep.after`)."""
        for p in self.payloads():
            if p.line in lines:
                p.text = None
                p.cut = 0


def shifted_breaks(breaks: list[GraphBreak], n: int) -> list[GraphBreak]:
    """Graph breaks with their log lines moved by n (see `Compile.shift_lines`)."""
    return [b._replace(line=b.line + n) for b in breaks]


@dataclass(slots=True)
class LogIndex:
    """What one process's log holds, ready for the renderers."""

    path: str
    name: str
    pid: int | None = None
    rank: int | None = None
    torch_version: str | None = None
    size: int = 0
    lines: int = 0
    records: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    bad_lines: list[BadLine] = field(default_factory=list)
    bad_count: int = 0
    first_time: str | None = None
    last_time: str | None = None
    compiles: Sequence[Compile] = field(default_factory=list)  # a store.CompileList when read
    notes: list[str] = field(default_factory=list)
    rank_from: str | None = None  # where `rank` came from: "records" or "file name"
    process: str = ""  # its name in a job: `rank1`, `rank1#2` (a second log of rank 1), `log3`


class KeepPolicy(Protocol):
    """What reading was asked to keep of payload texts, each log's (`index.keep.Keep`)."""

    @property
    def payload_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...
    def wants(self, kind: str, compile_key: str) -> bool: ...


@dataclass(slots=True)
class Report:
    """All logs read from one PATH (a file, a .gz or a directory)."""

    path: str
    logs: list[LogIndex] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # skipped files, decoys
    divergence: list[Divergence] = field(default_factory=list)  # between ranks of a job
    graphs_compared: bool = True  # False: the ranks are in one file, their graphs not hashed
    keep: KeepPolicy | None = None  # the payload texts it was read keeping (None: none)

    @property
    def compiles(self) -> Counted[Compile]:
        """The compiles torch counts (the headline's count), log by log in log order: each the
        last attempt of its compile, with an export's traced ids (`traced`) as the JSON's
        `compiles` lists them. Attempts that restarted and `-/-` are in `attempts`."""
        return Counted(self.logs)

    @property
    def attempts(self) -> Iterator[Compile]:
        """Everything read, log by log in log order: every attempt (one that restarted before
        the compile that followed it) and each log's records outside any compile (`-/-`)."""
        for log in self.logs:
            yield from log.compiles

    @property
    def outside(self) -> list[Compile]:
        """Each log's `-/-` entry: its records that carry no compile id."""
        return [c for log in self.logs for c in log.compiles[:1] if c.id is None]

    @property
    def torch_version(self) -> str | None:
        return next((log.torch_version for log in self.logs if log.torch_version), None)

    @property
    def ranks(self) -> list[int]:
        return sorted({log.rank for log in self.logs if log.rank is not None})
