"""Inductor's provenance as tlparse's `-i` view shows it: the pre-grad graph, the post-grad graph
and the generated code of a graph, each node and kernel at its lines, cross-linked both ways."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tlview.model import Compile, Payload

# The payloads of each pane, in the order they are preferred (the latest before the node mapping).
PRE_KINDS = ("before_pre_grad_graph", "after_pre_grad_graph", "inductor_pre_grad_graph")
POST_KINDS = ("inductor_post_grad_graph", "after_post_grad_graph")
CODE_KINDS = ("inductor_output_code", "inductor_aot_wrapper_code")
MAX_LINES = 2000  # lines kept per node or kernel
MAX_ITEMS = 20_000  # nodes or kernels placed per pane

# A node of a graph as FX prints it: `relu: "f32[4, 32][32, 1]cpu" = torch.ops...` (older torch
# leaves out the annotation).
_NODE = re.compile(r'^[ \t]*([A-Za-z_]\w*)(?:: "[^"\n]*")? = ', re.M)
# The debug handle inductor writes above each kernel call (torch 2.9 and later).
_HANDLE = re.compile(r"^[ \t]*(?:#|//) \[Provenance debug handles\] (\S+)[ \t]*$", re.M)
_DEF = re.compile(r"^([A-Za-z_]\w*) = async_compile\.", re.M)


@dataclass(slots=True)
class Pane:
    """One payload of the view, and where each node or kernel is in its text (1-based lines)."""

    payload: Payload
    lines: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class CrossLinks:
    """One graph's provenance: its three panes (None: not logged, or its text not kept) and how
    their nodes and kernels map to each other."""

    graph: str  # as the Kernels table names it: forward, backward, inference, graph N
    line: int  # of the node mapping
    pre: Pane | None
    post: Pane | None
    code: Pane | None
    pre_to_post: dict[str, list[str]]
    post_to_pre: dict[str, list[str]]
    post_to_code: dict[str, list[str]]
    code_to_post: dict[str, list[str]]


TextOf = Callable[[Payload], str | None]


def cross_links(c: Compile, text_of: TextOf) -> list[CrossLinks]:
    """The provenance views of a compile: one per node mapping that maps anything (a backward
    graph logs an empty one), with each pane's text as `text_of` gives it (None: not shown)."""
    out = []
    names = _graph_names(c)
    mappings = sorted((p for p in c.provenance if p.kind == "nodes"), key=lambda p: p.line)
    payloads = sorted([*c.graphs, *c.artifacts], key=lambda p: p.line)
    for k, m in enumerate(mappings):
        links = m.links
        code_to_post = links.get("cppCodeToPost", {})
        if not (code_to_post or links.get("preToPost")):
            continue
        before = [p for p in payloads if p.line < m.line]
        pre = _latest(before, PRE_KINDS)
        post = _latest(before, POST_KINDS)
        code = _latest(before, CODE_KINDS)
        post_to_pre = links.get("postToPre", {})
        pre_to_post = links.get("preToPost", {})
        post_to_code = links.get("postToCppCode", {})
        kernels = list(code_to_post) or list(
            dict.fromkeys(x for v in post_to_code.values() for x in v)
        )
        out.append(
            CrossLinks(
                names[k] if k < len(names) else f"graph {k + 1}",
                m.line,
                _pane(pre, text_of, _node_lines, {*pre_to_post, *_values(post_to_pre)}),
                _pane(
                    post,
                    text_of,
                    _node_lines,
                    {*post_to_pre, *post_to_code, *_values(pre_to_post), *_values(code_to_post)},
                ),
                _pane(code, text_of, _kernel_lines, set(kernels)),
                pre_to_post,
                post_to_pre,
                post_to_code,
                code_to_post,
            )
        )
    return out


def _graph_names(c: Compile) -> list[str]:
    """The graphs of a compile's node mappings, in log order, as the Kernels table names them."""
    inference = any(g.kind == "aot_inference_graph" for g in c.graphs)
    return ["inference"] if inference else ["forward", "backward"]


def _values(m: dict[str, list[str]]) -> set[str]:
    return {x for v in m.values() for x in v}


