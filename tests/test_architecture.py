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
            "tlview.counting",
            "tlview.reprs",
            "tlview.model",
            "tlview.aside",
            "tlview.units",
            "tlview.dumps",
            "tlview.inert",
            "tlview.strings",
            "tlview.version",
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
    ("drivers", ("tlview.load", "tlview.rebuild", "tlview.write")),
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
    """Every tlview module a file imports, at the top, inside a function or for type checking,
    absolute or relative (`from . import x`), with its line; `from tlview.index import parts`
    is an import of tlview.index.parts."""
    known = modules()
    here = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("tlview")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per further dot
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            if not base.startswith("tlview"):
                continue
            names = [a.name for a in node.names]
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
            found += [(node.lineno, m) for m in subs] or [(node.lineno, base)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph: each set of modules that reach one another (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    """No module imports itself through others, at the top or lazily: a lazy import that
    breaks a cycle at run time still ties the two modules into one."""
    graph = {name: {t for _, t in imports(path) if t != name} for name, path in modules().items()}
    for group in cycles(graph):
        pytest.fail("import cycle: " + " <-> ".join(group))


def test_the_cycle_check_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    got = dict(imports(PACKAGE / "index" / "log.py"))  # parts, imported in a function
    assert "tlview.index.parts" in got.values()


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


# What a renderer never touches: the machinery that splits a pass over two processes. It hands
# its passes to a `render.Split`; runtime/split.py is the one driver (docs/architecture.md).
SPLIT_MACHINERY = (
    "tlview.runtime.halves",
    "tlview.runtime.cores",
    "tlview.runtime.fork",
    "tlview.runtime.store",
    "tlview.runtime.split",
)


def test_no_renderer_touches_the_split_machinery() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {target}"
        for name, path in modules().items()
        if name.startswith("tlview.render")
        for line, target in imports(path)
        if target.startswith(SPLIT_MACHINERY)
    ]
    assert not wrong, "\n".join(wrong)


def test_stages_read_the_version_from_its_module() -> None:
    """`from tlview import __version__` inside a stage runs the API package's code first; a
    stage reads tlview.version, as the API does."""
    wrong = []
    for name, path in modules().items():
        if layer(name) == len(LAYERS) - 1:  # the API itself
            continue
        wrong += [
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom)
            and node.module == "tlview"
            and not node.level
            and any(a.name == "__version__" for a in node.names)
        ]
    assert not wrong, "import __version__ from tlview.version: " + ", ".join(wrong)


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_is_not_too_long(name: str) -> None:
    path = modules()[name]
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {n} lines"
