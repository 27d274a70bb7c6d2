"""The provenance view of a compile's section: three panes, their texts taken from the
payloads on the page, their cross-links as data the page's script reads. section.py imports it
only for a compile with provenance records."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tlview.analyze.provenance import CrossLinks, Pane, cross_links
from tlview.dumps import dumps
from tlview.model import Compile, Payload


class PaneView(NamedTuple):
    role: str  # pre | post | code
    title: str
    kind: str | None  # the payload's kind (None: the log has none)
    line: int
    source: str | None  # the anchor of the payload whose text the pane shows (None: not shown)
    why: str  # what the pane shows instead, when it shows no text


class ProvenanceView(NamedTuple):
    anchor: str
    graph: str
    line: int  # of the node mapping
    panes: list[PaneView]
    data: str  # JSON: each pane's nodes or kernels at their lines, and the maps between them


_TITLES = {
    "pre": "Pre-grad graph",
    "post": "Post-grad graph",
    "code": "Generated code",
}


def provenance_views(
    c: Compile, anchor: str, shown: Callable[[Payload], tuple[str, str | None] | None]
) -> list[ProvenanceView]:
    """The views of a compile's provenance; `shown` gives a payload's anchor on the page and the
    text it shows there (None when it is not in the section)."""

    def text_of(p: Payload) -> str | None:
        got = shown(p)
        return None if got is None else got[1]

    out = []
    for k, x in enumerate(cross_links(c, text_of)):
        panes = [_pane(role, getattr(x, role), shown) for role in ("pre", "post", "code")]
        out.append(ProvenanceView(f"{anchor}-prov{k + 1}", x.graph, x.line, panes, _data(x)))
    return out


def _pane(
    role: str, pane: Pane | None, shown: Callable[[Payload], tuple[str, str | None] | None]
) -> PaneView:
    title = _TITLES[role]
    if pane is None:
        return PaneView(role, title, None, 0, None, "The log has none for this graph.")
    p = pane.payload
    got = shown(p)
    if got is None or got[1] is None:
        return PaneView(
            role, title, p.kind, p.line, None, "Not on this page (see its payload below)."
        )
    return PaneView(role, title, p.kind, p.line, got[0], "")


def _data(x: CrossLinks) -> str:
    return dumps(
        {
            "pre": x.pre.lines if x.pre else {},
            "post": x.post.lines if x.post else {},
            "code": x.code.lines if x.code else {},
            "preToPost": x.pre_to_post,
            "postToPre": x.post_to_pre,
            "postToCode": x.post_to_code,
            "codeToPost": x.code_to_post,
        }
    ).decode()
