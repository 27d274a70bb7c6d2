"""`tlview show --bytecode`: a frame's bytecode before and after dynamo rewrote it, as torch
logs it for resume functions (`<co_name>_ORIGINAL_BYTECODE`, `<co_name>_MODIFIED_BYTECODE`),
shown as a diff: of the Python depyf decompiles it to when depyf is installed, else of the
logged instructions."""

from __future__ import annotations

from typing import Any

from tlview.analyze.bytecode import BytecodePair, bytecode_pairs, decompiled, instructions
from tlview.analyze.names import find_compile
from tlview.analyze.passes import unified
from tlview.commands.funnel import say  # say: text from the log, made inert
from tlview.commands.texts import WHOLE, kept, read
from tlview.index.keep import Keep
from tlview.runtime.output import stdout


def show_bytecode(path: str, ref: str, progress: Any = False) -> None:
    """Each frame's original and modified bytecode in the compile, as a diff."""
    stdout()
    report = read(path, progress)
    c = find_compile(report, ref)
    pairs = bytecode_pairs(report, c)
    if not pairs:
        say(
            f"compile {ref} of {path}: no bytecode (torch logs it for the resume functions "
            "of a graph break)"
        )
        return
    lines = {p.line for pair in pairs for p in (pair.original, pair.modified) if p is not None}
    keep = Keep(WHOLE, WHOLE, exact=True, lines=frozenset(lines), line=-1)
    again = read(path, progress, keep)
    texts = kept(*again.attempts)
    for pair in pairs:
        _say_pair(pair, texts)


def _say_pair(pair: BytecodePair, texts: dict[int, str]) -> None:
    a = texts.get(pair.original.line) if pair.original else None
    b = texts.get(pair.modified.line) if pair.modified else None
    say(f"== {pair.co_name}: {pair.where}")
    if a is None or b is None:
        which = "original" if a is None else "modified"
        say(f"the {which} bytecode is not in the log")
        return
    got = decompiled(a, pair.co_name), decompiled(b, pair.co_name)
    if got[0] is not None and got[1] is not None:
        say("decompiled by depyf (what dynamo made of the frame, as Python):")
        lines = unified(got[0], got[1], "original", "modified")
    else:
        say("as logged, offsets and argument numbers left out (pip install depyf: as Python):")
        lines = unified(instructions(a), instructions(b), "original", "modified")
    for line in lines or ["(the same)"]:
        say(line)