def _latest(payloads: list[Payload], kinds: tuple[str, ...]) -> Payload | None:
    """Of the payloads before a mapping, the latest of the first kind there is one of."""
    for kind in kinds:
        found = [p for p in payloads if p.kind == kind]
        if found:
            return found[-1]
    return None


def _pane(
    p: Payload | None,
    text_of: TextOf,
    place: Callable[[str, set[str]], dict[str, list[int]]],
    wanted: set[str],
) -> Pane | None:
    if p is None:
        return None
    text = text_of(p)
    if text is None:
        return Pane(p, {})
    return Pane(p, place(text, wanted))


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _line_at(starts: list[int], offset: int) -> int:
    """The 1-based line of a character offset."""
    lo, hi = 0, len(starts)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo + 1


def _node_lines(text: str, wanted: set[str]) -> dict[str, list[int]]:
    """Where each wanted node of a printed graph is defined."""
    starts = _line_starts(text)
    out: dict[str, list[int]] = {}
    for m in _NODE.finditer(text):
        name = m.group(1)
        if name in wanted and (name in out or len(out) < MAX_ITEMS):
            at = out.setdefault(name, [])
            if len(at) < MAX_LINES:
                at.append(_line_at(starts, m.start(1)))
    return out


class _Lines:
    """The lines found of each kernel, at most MAX_LINES each."""

    def __init__(self) -> None:
        self.out: dict[str, list[int]] = {}

    def add(self, key: str, line: int) -> None:
        at = self.out.setdefault(key, [])
        if len(at) < MAX_LINES and line not in at:
            at.append(line)


def _defs(text: str, starts: list[int], lines: list[str]) -> dict[str, tuple[int, int]]:
    """Each kernel's definition: from `name = async_compile...` to its closing quotes."""
    defs: dict[str, tuple[int, int]] = {}
    closing = [k + 1 for k, ln in enumerate(lines) if ln.startswith("'''")]  # in order
    for m in _DEF.finditer(text):
        first = _line_at(starts, m.start())
        at = bisect.bisect_left(closing, first + 1)  # the first closing line at or after `first`
        defs[m.group(1)] = (first, closing[at] if at < len(closing) else first)
    return defs


def _named(text: str, starts: list[int], keys: list[str], found: _Lines) -> None:
    """Every line that names a kernel, in one pass; AOTInductor's wrapper calls one through
    `call_NAME`, and refers to it as `kernels_.NAME`."""
    by_name = [k for k in keys if not _numbered(k)]
    if not by_name:
        return
    names = "|".join(re.escape(k) for k in sorted(by_name, key=len, reverse=True))
    for m in re.finditer(rf"(?<!\w)(?:call_)?({names})(?!\w)", text):
        found.add(m.group(1), _line_at(starts, m.start()))


def _handle(key: str, line: int | None, lines: list[str], found: _Lines) -> None:
    """A kernel call by its debug handle: the handle's line, then the call after it."""
    if line is None:
        return
    found.add(key, line)
    nxt = line  # lines[nxt] is the line after the handle
    while nxt < len(lines) and not lines[nxt].strip():
        nxt += 1
    if nxt < len(lines):
        found.add(key, nxt + 1)


def _kernel_lines(text: str, wanted: set[str]) -> dict[str, list[int]]:
    """The lines of each wanted kernel in generated code: with debug handles (`name:N`, torch
    2.9 and later) the call under its handle; by name alone (torch 2.8) every line that names
    it; and in both its definition, from `name = async_compile...` to its closing quotes."""
    starts = _line_starts(text)
    lines = text.split("\n")
    found = _Lines()
    defs = _defs(text, starts, lines)
    handles = {m.group(1): _line_at(starts, m.start(1)) for m in _HANDLE.finditer(text)}
    keys = sorted(wanted)[:MAX_ITEMS]
    _named(text, starts, keys, found)
    for key in keys:
        name = key
        if _numbered(key):
            name = key.rpartition(":")[0]
            _handle(key, handles.get(key), lines, found)
        first, last = defs.get(name, (1, 0))
        for line in range(first, last + 1):
            found.add(key, line)
        if key in found.out:
            found.out[key].sort()
    return found.out


def _numbered(key: str) -> bool:
    """A kernel call named by its debug handle, `name:N` (torch 2.9 and later)."""
    name, _, n = key.rpartition(":")
    return bool(name) and n.isdigit()
