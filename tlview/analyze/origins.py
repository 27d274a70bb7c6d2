"""Where a guard came from: for each failed guard of a recompile, each specialisation and each
symbol, the user line that made it, and why a size is dynamic (an earlier run's profile-guided
code state, or a size that changed), each said in one line.

The user line is the innermost frame outside torch (`index.core.is_torch_file`, the one rule)
of the stack torch logged: a failed guard's "User stack trace", else the place its comment names;
a symbol's user_stack (the traced code), else its record's own stack. A scalar specialised into
a guard is said with its value and place: "the float from `.item()` at train.py:12 was
specialised to 0.2387", never as torch's multi-line text.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tlview.aside import CodeState
from tlview.index.core import innermost_user, is_torch_file
from tlview.model import ID_TEXT, Compile, StackFrame, Symbol
from tlview.units import number

_HEAD = re.compile(rf"^\s*({ID_TEXT}):\s*")
_AUTOGRAD_ID = re.compile(r"^\s*!\d+(?:/\d+)*(?:_\d+)?:\s*")  # "!1: " (no frame)
_COMMENT = re.compile(r"\s+#\s")
_COMMENT_WHERE = re.compile(r"#\s+(\S+):(\d+) in (\S+)")
_STACK_FILE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
_SCALAR = re.compile(r"^(\S+) == (-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan))$", re.I)
_SIZE = re.compile(
    r"^tensor '([^']+)' (size|stride) mismatch at index (\d+)\. expected (\S+), actual (\S+)"
)
_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+?)_at_(\d+)$")
_TENSOR_CALL = re.compile(r"Tensor\.(\w+)\(\)")
_DIM = re.compile(r"^(.*)\.size\(\)\[(\d+)\]$")
_SIZES = re.compile(r"size=\[([^\]]*)\]")


class Origin(NamedTuple):
    """Where one guard, specialisation or symbol came from, in one line."""

    kind: str  # "guard", "scalar", "symbol", "specialization", "unbacked", "autograd"
    subject: str  # the guard's check (its first line), a symbol, or the source
    compile: str  # the compile that made it
    where: StackFrame | None  # the user line that made it
    said: str  # in words, one line
    dynamic_by: str | None = None  # symbols: "profile-guided" or "automatic"


class GuardText(NamedTuple):
    """A failed guard as torch words it, taken apart."""

    compile: str | None  # the compile whose guard it was ("1/0")
    check: str  # what it checks, one line, without torch's comments
    frames: list[StackFrame]  # its "User stack trace", outermost first
    comment: StackFrame | None  # the place its comment names (torch cuts the path's start)


def guard_text(reason: str) -> GuardText:
    """Take a failed guard (a recompile reason) apart."""
    lines = reason.strip().splitlines()
    first = lines[0] if lines else ""
    m = _HEAD.match(first)
    body = first[m.end() :] if m else first
    check = _COMMENT.split(body, maxsplit=1)[0].strip()
    found = _COMMENT_WHERE.findall(body)
    line = number(found[0][1]) if found else None
    comment = StackFrame(found[0][0], line, found[0][2]) if found and line is not None else None
    return GuardText(m.group(1) if m else None, check, _stack_frames(lines[1:]), comment)


def _stack_frames(lines: Sequence[str]) -> list[StackFrame]:
    """The frames of a Python traceback's text, each with the code line after it."""
    out: list[StackFrame] = []
    for i, line in enumerate(lines):
        m = _STACK_FILE.match(line)
        at = number(m.group(2)) if m else None
        if m and at is not None:
            code = lines[i + 1].strip() if i + 1 < len(lines) else None
            out.append(StackFrame(m.group(1), at, m.group(3).strip(), code or None))
    return out


@dataclass(slots=True)
class OriginContext:
    """What origins need from the rest of the run: graph breaks by place, and the
    profile-guided code states each log read. Built compile by compile (`add`), in log order:
    a resume function's break and a frame's code state come before the compiles they explain."""

    breaks: dict[str, str] = field(default_factory=dict)  # "file.py:12" -> its reason
    code_states: dict[str, list[CodeState]] = field(default_factory=dict)  # log -> got
    # log -> (states indexed, each code object's entries by its `:LINE:NAME`): made on use
    index: dict[str, tuple[int, dict[str, list[tuple[str, dict[str, str]]]]]] = field(
        default_factory=dict
    )

    def kept(self, log: str, suffix: str) -> list[tuple[str, dict[str, str]]]:
        """The entries a log's code states kept for code objects ending in `suffix`
        (`:LINE:NAME`), with the artifact that kept each: one lookup, not a scan per compile."""
        states = self.code_states.get(log, [])
        got = self.index.get(log)
        if got is None or got[0] != len(states):
            by: dict[str, list[tuple[str, dict[str, str]]]] = {}
            for state in states:
                for code, entries in state.entries.items():
                    by.setdefault(_code_suffix(code), []).append((state.kind, entries))
            got = self.index[log] = (len(states), by)
        return got[1].get(suffix, [])

    def add(self, c: Compile) -> None:
        """Take in what one compile tells the others."""
        for b in c.graph_breaks:
            if b.where:
                self.breaks.setdefault(short_place(b.where), b.reason)
        got = [s for s in c.code_states if s.kind.startswith("get_")]
        if got:
            self.code_states.setdefault(c.log, []).extend(got)


