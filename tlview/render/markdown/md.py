"""Markdown pieces whose log text stays text: every character CommonMark or GitHub could read
as markup escaped, and the words GitHub links by itself (mentions, issue refs, URLs) broken."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tlview.inert import clean
from tlview.version import __version__

MAX_ROWS = 10  # rows of a table before "... N more"
MAX_CELL = 240  # characters of log text in one cell
# GitHub's own limit is 65,536 characters for a comment, 1 MiB for a step summary: a summary
# stays under the first, whatever the log holds.
MAX_CHARS = 60_000
# Every ASCII punctuation character: CommonMark lets a backslash escape each, and an escaped one
# starts nothing (emphasis, link, image, autolink, HTML, code span, table cell, heading, list).
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
# What GitHub links in rendered text whatever the Markdown said: mentions and e-mail addresses
# (cmark-gfm's autolinker: `ops@-evil.example` too, so every `@`), issue references (`#123`,
# `owner/repo#123`, `GH-123`) and bare URLs: a zero-width space after the character that
# starts them, so no pattern matches. A commit id (7 to 40 hex digits, or any prefix of 7 of
# one) gets one after every 6 of its digits.
_LINKED = re.compile(r"@|#(?=\d)|:(?=//)|(?i:\bwww(?=\.)|\bgh(?=-\d))")
_HEX = re.compile(r"\b[0-9a-fA-F]{7,40}\b")
_ZWSP = "\u200b"
_SPACE = re.compile(r"\s+")


def text(value: object, limit: int = MAX_CELL) -> str:
    """Text from a log as inert inline Markdown: one line, cut to LIMIT characters."""
    s = _SPACE.sub(" ", clean(value)).strip()
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    s = _LINKED.sub(lambda m: m.group() + _ZWSP, s)
    s = _HEX.sub(_hex, s)
    return _PUNCT.sub(r"\\\1", s)


def _hex(m: re.Match[str]) -> str:
    h = m.group()
    return _ZWSP.join(h[i : i + 6] for i in range(0, len(h), 6))


def table(
    head: Sequence[str], rows: Iterable[Sequence[str]], total: int, what: str, where: str
) -> list[str]:
    """A GFM table of cells already made inert (`text`), with a line for the rows left out
    (WHAT they are, WHERE they all are)."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shown = 0
    for row in rows:
        out.append("| " + " | ".join(c or " " for c in row) + " |")
        shown += 1
    if total > shown:
        out.append("")
        out.append(f"… and {total - shown:,} more {what} ({where} lists them all)")
    return out


def marker(to_file: bool) -> list[str]:
    """The first line of a file tlview wrote (hidden when rendered), so `-o` may replace it."""
    return [f"<!-- written by tlview {__version__} -->", ""] if to_file else []


def fit(lines: list[str]) -> str:
    """The document, cut at a line to MAX_CHARS so GitHub takes it as a comment."""
    out: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > MAX_CHARS - 200:
            out.append("")
            out.append(f"… cut at {MAX_CHARS:,} characters")
            break
        out.append(line)
    return "\n".join(out) + "\n"
