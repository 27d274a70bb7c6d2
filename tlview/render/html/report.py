"""The self-contained HTML page: one file, inline CSS and JS, offline, autoescaped, CSP-locked."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import IO

import jinja2
from markupsafe import Markup

from tlview.analyze.names import is_named
from tlview.analyze.summary import Overview
from tlview.model import Report
from tlview.render import Options, Split
from tlview.render.html.page import Page, build
from tlview.render.html.pick import Picked
from tlview.render.html.section import CompileView, Sections
from tlview.runtime import templates
from tlview.runtime.output import Output
from tlview.strings import Names
from tlview.units import nbytes, short_path

BATCH = 1 << 16  # characters of the page encoded and written at a time
Only = tuple[str, Picked] | None  # --compile-id, and whether it names a compile


def page_environment() -> jinja2.Environment:
    """The templates' environment, with the page's filters (the diff page uses them too)."""
    env = templates.environment()
    env.filters.update(nbytes=nbytes, short_path=short_path, text=text, name=name)
    return env


@jinja2.pass_context
def name(ctx: jinja2.runtime.Context, s: str | None) -> str:
    """A long name as the page being drawn writes it: whole the first time, then by number
    (tlview/strings.py); "" for None. A page without numbering writes it whole."""
    if not s:
        return ""
    names = getattr(ctx.get("page"), "names", None)
    return s if not isinstance(names, Names) else names.shown(s)


def text(s: object) -> Markup:
    """Escaped for element content (not attributes): quotes stay as they are, code is full of them."""
    v = str(s)
    if "&" in v or "<" in v or ">" in v:
        v = v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(v)


def _asset(env: jinja2.Environment, name: str) -> tuple[Markup, str]:
    """An inline asset's text and its CSP hash: only these exact bytes may run or style the page."""
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, name)
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return Markup(source), "'sha256-" + base64.b64encode(digest).decode() + "'"


def render(report: Report, full: bool = False, only: Only = None) -> str:
    """The page as one string (tests use it; `stream` writes the same thing)."""
    return "".join(_chunks(report, full, only, None)[1])


def _chunks(
    report: Report, full: bool, only: Only, split: Split | None
) -> tuple[Page, Iterator[str]]:
    env = page_environment()
    css, css_hash = _asset(env, "report.css")
    js, js_hash = _asset(env, "report.js")
    csp = (
        "default-src 'none'; "
        f"script-src {js_hash}; style-src {css_hash}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    page = build(report, full, only, split)
    tmpl = env.get_template("report.html.j2")
    parts = sections(env, page)
    return page, tmpl.generate(page=page, css=css, js=js, csp=csp, sections=parts)


def sections(env: jinja2.Environment, page: Page) -> Iterator[Markup]:
    """Each compile's section, in order; on a large page the split may have a second process
    draw the later ones while this one draws the earlier ones."""
    rows = page.compiles
    if not rows:
        return
    tmpl = env.get_template("section.html.j2")
    few = len(rows) <= 3
    detail = {r.n: r.detail for r in rows}

    def weigh(n: int, cost: int) -> int:
        # Every compile between the first and last shown is read again; drawing a section
        # costs about 3 times that, and 10 times for one shown in full (measured on inductor
        # and aot_eager logs).
        shown = detail.get(n)
        return cost if shown is None else cost * (10 if shown else 3)

    def draw(v: CompileView) -> str:
        return tmpl.render(v=v, page=page, few=few)

    span = (rows[0].n, rows[-1].n + 1)
    yield from map(Markup, page.split.text(Sections(page, draw), span, weigh))


def stream(
    report: Report,
    out: IO[bytes],
    full: bool = False,
    only: Only = None,
    split: Split | None = None,
) -> Overview:
    """Write the page to a binary stream, BATCH characters or more at a time; return its
    figures (for `--fail-on`). `only`: --compile-id and the compiles it picks, shown alone."""
    page, chunks = _chunks(report, full, only, split)
    batch: list[str] = []
    size = 0
    for piece in chunks:  # template pieces, and whole sections: written 64 KB or more at a time
        batch.append(piece)
        size += len(piece)
        if size >= BATCH:
            out.write("".join(batch).encode("utf-8", "replace"))
            batch.clear()
            size = 0
    out.write("".join(batch).encode("utf-8", "replace"))
    return page.o


def write(report: Report, out: Output, opts: Options, split: Split | None = None) -> Overview:
    """The page (the renderer of `--format html`); `--compile-id` shows that compile alone."""
    ref = opts.compile_id
    only = None if ref is None else (ref, lambda c: is_named(c, ref))
    with out.open() as f:
        return stream(report, f, full=opts.full, only=only, split=split)