def origin_context(compiles: Iterable[Compile]) -> OriginContext:
    """One pass over the run's compiles for what origins need."""
    ctx = OriginContext()
    for c in compiles:
        ctx.add(c)
    return ctx


def short_place(where: str) -> str:
    """`/a/b/train.py:12` as `train.py:12`."""
    file, _, line = where.rpartition(":")
    return f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}" if file else where


def _place(f: StackFrame | None) -> str:
    return short_place(f"{f.file}:{f.line}") if f is not None else "an unknown line"


def number_words(text: str) -> str:
    """A logged number as a user wrote it: a float32 value (0.2387000024318695) by its shortest
    form (0.2387), other numbers as they are."""
    try:
        v = float(text)
    except ValueError:
        return text
    if "." not in text and "e" not in text.lower():
        return text
    f32 = struct.unpack("f", struct.pack("f", v))[0] if abs(v) < 3.4e38 else None
    if f32 != v:
        return repr(v)
    for digits in range(1, 10):
        short = f"{v:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(short)))[0] == v:
            return short
    return repr(v)


def guard_origin(reason: str, c: Compile, ctx: OriginContext) -> Origin:
    """One failed guard of compile `c` (a recompile): what it checked, and the user line that
    made it; a scalar specialised into it said with its value and place."""
    g = guard_text(reason)
    made = g.compile or (c.recompile.previous if c.recompile else None) or "?"
    user = [f for f in g.frames if not is_torch_file(f.file)]
    where = user[-1] if user else g.comment
    scalar = _SCALAR.match(g.check)
    if scalar:
        said = _scalar_words(scalar.group(1), scalar.group(2), c, ctx, where)
        return Origin("scalar", g.check, made, where, said)
    size = _SIZE.match(g.check)
    if size:
        name, what, dim, was, now = size.groups()
        said = f"{name} was compiled with {what}[{dim}] = {was} in {made}; this call had {now}"
        return Origin("guard", g.check, made, where or _frame_line(c), said)
    said = f"{g.check}: made in {made} at {_place(where)}"
    return Origin("guard", g.check, made, where, said)


def _frame_line(c: Compile) -> StackFrame | None:
    """The compiled frame's own first line: where its inputs come in."""
    if c.file is None or c.source_line is None:
        return None
    return StackFrame(c.file, c.source_line, c.function or "?")


def _scalar_words(
    source: str, value: str, c: Compile, ctx: OriginContext, where: StackFrame | None
) -> str:
    """`the float from .item() at f.py:6 was specialised to 0.2387 (used at f.py:7)`."""
    kind = "int" if value.lstrip("-").isdigit() else "float"
    shown = number_words(value)
    used = f" (used at {_place(where)})" if where is not None else ""
    resume = _RESUME.match(c.function or "")
    if source.startswith("___stack") and resume and c.file:
        at = short_place(f"{c.file}:{resume.group(2)}")
        call = _TENSOR_CALL.search(ctx.breaks.get(at, ""))
        what = f"`.{call.group(1)}()`" if call else "the call the graph broke at"
        return f"the {kind} from {what} at {at} was specialised to {shown}{used}"
    name = _local(source)
    return f"the {kind} {name} was specialised to {shown}{used}"


def _local(source: str) -> str:
    m = re.fullmatch(r"L\['(\w+)'\]", source)
    return f"`{m.group(1) if m else source}`"


def guard_origins(c: Compile, ctx: OriginContext) -> list[Origin]:
    """The failed guards of a recompile, each with its origin (none for another compile)."""
    reasons = c.recompile.reasons if c.recompile is not None else c.recompile_reasons
    if c.id is not None and c.id.frame is None:
        return [_autograd(r, c) for r in reasons]
    return [guard_origin(r, c, ctx) for r in reasons]


def _autograd(reason: str, c: Compile) -> Origin:
    """Why compiled autograd captured its graph (compiled_autograd_compile_reasons): again, or
    for the first time (its cache held no key before: `previous key sizes=[]`)."""
    text = _AUTOGRAD_ID.sub("", reason.strip().splitlines()[0] if reason.strip() else "")
    first = text.endswith("previous key sizes=[]")
    said = re.sub(r"^Cache miss due to ", "captured first: " if first else "captured again: ", text)
    return Origin("autograd", text, c.key, None, said)


