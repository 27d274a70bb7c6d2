"""The tree keeps its shape: each stage imports only stages below it, and no module grows too big.

docs/architecture.md draws the same layers; this test is what keeps the drawing true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tlview"
MAX_LINES = 700

# Low to high: a module may import its own layer and the layers before it, never a later one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "tlview.errors",
            "tlview.model",
            "tlview.units",
            "tlview.dumps",
            "tlview.inert",
            "tlview.strings",
        ),
    ),
    ("runtime", ("tlview.runtime",)),
    ("logs", ("tlview.logs",)),
    ("parse", ("tlview.parse",)),
    ("index", ("tlview.index",)),
    ("analyze", ("tlview.analyze",)),
    ("tensors", ("tlview.tensors",)),
    ("replay", ("tlview.replay",)),
    ("render", ("tlview.render",)),
    ("drivers", ("tlview.load", "tlview.rebuild")),
    ("api", ("tlview", "tlview.cli", "tlview.commands", "tlview.__main__")),
]


def layer(module: str) -> int:
    """The layer of a module: the longest prefix that names one."""
    best, at = -1, -1
    for n, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, at = len(p), n
    assert at >= 0, module
    return at


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(path: Path) -> list[tuple[int, str]]:
    """Every tlview module a file imports, at the top or inside a function, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("tlview")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tlview"):
            names = [a.name for a in node.names]
            if node.module == "tlview" and names == ["__version__"]:
                continue  # the version is the package's, read by every writer of a file
            found.append((node.lineno, node.module))
    return found


def test_no_stage_imports_a_later_stage() -> None:
    wrong = []
    for name, path in modules().items():
        mine = layer(name)
        for line, target in imports(path):
            if layer(target) > mine:
                wrong.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {LAYERS[mine][0]} imports "
                    f"{target} ({LAYERS[layer(target)][0]})"
                )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_is_not_too_long(name: str) -> None:
    path = modules()[name]
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {n} lines"
