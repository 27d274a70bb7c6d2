"""Text from a log made inert for a terminal: control characters shown as escapes, not obeyed."""

from __future__ import annotations

import re

# C0/C1 controls (but TAB and newline), DEL, bidi overrides, isolates and marks, and line or
# paragraph separators: never sent to a terminal.
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def clean(text: object) -> str:
    """Log text made safe for a terminal: control characters shown as escapes, not obeyed."""
    s = str(text)
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], s) if _UNSAFE.search(s) else s