class Seen(NamedTuple):
    """What says why a compile's sizes are dynamic, gathered once per compile: the sizes its
    failed guards saw change, and what the code states it read kept, by (input, dim)."""

    changed: dict[tuple[str, int], tuple[str, str]]  # (input name, dim) -> (was, now)
    kept: dict[tuple[str, int], tuple[str, str]]  # (source, dim) -> (artifact, "?" or size)


def seen(c: Compile, ctx: OriginContext) -> Seen:
    """One pass over a compile's failed guards and the code states its frame read."""
    changed: dict[tuple[str, int], tuple[str, str]] = {}
    reasons = c.recompile.reasons if c.recompile is not None else c.recompile_reasons
    for r in reasons:
        m = _SIZE.match(guard_text(r).check)
        dim = number(m.group(3)) if m and m.group(2) == "size" else None
        if m and dim is not None:
            changed.setdefault((m.group(1), dim), (m.group(4), m.group(5)))
    return Seen(changed, _kept(c, ctx))


def _code_suffix(code: str) -> str:
    """A code object's key (`hash(...)/file.py:LINE:NAME`) by its `:LINE:NAME`."""
    parts = code.rsplit(":", 2)
    return ":" + ":".join(parts[1:]) if len(parts) == 3 else code


def _kept(c: Compile, ctx: OriginContext) -> dict[tuple[str, int], tuple[str, str]]:
    """What the code states this frame read kept of each size: (artifact, "?" or the size)."""
    suffix = f":{c.source_line}:{c.function}"
    out: dict[tuple[str, int], tuple[str, str]] = {}
    own = [
        (state.kind, entries)
        for state in c.code_states
        if state.kind.startswith("get_")
        for code, entries in state.entries.items()
        if _code_suffix(code) == suffix
    ]
    for kind, entries in [*own, *ctx.kept(c.log, suffix)]:
        for source, what in entries.items():
            _sizes(out, kind, source, what)
    return out


def _sizes(out: dict[tuple[str, int], tuple[str, str]], kind: str, source: str, what: str) -> None:
    m = _SIZES.search(what)
    for i, size in enumerate(m.group(1).split(",") if m else []):
        out.setdefault((source, i), (kind, size.strip()))


def symbol_origin(s: Symbol, c: Compile, known: Seen) -> Origin:
    """A symbol the compile created, specialised or could not know, at its user line."""
    where = symbol_line(s)
    at = _place(where)
    source = s.source or "?"
    if s.kind == "specialized":
        reason = f" ({s.reason})" if s.reason else ""
        said = f"{source} specialised to {number_words(s.value or '?')} at {at}{reason}"
        return Origin("specialization", s.symbol, c.key, where, said)
    if s.kind == "unbacked":
        return Origin(
            "unbacked", s.symbol, c.key, where, f"{s.symbol}: a data-dependent value at {at}"
        )
    by, why = dynamic_by(s, known)
    said = f"{source} dynamic as {s.symbol} (was {s.value}) at {at}" + (f": {why}" if why else "")
    return Origin("symbol", s.symbol, c.key, where, said, by)


def symbol_line(s: Symbol) -> StackFrame | None:
    """A symbol's user line: its user_stack's innermost user frame (the traced code), else its
    record's own stack's (the code that called the compiled function)."""
    if s.where is not None and not is_torch_file(s.where.file):
        return s.where
    return s.origin or s.where


def dynamic_by(s: Symbol, known: Seen) -> tuple[str | None, str | None]:
    """Why a size is dynamic: an earlier run's code state (profile-guided), or its size changed
    (automatic dynamic after a failed guard); (None, None) when the log does not say."""
    dim = _DIM.match(s.source or "")
    if dim is None:
        return None, None
    base, i = dim.group(1), number(dim.group(2))
    if i is None:
        return None, None
    kept = known.kept.get((base, i))
    if kept is not None and kept[1] == "?":
        return "profile-guided", f"profile-guided: an earlier run saw it change ({kept[0]})"
    if kept is not None and kept[1] != s.value:
        said = f"profile-guided: an earlier run saw {kept[1]}, this run {s.value} ({kept[0]})"
        return "profile-guided", said
    changed = known.changed.get((base, i)) or known.changed.get((_local(base).strip("`"), i))
    if changed is not None:
        return "automatic", f"automatic: its size changed ({changed[0]} -> {changed[1]})"
    return None, None


def origins(c: Compile, ctx: OriginContext) -> list[Origin]:
    """Every origin a compile has: its failed guards, then its symbols."""
    known = seen(c, ctx)
    return [*guard_origins(c, ctx), *(symbol_origin(s, c, known) for s in c.symbols)]


def innermost(frames: Sequence[StackFrame]) -> StackFrame | None:
    """The one library-frame rule, re-exported for callers of this module."""
    return innermost_user(list(frames))
