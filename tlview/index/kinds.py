"""What the indexer reads: record kinds, the fields torch writes and their types, and limits."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson

from tlview.model import MICROS, CompileId

if TYPE_CHECKING:
    from typing import TypeGuard

# Record kinds that carry a graph or generated code as payload.
GRAPH_KINDS = frozenset(
    {
        "dynamo_output_graph",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "inductor_pre_grad_graph",
        "inductor_post_grad_graph",
        "inductor_output_code",
        "compiled_autograd_graph",
        "graph_dump",
        "optimize_ddp_split_graph",
        "optimize_ddp_split_child",
        "exported_program",
    }
)
GUARD_KINDS = frozenset({"dynamo_guards", "dynamo_cpp_guards_str"})
SYMBOL_KINDS = frozenset(
    {"create_symbol", "create_unbacked_symbol", "symbolic_shape_specialization"}
)
# What torch.export reports as issues (torch/export/_draft_export.py), and what tlview calls them.
ISSUE_KINDS = {
    "propagate_real_tensors_provenance": "data-dependent",
    "guard_on_data_dependent_error": "data-dependent error",
    "guard_added": "guard on an input",
    "missing_fake_kernel": "missing fake kernel",
    "mismatched_fake_kernel": "mismatched fake kernel",
}
# Shown per compile as they are (export and dynamic-shape diagnostics).
EVENT_KINDS = frozenset(
    {
        "guard_added",
        "guard_added_fast",
        "expression_created",
        "propagate_real_tensors_provenance",
        "guard_on_data_dependent_error",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
        "link",
        "dump_file",
    }
)
# Metrics records, whose compile id can be in their body (run-time ones are logged after the
# compile, with its id as a field).
METRICS_KINDS = frozenset(
    {"compilation_metrics", "compilation_metrics_runtime", "bwd_compilation_metrics_runtime"}
)
# Records torch 2.13 writes with or without a payload (their `payload_fn` can give None; read
# from every `trace_structured` call site): without one they are whole, not damaged. Every
# other record kind either always has a payload or never has one (metadata only).
PAYLOAD_OPTIONAL = {
    "inductor_provenance_tracking_node_mappings": "an FX graph cache hit, on an entry saved "
    "with provenance tracking off, logs none (torch/_inductor/codecache.py)",
    "inductor_provenance_tracking_kernel_stack_traces": "an FX graph cache hit, on an entry "
    "saved with provenance tracking off, logs none (torch/_inductor/codecache.py)",
    "dump_file": "torch logs none when it no longer holds the file's source "
    "(torch/_logging/structured.py)",
}

MAX_PID = 1 << 22  # Linux's pid_max ceiling: larger numbers in the prefix are thread ids
MAX_EVENTS = 500  # events kept per compile; the rest are counted
MAX_KINDS = 1000  # distinct record kinds counted by name per log (torch has about 100)
OTHER_KINDS = "(other kinds)"
# Characters of an interned file name kept. One `str` record names a file for any number of
# frames, so a long one (no path is) would make every output many times the log: it is cut,
# with its length.
MAX_FILENAME = 512


# Context keys torch writes as integers: a record with another type there is reported.
CONTEXT_INTS = ("frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "rank")
_STR, _INT, _NUM, _LIST, _DICT = (
    ((str,), "a string"),
    ((int,), "an integer"),
    ((int, float), "a number"),
    ((list,), "a list"),
    ((dict,), "an object"),
)
FieldTypes = dict[str, tuple[tuple[type, ...], str]]
# Fields tlview reads, and what torch writes there (null aside).
# Times of compilation_metrics (the backward's has the inductor ones): seconds, microseconds.
TIME_FIELDS = (*MICROS, *MICROS.values())
METRIC_FIELDS: FieldTypes = {
    **dict.fromkeys(
        (
            "compile_id",
            "fail_type",
            "fail_reason",
            "fail_user_frame_filename",
            "co_name",
            "co_filename",
            "recompile_reason",
        ),
        _STR,
    ),
    **dict.fromkeys(
        (
            "fail_user_frame_lineno",
            "co_firstlineno",
            "graph_op_count",
            "graph_node_count",
            "graph_input_count",
            "guard_count",
            "shape_env_guard_count",
            "cache_size",
        ),
        _INT,
    ),
    **dict.fromkeys(TIME_FIELDS, _NUM),
    "restart_reasons": ((list,), "a list of strings"),
    "non_compliant_ops": ((list,), "a list of strings"),
}
BWD_FIELDS: FieldTypes = dict.fromkeys(TIME_FIELDS, _NUM)
ISSUE_FIELDS: FieldTypes = {  # what an export issue reads (ISSUE_KINDS)
    "expr": _STR,
    "op": _STR,
    "reason": _STR,
    "prefix": _STR,
    "result": ((str, bool, int, float), "a value"),
    "symbol_to_sources": ((dict,), "an object of source names"),
}
FRAME_FIELDS: FieldTypes = {
    "filename": ((int, str), "an interned index or a file name"),
    "line": _INT,
    "name": _STR,
    "loc": _STR,
}
IN_FRAME = ("filename", "line", "name")
SYMBOL_FIELDS: FieldTypes = {
    "symbol": _STR,
    "source": _STR,
    "sources": ((list,), "a list of strings"),
    "vr": _STR,
    "reason": _STR,
    "val": ((str, int, float), "a value"),
    "value": ((str, int, float), "a value"),
}
CHROMIUM_FIELDS: FieldTypes = {
    "name": _STR,
    "ph": _STR,
    "ts": _NUM,
    "dur": _NUM,
    "args": _DICT,
}


def wrong_fields(
    d: dict[str, Any], types: FieldTypes, prefix: str = "", required: tuple[str, ...] = ()
) -> str | None:
    """The first field of `d` whose type is not the one torch writes, said plainly."""
    for name, (allowed, what) in types.items():
        v = d.get(name)
        if v is None:
            if name in required:
                return f"{prefix}{name} is missing: it should be {what}"
            continue
        if isinstance(v, bool) or not isinstance(v, allowed):
            return f"{prefix}{name} is not {what}: {peek(v)}"
        if (
            isinstance(v, list)
            and what.endswith("strings")
            and not all(isinstance(x, str) for x in v)
        ):
            return f"{prefix}{name} is not {what}: {peek(v)}"
    return None


def cut_name(name: str) -> str:
    """A file name as kept: whole up to MAX_FILENAME characters, else its start and its end (where
    the file's own name is) around its length."""
    if len(name) <= MAX_FILENAME:
        return name
    return f"{name[:120]}...[{len(name):,} characters]...{name[-360:]}"


def peek(v: object, n: int = 40) -> str:
    """A value as a bad line quotes it: its repr, cut to `n` characters."""
    t = repr(v)
    return t if len(t) <= n else t[: n - 3] + "..."


def json_of(data: bytes | None) -> Any:
    """A payload's JSON value; None if it has none or it is not JSON."""
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def parse_id(v: object) -> CompileId | None:
    """A compile id written as text in a field; None if the field holds none."""
    if not isinstance(v, str):
        return None
    try:
        return CompileId.parse(v)
    except ValueError:
        return None


def is_int(v: object) -> TypeGuard[int]:
    """An integer as JSON has them (a bool is an int to Python)."""
    return isinstance(v, int) and not isinstance(v, bool)


def count_kind(counts: dict[str, int], kind: str) -> None:
    """Count a record kind; past MAX_KINDS distinct kinds (a hostile log) under OTHER_KINDS."""
    if kind not in counts and len(counts) >= MAX_KINDS:
        kind = OTHER_KINDS
    counts[kind] = counts.get(kind, 0) + 1


# What makes a compile an inductor one: the code inductor generated, or its post-grad graph.
INDUCTOR_KINDS = re.compile(r"^(inductor_output_code|inductor_aot_\w+|inductor_post_grad_graph)$")


# A restart that names no graph break, only the type of what dynamo raised to restart
# (convert_frame.py: `e.restart_reason or str(type(e))`); the attempt after it traces the frame
# again, whole.
_RESTART_TYPE = re.compile(r"<class '(?:\w+\.)*(\w*RestartAnalysis)'>")
_RESTARTS = {
    "TensorifyScalarRestartAnalysis": "a Python float made a tensor input",
    "UnspecializeRestartAnalysis": "a module unspecialized (its attributes made inputs)",
    "CompileCollectiveRestartAnalysis": "compile options agreed across ranks",
}


def plain_restart(reason: str) -> str | None:
    """What a restart reason that is no graph break says (`TensorifyScalarRestartAnalysis:
    a Python float made a tensor input, traced again`); None for a graph break's reason."""
    m = _RESTART_TYPE.fullmatch(reason.strip())
    if m is None:
        return None
    what = _RESTARTS.get(m.group(1))
    return f"{m.group(1)}: {what}, traced again" if what else m.group(1)
