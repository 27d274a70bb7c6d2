"""Text from a log made inert wherever tlview puts it: control and bidi characters shown as the
escapes `repr` writes (`\x1b`, `\u202e`), never obeyed by a terminal or hidden in a script."""

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


def clean(text: object) -> str:
    """Log text made safe for a terminal: control characters shown as escapes, not obeyed."""
    s = str(text)
    return _UNSAFE.sub(_escaped, s) if _UNSAFE.search(s) else s


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


def json(data: bytes) -> bytes:
    """JSON text with the characters a terminal obeys written as `\\uXXXX`: the same values to
    any reader, and inert when the JSON is printed (such bytes are only ever inside strings)."""
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
