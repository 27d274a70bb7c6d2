"""Records beside a compile: its work at run time, failures logged as artifacts, compiled
autograd's compile reasons, real-tensor propagation, and records outside any compile id.

Each handler reads one record kind (or one artifact name) and is registered in `KINDS` or
`ARTIFACTS`, so the indexer dispatches to it in one line.
"""

from __future__ import annotations

from collections.abc import Callable

from tlview.aside import CodeState, Loose, RunMetrics, Trouble
from tlview.index.core import innermost_user, is_torch_file
from tlview.index.kinds import MAX_EVENTS, MAX_KINDS, json_of, peek
from tlview.index.metrics import MetricsRecords
from tlview.model import Compile, ExportIssue
from tlview.parse import Record

MAX_LOOSE = MAX_KINDS  # (name, writer, compile, span) groups kept per log; the rest in one
OTHER_LOOSE = "(other records)"
TROUBLE_TEXT = 300  # characters of a failure's line kept
MAX_CODE_STATE = 100_000  # lines of a code state read


class BesideRecords(MetricsRecords):
    """What the records beside a compile's own say, each read by one handler below."""

    def on_loose(self, rec: Record, c: Compile) -> None:
        """Count a record outside any compile id by what wrote it, and note the compile whose
        span alone was open when it was written (same process: certain)."""
        frames = self.stack(rec.meta.get("stack"))
        writer = str(frames[-1]) if frames else None
        name = _name(rec)
        inside, (span, began) = self.open_compile(), self.open_span()
        key = (name, writer, inside, f"{span}@{began}" if span else None)
        at = self.loose_at.get(key)
        if at is None and len(self.loose_at) >= MAX_LOOSE:
            key = (OTHER_LOOSE, None, None, None)
            at = self.loose_at.get(key)
        if at is not None and at < len(c.loose):
            c.loose[at].count += 1
            return
        self.loose_at[key] = len(c.loose)
        user_frame = innermost_user(frames)
        user = f"{user_frame.file}:{user_frame.line}" if user_frame else None
        torch = bool(frames) and is_torch_file(frames[-1].file)
        if key[0] == OTHER_LOOSE:
            writer = user = inside = span = began = None
        c.loose.append(Loose(key[0], writer, torch, user, inside, span, 1, rec.line, began))

    def open_compile(self) -> str | None:
        """The compile whose chromium span is open now, when exactly one is."""
        open_ = [cid for cid, st in self.open.items() if cid is not None and st.chromium]
        return str(open_[0]) if len(open_) == 1 else None

    def open_span(self) -> tuple[str | None, float | None]:
        """The outermost span open now outside any compile id (fullgraph_capture, ...), and
        when it began."""
        st = self.open.get(None)
        if st is None or not st.chromium:
            return None, None
        name, began, _ = st.chromium[0]
        return name, began


def on_runtime(ix: BesideRecords, rec: Record, c: Compile) -> None:
    """compilation_metrics_runtime and bwd_compilation_metrics_runtime: what a compiled function
    compiled, tuned or recorded when it ran, kept typed (and said as an event, as before)."""
    body = ix.metrics_body(rec)
    if body is None:
        return
    backward = rec.kind.startswith("bwd_") or body.get("is_forward") is False
    if len(c.runtime) < MAX_EVENTS:
        c.runtime.append(RunMetrics(rec.line, backward, ix.small_dict(body)))
    else:
        c.events_dropped += 1
    ix.runtime_event(rec, c, body)


def on_trouble(ix: BesideRecords, rec: Record, c: Compile) -> None:
    """A failure torch logged as an artifact: kept in one line for the compile's failure text
    (and its status, when the compile logged no metrics of its own)."""
    name = _name(rec)
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


def on_code_state(ix: BesideRecords, rec: Record, c: Compile) -> None:
    """get_/put_*_code_state: what profile-guided recompilation read from an earlier run, or
    kept for the next, per code object and source."""
    if rec.payload is None or len(c.code_states) >= MAX_EVENTS:
        return
    c.code_states.append(CodeState(_name(rec), rec.line, code_state(rec.text(1 << 20))))


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


def on_autograd_reasons(ix: BesideRecords, rec: Record, c: Compile) -> None:
    """compiled_autograd_compile_reasons: why compiled autograd captured its graph again (its
    cache's reasons so far, each `!N: ...`): this compile's are its recompile reasons."""
    v = json_of(rec.payload)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        if rec.payload_ok:
            ix.bad(rec, f"compiled_autograd_compile_reasons is not a list of strings: {peek(v)}")
        return
    mine = [x for x in v if c.id is not None and x.startswith(f"{c.id.torch_name}: ")]
    c.recompile_reasons = mine or v[-1:]


def on_propagate(ix: BesideRecords, rec: Record, c: Compile) -> None:
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


def on_export(ix: BesideRecords, rec: Record, c: Compile) -> None:
    """export (TORCH_DTRACE): torch.export began here; the records after it are its own."""
    ix.event(rec, c, "export", "torch.export started", caller=True)


def artifact_name(rec: Record) -> str | None:
    """An artifact's name, for its handler in ARTIFACTS."""
    name = rec.body.get("name") if isinstance(rec.body, dict) else None
    return name if isinstance(name, str) else None


def _name(rec: Record) -> str:
    """A record's name: its kind, or an artifact's (or a graph dump's) own name."""
    body = rec.body
    if rec.kind in ("artifact", "graph_dump") and isinstance(body, dict):
        name = body.get("name")
        if isinstance(name, str):
            return name[:200]
    return rec.kind


Handler = Callable[[BesideRecords, Record, Compile], None]
# Record kinds read here, and their handlers (see Indexer.add).
KINDS: dict[str, Handler] = {
    "compilation_metrics_runtime": on_runtime,
    "bwd_compilation_metrics_runtime": on_runtime,
    "propagate_real_tensors": on_propagate,
    "export": on_export,
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
