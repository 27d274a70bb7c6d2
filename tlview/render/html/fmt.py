"""How the page writes times, paths and stack frames, for the views and the templates' filters."""

from __future__ import annotations

from typing import NamedTuple

from tlview.analyze.compiles import is_library
from tlview.model import StackFrame
from tlview.units import short_path

# Frames of a stack the page lists (a section with every detail: the outermost STACK_HEAD and
# the innermost rest, another section three; the stacks' tree: the outermost), so a page stays
# in proportion to its log however deep a crafted stack is; --full lists every frame.
STACK_FRAMES, STACK_HEAD = 40, 8


def ms(us: float) -> str:
    v = us / 1000
    return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"


def clock(t: str | None) -> str:
    """'MMDD HH:MM:SS.ffffff' -> 'MM-DD HH:MM:SS' (the log has no year)."""
    if not t:
        return "?"
    return f"{t[:2]}-{t[2:4]} {t[5:13]}" if len(t) >= 13 else t


def short_frame(f: StackFrame) -> str:
    return f"{short_path(f.file)}:{f.line} in {f.name}"


def pct(v: float) -> str:
    return f"{max(0.0, min(100.0, v)):.3f}"


class FrameView(NamedTuple):
    """A stack frame as the page writes it: in a stack, the stacks' tree, or a kernel's code."""

    file: str
    line: int
    name: str
    loc: str | None
    at: str  # the short file:line
    lib: bool  # torch's own code (analyze.compiles.is_library), dimmed


def frame_view(f: StackFrame) -> FrameView:
    return FrameView(
        f.file,
        f.line,
        f.name,
        f.loc,
        f"{short_path(f.file)}:{f.line}",
        is_library(f.file),
    )
