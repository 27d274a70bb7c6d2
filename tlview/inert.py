"""Text from a log made inert wherever tlview puts it: control and bidi characters shown as the
escapes `repr` writes (`\x1b`, `\u202e`), never obeyed by a terminal or hidden in a script, and
no workflow command a CI runner would obey (`::error::`, `##[add-mask]`) in any line it prints."""

from __future__ import annotations

import re
import shlex

# C0/C1 controls (but TAB and newline), DEL, bidi overrides, isolates and marks, and line or
# paragraph separators: never sent to a terminal.
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# What may not be printable: anything but printable ASCII, TAB and newline.
_MAYBE = re.compile(r"[^\x20-\x7e\t\n]")


# What GitHub's runner obeys in a line of a step's output (its ActionCommand parser): `::NAME`
# at the line's start after white space, and the legacy `##[NAME` anywhere (Azure Pipelines,
# whose agent GitHub's runner grew from: `##vso[`). Its commands, for a `::` that a wrapped or
# folded line could bring to a line's start; matched as it matches them, ignoring case.
RUNNER_COMMANDS = (
    "add-mask", "add-matcher", "add-path", "debug", "echo", "endgroup", "error", "group",
    "internal-set-repo-path", "notice", "remove-matcher", "save-state", "set-env", "set-output",
    "set-workspace", "stop-commands", "warning",
)  # fmt: skip
_V2 = re.compile(
    r"^([^\S\n]*):(?=:)|:(?=:(?:" + "|".join(RUNNER_COMMANDS) + r")(?: |::))",
    re.IGNORECASE | re.MULTILINE,
)
_LEGACY = re.compile(r"#(?=#(?:vso)?\[)", re.IGNORECASE)
# Between the two characters a runner reads as one command's start: shown as it was, obeyed by
# none (no runner trims it: it is no white space to .NET or Python).
_BREAK = "\u200b"


def clean(text: object) -> str:
    """Log text made safe for a terminal and a CI log: control characters shown as escapes, not
    obeyed; no line of it, however it is wrapped, a workflow command (`commands`)."""
    s = str(text)
    return commands(_UNSAFE.sub(_escaped, s) if _UNSAFE.search(s) else s)


def commands(s: str) -> str:
    """S with every workflow command broken: a zero-width space between the two colons of a
    `::` that starts one of its lines or names a runner's command anywhere (where wrapping could
    start a line), and between the `##` of a `##[` (`##vso[`) anywhere. The text reads the same
    (`aten::add`, `x[:, ::2]` are left as they are); no runner obeys it."""
    if "::" in s:
        s = _V2.sub(_broken, s)
    if "##" in s:
        s = _LEGACY.sub("#" + _BREAK, s)
    return s


def _broken(m: re.Match[str]) -> str:
    return (m.group(1) or "") + ":" + _BREAK


def line(text: object) -> str:
    """A one-line field (a file or function name, a source) made inert and kept on one line."""
    return one_line(clean(text))


def one_line(s: str) -> str:
    """A one-line field's line feeds shown as `\\n`: no text of a log it holds starts a line of
    tlview's output (a `file:line: error:` a CI problem matcher would read as tlview's)."""
    return s.replace("\n", "\\n") if "\n" in s else s


def controls(text: str) -> str:
    """A line tlview itself wrote as a workflow command (`--annotations github`), every text of
    the log in it already `clean`: only control characters escaped, its own `::` kept."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def code(text: str) -> str:
    """Code from a log (a graph's print_readable) with every character `repr` would escape in a
    string written as that escape: FX never prints one, so in a comment it becomes text, in a
    string the same value, and anywhere else the check that the script parses fails."""
    return _MAYBE.sub(lambda m: m.group() if m.group().isprintable() else _escaped(m), text)


def _escaped(m: re.Match[str]) -> str:
    return repr(m.group())[1:-1]


# The UTF-8 of what _UNSAFE holds past ASCII (JSON writers escape the C0 controls and DEL is
# harmless there): C1 controls, the Arabic letter mark, bidi marks, overrides and isolates,
# line and paragraph separators.
_UNSAFE_UTF8 = re.compile(
    rb"\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
)


# A legacy workflow command in JSON text: only ever inside a string (tlview's own brackets follow
# no `##`), where `\u005b` is the same `[` to any reader.
_LEGACY_UTF8 = re.compile(rb"##((?:vso)?)\[", re.IGNORECASE)


def json(data: bytes) -> bytes:
    """JSON text with the characters a terminal obeys written as `\\uXXXX`, and no `##[` a CI
    runner obeys: the same values to any reader, and inert when the JSON is printed (such bytes
    are only ever inside strings; a JSON line starts with none of them, so never with `::`)."""
    if b"##" in data:
        data = _LEGACY_UTF8.sub(rb"##\1\\u005b", data)
    if b"\xc2" not in data and b"\xe2" not in data and b"\xd8" not in data:
        return data  # memchr: the common case, at once
    return _UNSAFE_UTF8.sub(_json_escaped, data)


def _json_escaped(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8"))


def command(*words: str) -> str:
    """A command line tlview suggests, every word quoted for a POSIX shell (`shlex.quote`): a
    word from a log (an artifact's name, a log's file name in `LOG:ID`) pasted is one argument,
    never a `;`, `$(...)` or glob the shell obeys. Placeholders (PATH, ID) quote as themselves."""
    return " ".join(shlex.quote(w) for w in words)
