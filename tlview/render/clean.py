"""Text from a log made inert for a terminal: control characters shown as escapes, not obeyed.

The rule is `tlview/inert.py`'s, which repro scripts share."""

from __future__ import annotations

from tlview.inert import clean

__all__ = ["clean"]
