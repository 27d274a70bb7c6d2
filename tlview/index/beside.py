"""Records beside a compile: its work at run time, failures logged as artifacts, compiled
autograd's compile reasons, real-tensor propagation, and records outside any compile id.

Each handler reads one record kind (or one artifact name) and is registered in `KINDS` (in
handlers.HANDLERS) or `ARTIFACTS` (looked up by artifacts.py). Records outside any compile id
are counted by `State.loose` (core.py), as every handler finds its compile.
"""

from __future__ import annotations

from collections.abc import Callable

from tlview.aside import CodeState, RunMetrics, Trouble
from tlview.index.core import State, innermost_user, record_name
from tlview.index.kinds import MAX_EVENTS, json_of, peek
from tlview.index.metrics import metrics_body, runtime_event
from tlview.model import Compile, ExportIssue
from tlview.parse import Record

TROUBLE_TEXT = 300  # characters of a failure's line kept
MAX_CODE_STATE = 100_000  # lines of a code state read


def on_runtime(ix: State, rec: Record, c: Compile) -> None:
    """compilation_metrics_runtime and bwd_compilation_metrics_runtime: what a compiled function
    compiled, tuned or recorded when it ran, kept typed (and said as an event, as before)."""
    body = metrics_body(ix, rec)
    if body is None:
        return
    backward = rec.kind.startswith("bwd_") or body.get("is_forward") is False
    if len(c.runtime) < MAX_EVENTS:
        c.runtime.append(RunMetrics(rec.line, backward, ix.small_dict(body)))
    else:
        c.events_dropped += 1
    runtime_event(ix, rec, c, body)


def on_trouble(ix: State, rec: Record, c: Compile) -> None:
    """A failure torch logged as an artifact: kept in one line for the compile's failure text
    (and its status, when the compile logged no metrics of its own)."""
    name = record_name(rec)
    text = trouble_text(name, rec.text(20_000)) if rec.payload else "(no text logged)"
    if len(c.troubles) < MAX_EVENTS:
        c.troubles.append(Trouble(name, rec.line, text))


def trouble_text(name: str, text: str) -> str:
    """The one line of a failure artifact that says what went wrong."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "(no text logged)"
    said = _trouble_line(name, lines)
    return said if len(said) <= TROUBLE_TEXT else said[: TROUBLE_TEXT - 3] + "..."


def _trouble_line(name: str, lines: list[str]) -> str:
    if name == "eager_compile_backwards_failure":  # a traceback: its last line is the error
        return lines[-1]
    if name != "fx_interpreter_error":
        return lines[0]
    # the error, then "While executing %node ...", then the graph
    at = next((ln for ln in lines if ln.startswith("While executing")), None)
    if at is None or at == lines[0]:
        return lines[0]
    return f"{lines[0]} ({at[0].lower()}{at[1:]})"


def on_code_state(ix: State, rec: Record, c: Compile) -> None:
    """get_/put_*_code_state: what profile-guided recompilation read from an earlier run, or
    kept for the next, per code object and source."""
    if rec.payload is None or len(c.code_states) >= MAX_EVENTS:
        return
    c.code_states.append(CodeState(record_name(rec), rec.line, code_state(rec.text(1 << 20))))


def code_state(text: str) -> dict[str, dict[str, str]]:
    """torch's render_code_state read back: `CODE:` lines, each followed by `  SOURCE: WHAT`."""
    out: dict[str, dict[str, str]] = {}
    entries: dict[str, str] | None = None
    for line in text.splitlines()[:MAX_CODE_STATE]:
        if line.startswith("  ") and entries is not None:
            src, sep, what = line.strip().rpartition(": ")
            if sep:
                entries[src] = what
        elif line.endswith(":") and not line.startswith(" "):
            entries = out.setdefault(line[:-1], {})
        else:
            entries = None  # the advice after a blank line
    return out


def on_autograd_reasons(ix: State, rec: Record, c: Compile) -> None:
    """compiled_autograd_compile_reasons: why compiled autograd captured its graph again (its
    cache's reasons so far, each `!N: ...`): this compile's are its recompile reasons."""
    v = json_of(rec.payload)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        if rec.payload_ok:
            ix.bad(rec, f"compiled_autograd_compile_reasons is not a list of strings: {peek(v)}")
        return
    mine = [x for x in v if c.id is not None and x.startswith(f"{c.id.torch_name}: ")]
    c.recompile_reasons = mine or v[-1:]


def on_propagate(ix: State, rec: Record, c: Compile) -> None:
    """propagate_real_tensors: an expression export could not decide from the symbols, decided by
    the real tensors instead (unsound: asserts were added). Its stack is in the record."""
    body = rec.body
    if not isinstance(body, dict) or len(c.export_issues) >= MAX_EVENTS:
        return
    expr = body.get("expr")
    frames = ix.stack(body.get("stack"), rec)
    c.export_issues.append(
        ExportIssue(
            "data-dependent",
            rec.line,
            expr[:300] if isinstance(expr, str) else "?",
            propagated(body.get("result")),
            innermost_user(frames),
        )
    )


def propagated(result: object) -> str:
    """What real-tensor propagation did with an expression, as an export issue says it."""
    got = None if result is None else str(result)
    return f"could not be decided from the symbols: the real tensors gave {got}, asserts were added"


def on_export(ix: State, rec: Record, c: Compile) -> None:
    """export (TORCH_DTRACE): torch.export began here; the records after it are its own."""
    ix.event(rec, c, "export", "torch.export started", caller=True)


def artifact_name(rec: Record) -> str | None:
    """An artifact's name, for its handler in ARTIFACTS."""
    name = rec.body.get("name") if isinstance(rec.body, dict) else None
    return name if isinstance(name, str) else None


Handler = Callable[[State, Record, Compile], None]


def _of_its_compile(read: Handler) -> Callable[[State, Record], None]:
    """A handler of HANDLERS: READ, given the record's compile."""

    def on(ix: State, rec: Record) -> None:
        read(ix, rec, ix.compile_of(rec))

    return on


# Record kinds read here, and their handlers (in handlers.HANDLERS).
KINDS: dict[str, Callable[[State, Record], None]] = {
    "compilation_metrics_runtime": _of_its_compile(on_runtime),
    "bwd_compilation_metrics_runtime": _of_its_compile(on_runtime),
    "propagate_real_tensors": _of_its_compile(on_propagate),
    "export": _of_its_compile(on_export),
}
# Artifacts read here (beside what index/artifacts.py keeps of every artifact).
ARTIFACTS: dict[str, Handler] = {
    "eager_compile_backwards_failure": on_trouble,
    "fx_interpreter_error": on_trouble,
    "inductor_spmd_graph_mismatch": on_trouble,
    "compiled_autograd_compile_reasons": on_autograd_reasons,
    **{
        f"{verb}_{where}_code_state": on_code_state
        for verb in ("get", "put")
        for where in ("local", "remote", "extra_remote")
    },
}
