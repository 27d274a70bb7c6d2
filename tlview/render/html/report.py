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
from tlview.render import Options
from tlview.render.html import section
from tlview.render.html.page import Page, build
from tlview.render.html.pick import Picked
from tlview.runtime import halves, templates
from tlview.runtime.output import Output
from tlview.strings import forked, numbering, shown
from tlview.units import nbytes, short_path

BATCH = 1 << 16  # characters of the page encoded and written at a time
Only = tuple[str, Picked] | None  # --compile-id, and whether it names a compile


def page_environment() -> jinja2.Environment:
    """The templates' environment, with the page's filters (the diff page uses them too)."""
    env = templates.environment()
    env.filters.update(nbytes=nbytes, short_path=short_path, text=text, name=shown)
    return env


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
    return "".join(_chunks(report, full, only)[1])


def _chunks(report: Report, full: bool, only: Only) -> tuple[Page, Iterator[str]]:
    env = page_environment()
    css, css_hash = _asset(env, "report.css")
    js, js_hash = _asset(env, "report.js")
    csp = (
        "default-src 'none'; "
        f"script-src {js_hash}; style-src {css_hash}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    page = build(report, full, only)
    tmpl = env.get_template("report.html.j2")
    parts = sections(env, page)
    return page, tmpl.generate(page=page, css=css, js=js, csp=csp, sections=parts)


def sections(env: jinja2.Environment, page: Page) -> Iterator[Markup]:
    """Each compile's section, in order; on a large page the later ones come from a second
    process that rendered them while this one rendered the earlier ones."""
    tmpl = env.get_template("section.html.j2")
    few = len(page.compiles) <= 3

    def render(start: int, stop: int | None) -> Iterator[str]:
        for v in section.compile_views(page, start, stop):
            yield tmpl.render(v=v, page=page, few=few)

    cut = _middle(page)
    if cut is None:
        yield from map(Markup, render(0, None))
        return

    def later(f: IO[bytes]) -> None:
        forked("b")  # names first shown here are numbered apart from this process's
        for text in render(cut, None):
            f.write(text.encode("utf-8", "replace"))

    helper = halves.Later(later)
    yield from map(Markup, render(0, cut))
    ok, _ = helper.result()
    yield from map(Markup, helper.text() if ok else render(cut, None))


def _middle(page: Page) -> int | None:
    """The compile (by place in the report) the later half of the sections starts at, or None."""
    rows = page.compiles
    if len(rows) < 2:
        return None
    costs = halves.costs(page.report)
    first, last = rows[0].n, rows[-1].n
    # Every compile between the first and last shown is read again; drawing a section costs
    # about 3 times that, and 10 times for one shown in full (measured on inductor and
    # aot_eager logs).
    weights = costs[first : last + 1]
    for r in rows:
        weights[r.n - first] *= 10 if r.detail else 3
    cut = halves.middle(weights)
    return None if cut is None else first + cut


def stream(report: Report, out: IO[bytes], full: bool = False, only: Only = None) -> Overview:
    """Write the page to a binary stream, BATCH characters or more at a time; return its
    figures (for `--fail-on`). `only`: --compile-id and the compiles it picks, shown alone."""
    with numbering():  # a long name is written whole once, then referred to (tlview/strings.py)
        return _stream(report, out, full, only)


def _stream(report: Report, out: IO[bytes], full: bool, only: Only) -> Overview:
    page, chunks = _chunks(report, full, only)
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


def write(report: Report, out: Output, opts: Options) -> Overview:
    """The page (the renderer of `--format html`); `--compile-id` shows that compile alone."""
    ref = opts.compile_id
    only = None if ref is None else (ref, lambda c: is_named(c, ref))
    with out.open() as f:
        return stream(report, f, full=opts.full, only=only)
