"""Markdown (`--format markdown`, a CI job summary): no text of a log becomes a link, a mention,
an image or HTML. Checked with GitHub's own parser, cmark-gfm (its Python bindings, with the
autolink extension GitHub runs), and with markdown-it's CommonMark; then the text GitHub shows
must hold none of the references GitHub links after rendering: mentions, e-mail addresses,
`#123`, `owner/repo#123`, `GH-123`, commit ids and bare URLs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import cmarkgfm
import pytest
from crafted import interned, metrics, record, start
from damage import EXIT_OK, assert_clean_exit, run
from helpers import FIXTURES
from markdown_it import MarkdownIt

from tlview.render.markdown.md import text

# Each way GitHub links text, as a name or a reason in a log.
LINKS = [
    "ops@-evil.example",
    "user@example.com",
    "@octocat",
    "@org/team",
    "GH-26",
    "gh-27",
    "#12",
    "owner/repo#34",
    "owner/repo@a5c3785",
    "a5c3785ed8d6a35868bc169f07e40e889087fd2e",
    "abc1234",
    "https://evil.example/x",
    "www.evil.example",
    "mailto:x@y.example",
    "xmpp:a@b.example",
    "[x](https://evil.example)",
    "<https://evil.example>",
    "![i](http://evil.example/i.png)",
    "<img src=x>",
]
# What GitHub links in the text it shows (the HTML's text, tags gone).
REFERENCE = re.compile(
    r"@[\w-]|(?<![\w/])#\d|\w/\w+#\d|\bGH-\d|\b[0-9a-f]{7,40}\b|://|\bwww\.",
    re.IGNORECASE,
)
# Tags of the summary's own structure; anything else came from the log.
OWN_TAGS = {"p", "table", "thead", "tbody", "tr", "th", "td", "h2", "h3", "h4", "ul", "li", "em",
            "strong", "code", "hr", "br", "details", "summary"}  # fmt: skip
ACTIVE = {"link_open", "image", "html_inline", "html_block", "autolink"}


def shown(doc: str) -> tuple[set[str], str]:
    """The tags cmark-gfm makes of DOC (GitHub's flavour, autolinks on) and the text it shows."""
    body = "\n".join(ln for ln in doc.splitlines() if not ln.startswith("<!-- written by tlview"))
    page = cmarkgfm.github_flavored_markdown_to_html(body)
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    return tags, html.unescape(re.sub(r"<[^>]*>", " ", page))


def assert_inert(doc: str) -> None:
    tags, words = shown(doc)
    assert tags <= OWN_TAGS, tags - OWN_TAGS
    assert not REFERENCE.search(words), REFERENCE.findall(words)
    toks = MarkdownIt("commonmark").enable("table").parse(doc)
    kinds = {t.type for t in toks} | {c.type for t in toks for c in t.children or []}
    assert not kinds & ACTIVE - {"html_block"}, kinds & ACTIVE


@pytest.mark.parametrize("link", LINKS)
def test_each_way_github_links_stays_text(link: str) -> None:
    """In a cell and in a line, each linking pattern renders as its own text, linking nothing
    (before: `ops@-evil.example` a mailto link, `GH-26` and a commit id references)."""
    cell = text(f"a {link} b")
    assert_inert(f"| x |\n|---|\n| {cell} |\n\n{cell}\n")
    _, words = shown(cell)
    assert words.replace("\u200b", "").split() == f"a {link} b".split()


def markdown_log(tmp: Path) -> Path:
    """Every pattern in a function's name, a file's, a failure's type and reason, a graph
    break's reason and a guard."""
    names = " ".join(LINKS)
    parts = [interned("/src/" + "_".join(LINKS).replace("/", "_") + ".py")]
    for k, name in enumerate(LINKS[:12]):
        cid = (k, 0)
        parts += [
            start(cid, name=name),
            record("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, cid,
                   payload=f"Graph break in user code at /src/m.py:3\nGraph Break Reason: {names}"),
            metrics(cid, co_name=name, fail_type=name, fail_reason=names,
                    fail_user_frame_filename=f"/src/{name}.py", fail_user_frame_lineno=40 + k),
        ]  # fmt: skip
    guard = record("artifact", {"name": "recompile_reasons", "encoding": "json"}, (0, 1),
                   payload=f'["{names.replace(chr(34), "")}"]')  # fmt: skip
    log = tmp / "links.log"
    log.write_bytes(b"".join([*parts, start((0, 1)), guard, metrics((0, 1))]))
    return log


def test_a_summary_of_a_log_of_links_links_nothing(tmp_path: Path) -> None:
    """`report` and `diff` (both ways) as Markdown: every field of the log, every pattern."""
    log = markdown_log(tmp_path)
    demo = str(FIXTURES / "demo.log")
    for args in (
        ("report", str(log)),
        ("report", str(log), "--fail-on", "graph-breaks:0"),
        ("diff", demo, str(log)),
        ("diff", str(log), demo),
    ):
        res = run(*args, "--format", "markdown")
        assert res.exit_code in (EXIT_OK, 3), res.output
        assert_inert(res.stdout)
        assert "ops@\u200b-evil.example" in res.stdout.replace("\\", "")  # shown, not linked
    res = run("report", str(log), "--format", "markdown")
    assert_clean_exit(res, EXIT_OK, "report")
