"""What changed in a recompile's inputs, in the same words for every renderer."""

from __future__ import annotations

from typing import Any

from tlview.model import InputChange


def change_text(ch: InputChange) -> str:
    """One input change in words, the same in every renderer."""

    def show(v: Any) -> str:
        if isinstance(v, str) and ch.field in ("dtype", "layout"):
            return v.removeprefix("torch.")
        if isinstance(v, list):
            return "[" + ", ".join(str(x) for x in v) + "]"
        return str(v)

    if ch.field == "added":
        return f"{ch.source} appeared ({show(ch.after)})"
    if ch.field == "removed":
        return f"{ch.source} disappeared ({show(ch.before)})"
    if ch.field == "dynamic":
        return f"{ch.source} (a number) became dynamic: {ch.after}"
    return f"{ch.source} {change_what(ch)}: {show(ch.before)} -> {show(ch.after)}"


def change_what(ch: InputChange) -> str:
    """What of an input changed, in words: `size[0]`, `dim 0 became dynamic`."""
    if ch.field == "dynamic":
        return "a number that became dynamic"
    if ch.field.startswith("dynamic["):
        became = "dynamic" if isinstance(ch.after, str) else "static"
        return f"dim {ch.field[len('dynamic[') : -1]} became {became}"
    if ch.field.startswith("hint["):
        return f"dim {ch.field[len('hint[') : -1]} (dynamic in both) example"
    if ch.field in ("added", "removed"):
        return "appeared" if ch.field == "added" else "disappeared"
    return ch.field
