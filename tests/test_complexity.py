"""Functions stay small: radon's cyclomatic complexity over tlview/, as issue 43 set the bound.

At most MAX_OVER_20 functions over 20, each named in OVER_20 with why it stays whole, and at
most MAX_SHARE_OVER_10 of all functions over 10. ruff's C901 counts fewer branches than radon
(it skips comprehensions and boolean operators), so it cannot stand in for this check.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Function

PACKAGE = Path(__file__).resolve().parent.parent / "tlview"
MAX_OVER_20 = 10
MAX_SHARE_OVER_10 = 0.07

# A function left over 20, by "module:qualified name", and why it stays one function.
OVER_20: dict[str, str] = {}


def functions() -> list[tuple[str, int]]:
    """("module:Class.name", complexity) of every function and method, closures too."""
    out: list[tuple[str, int]] = []

    def walk(module: str, blocks: list[object]) -> None:
        for b in blocks:  # radon lists each method on its own too, beside its class
            if isinstance(b, Function):
                name = f"{b.classname}.{b.name}" if b.classname else b.name
                out.append((f"{module}:{name}", b.complexity))
                walk(module, list(b.closures))

    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        walk(module, list(cc_visit(path.read_text())))
    return out


def test_at_most_ten_functions_over_20_each_with_its_reason() -> None:
    over = {name: n for name, n in functions() if n > 20}
    unnamed = sorted(f"{name} ({n})" for name, n in over.items() if name not in OVER_20)
    assert not unnamed, "over 20, and not in OVER_20 with a reason: " + ", ".join(unnamed)
    assert len(over) <= MAX_OVER_20, sorted(over)
    gone = sorted(set(OVER_20) - set(over))
    assert not gone, "in OVER_20 but no longer over 20 (drop them): " + ", ".join(gone)


def test_few_functions_over_10() -> None:
    got = functions()
    over = sorted((n, name) for name, n in got if n > 10)
    share = len(over) / len(got)
    assert share <= MAX_SHARE_OVER_10, (
        f"{len(over)} of {len(got)} functions over 10 ({share:.1%}): "
        + ", ".join(f"{name} ({n})" for n, name in reversed(over[-15:]))
    )


def test_the_count_sees_methods_and_closures() -> None:
    names = {name for name, _ in functions()}
    assert "tlview.analyze.compiles:Analysis.breaks" in names  # a method
    assert "tlview.runtime.split:Forking.text" in names
