"""The user stacks that started compiles, as one tree with their common frames merged."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tlview.render.html.fmt import STACK_FRAMES, FrameView, frame_view
from tlview.render.html.rows import Row


@dataclass(slots=True)
class TrieNode:
    frames: list[FrameView]
    compiles: list[Row] = field(default_factory=list)
    children: list[TrieNode] = field(default_factory=list)


def trie(rows: Iterable[Row]) -> list[TrieNode]:
    """The user stacks that triggered compiles, common prefixes merged, as tlparse shows them."""
    root = TrieNode([])
    index: dict[int, dict[tuple[str, int, str], TrieNode]] = {}
    nostack = TrieNode([])
    for r in rows:
        if r.key == "-/-":
            continue
        if not r.stack:
            nostack.compiles.append(r)
            continue
        node = root
        for f in r.stack[:STACK_FRAMES]:
            kids = index.setdefault(id(node), {})
            k = (f.file, f.line, f.name)
            nxt = kids.get(k)
            if nxt is None:
                nxt = kids[k] = TrieNode([frame_view(f)])
                node.children.append(nxt)
            node = nxt
        node.compiles.append(r)
    out = [_squash(n) for n in root.children]
    if nostack.compiles:
        out.append(nostack)
    return out


def _squash(node: TrieNode) -> TrieNode:
    """Merge chains of single-child frames into one node, so the tree branches only where stacks do."""
    while len(node.children) == 1 and not node.compiles:
        child = node.children[0]
        node.frames.extend(child.frames)
        node.compiles = child.compiles
        node.children = child.children
    node.children = [_squash(n) for n in node.children]
    return node
