"""A graph break's words: the line that names it, torch's explanation, hints and debug context,
and the user calls that led to it, read out of the message torch logged."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tlview.index.kinds import plain_restart
from tlview.model import StackFrame
from tlview.units import number

# Lines torch writes around a graph break's own words: what it was tracing, or that it gave
# up on the whole function because of the break.
_BREAK_WRAPPERS = ("Encountered graph break when", "Failed to handle graph break gracefully")


def break_title(reason: str) -> str:
    """The line of a graph-break reason that names the break, for tables and headings."""
    plain = plain_restart(reason)
    if plain is not None:
        return plain
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    for ln in lines:
        if not ln.startswith(_BREAK_WRAPPERS):
            return ln
    return lines[0] if lines else "?"


def _labelled_lines(reason: str, label: str) -> Iterator[str]:
    """The text after each `label` line of a graph-break reason (`Explanation:`, `Hint:`, ...)."""
    for ln in reason.splitlines():
        s = ln.strip()
        if s.startswith(label):
            yield s.removeprefix(label).strip()


def _labelled(reason: str, label: str) -> str | None:
    """The text after the first `label` line of a graph-break reason (None: none, or empty)."""
    return next(_labelled_lines(reason, label), None) or None


def break_explanation(reason: str) -> str | None:
    """What torch says the break was about (its `Explanation:` line: which call, which op)."""
    return _labelled(reason, "Explanation:")


def break_hints(reason: str) -> list[str]:
    """torch's `Hint:` lines of a graph-break reason: what to change to remove the break."""
    return [h for h in _labelled_lines(reason, "Hint:") if h]


def break_context(reason: str) -> str | None:
    """torch's `Developer debug context:` of a graph-break reason: the call or op it is about
    (a library's logger call, and its message, names the library code that broke)."""
    return _labelled(reason, "Developer debug context:")


def break_callers(text: str) -> list[StackFrame]:
    """The user-code traceback torch logs with a graph break, outermost first: the calls that led
    to the break's line (through a library's code, for a break inside it)."""
    k = text.find("User code traceback:")
    if k < 0:
        return []
    trace = text[k:]
    end = trace.find("Traceback (most recent call last)")
    if end >= 0:
        trace = trace[:end]
    return trace_frames(trace)


def break_key(reason: str) -> str:
    """What makes two graph breaks the same: the line naming the break and torch's debug
    context (the function or op it is about), not the words around them (which bytecode was
    traced, a fallback to eager, the variables on the stack)."""
    context = ""
    for ln in reason.splitlines():
        if ln.strip().startswith("Developer debug context:"):
            context = ln.strip()
            break
    return f"{break_title(reason)}\n{context}"


# A frame starts its line (as traceback writes it): a search from every `File "` inside a line
# would read the rest of the line once for each.
_TRACE_FRAME = re.compile(r'^[ \t]*File "([^"\n]+)", line (\d+), in ([^\n]+)\n([^\n]*)', re.M)


def innermost_frame(trace: str) -> StackFrame | None:
    """The last frame of a Python stack as text (`File "f.py", line 3, in g` and its code)."""
    frames = trace_frames(trace)
    return frames[-1] if frames else None


def trace_frames(trace: str) -> list[StackFrame]:
    """The frames of a Python stack as text, outermost first, each with its line of code."""
    return [
        StackFrame(file, at, name.strip(), code.strip() or None)
        for file, line, name, code in _TRACE_FRAME.findall(trace)
        if (at := number(line)) is not None
    ]
