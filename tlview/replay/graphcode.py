"""Read the `print_readable` code of a logged FX graph: its inputs, outputs, calls and names.

The text is parsed with `ast` only to look at it: no code object is made and nothing runs.
The checks here are about shape (is this the code of a graph module?), not a sandbox: code a
graph calls through `torch` can do anything, which is why running a repro is the user's choice.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from dataclasses import dataclass, field

from tlview.index.annotations import DTYPES, TensorType, sym_expr, tensor_type
from tlview.model import Dim

__all__ = ["DTYPES", "TensorType", "sym_expr", "tensor_type"]  # their home: index.annotations

# Globals torch.fx gives the code it generates (`torch/fx/graph.py`, `_register_custom_builtin`).
FX_GLOBALS = frozenset({"torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree"})
# Standard modules whose functions fx names `<module>_<function>` when it calls them.
STD_MODULES = ("_operator", "operator", "math")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOL = re.compile(r"[a-z]+[0-9]+", re.ASCII)  # s0, u3, j1: shape-env symbols and nested ints


class GraphCodeError(Exception):
    """The payload is not the code of a graph module tlview can rebuild; the message says why."""


@dataclass(frozen=True, slots=True)
class Param:
    """An input of the graph's forward: its placeholder name and what its annotation says."""

    name: str
    annotation: str | None
    tensor: TensorType | None = None
    sym: str | None = None  # the expression of a `Sym(...)` annotation


@dataclass(slots=True)
class GraphCode:
    """What a graph's code says about itself, for binding inputs and checking outputs."""

    text: str
    name: str  # the class name, GraphModule as print_readable writes it
    params: list[Param]
    outputs: list[str | None]  # returned node names (None where an output is not a plain name)
    annotations: dict[str, str] = field(default_factory=dict)  # node name -> annotation
    bodies: dict[str, int] = field(default_factory=dict)  # nested class path -> its arg count
    # nested class path -> how many values it returns as a tuple (None: not a tuple)
    body_outputs: dict[str, int | None] = field(default_factory=dict)
    attrs: list[str] = field(default_factory=list)  # self.X reads that are not nested classes
    missing: list[str] = field(default_factory=list)  # self.X.Y reads with no nested class
    ops: list[str] = field(default_factory=list)  # torch.ops.NS.OP as called
    calls: list[str] = field(default_factory=list)  # every dotted call target, sorted
    # Every `torch.x.y` it names, called or passed on (but `torch.ops.ns.op`), longest only
    torch_names: list[str] = field(default_factory=list)
    free: list[str] = field(default_factory=list)  # names read but defined nowhere in the code
    # The inputs (placeholder names) and `self.X` reads ("self.X") the forward changes in place.
    mutated: list[str] = field(default_factory=list)

    def output_type(self, name: str | None) -> TensorType | None:
        return tensor_type(self.annotations.get(name, "")) if name else None


def is_identifier(name: str) -> bool:
    return bool(_IDENT.fullmatch(name)) and not keyword.iskeyword(name)


def is_symbol(name: str) -> bool:
    return bool(_SYMBOL.fullmatch(name))


# -- size expressions ----------------------------------------------------------------------
# ASCII only: `\d` also matches other scripts' digits (U+0663), which are no Python literal.
_EXPR_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|\*\*|[-+*%(),]))", re.ASCII)
_FUNCS = {"Max": "max", "Min": "min"}


def dim_code(dim: Dim, known: set[str], lookup: str = "sym") -> str | None:
    """Python code for a logged size (`8`, `s0`, `3*s77`, `Max(1, s0)`), or None if it can't be.

    Symbols become `sym["s0"]`; only integers, known symbols and `+ - * // % ( ) Max Min` are
    let through, so nothing the log says can become other code.
    """
    if isinstance(dim, int):
        return str(dim)
    text = dim.strip()
    pos, out = 0, []
    while pos < len(text):
        m = _EXPR_TOKEN.match(text, pos)
        if not m:
            return None
        pos = m.end()
        num, name, op = m.groups()
        if num is not None:
            out.append(num)
        elif name is not None:
            if name in _FUNCS:
                out.append(_FUNCS[name])
            elif name in known and is_symbol(name):
                out.append(f"{lookup}[{name!r}]")
            else:
                return None
        else:
            out.append({"(": "(", ")": ")", ",": ", ", "**": "**"}.get(op, f" {op} "))
    code = "".join(out).strip()
    return code if code and _balanced(code) else None


def _balanced(code: str) -> bool:
    depth = 0
    for ch in code:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def symbols_in(dim: Dim) -> list[str]:
    if isinstance(dim, int):
        return []
    return [t for t in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", dim) if is_symbol(t)]


# -- the graph code ------------------------------------------------------------------------
_STMTS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return, ast.Pass)
_FORBIDDEN = (
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.Lambda,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
    ast.NamedExpr,
)
_BUILTINS = frozenset(dir(builtins))
# Builtins fx's code names (`slice(None, None, 2)`, a `len` or `max` of values): pure functions
# of values. Any other (`__import__`, `eval`, `exec`, `open`, `getattr`, `compile`, `globals`),
# called or passed on, is in no code fx printed.
FX_BUILTINS = frozenset(
    {
        "Ellipsis", "abs", "all", "any", "bool", "complex", "dict", "divmod", "enumerate", "float",
        "frozenset", "int", "isinstance", "len", "list", "max", "min", "pow", "range",
        "reversed", "round", "set", "slice", "str", "sum", "tuple", "zip",
    }
)  # fmt: skip


def parse(text: str) -> GraphCode:
    """Read a `print_readable` payload; raise GraphCodeError saying why it is not graph code."""
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as e:
        raise GraphCodeError(
            f"the graph code does not parse as Python (line {e.lineno}: {e.msg})"
        ) from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise GraphCodeError(
            f"the graph code does not parse as Python ({type(e).__name__})"
        ) from None
    body = [s for s in tree.body if not _is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.ClassDef):
        raise GraphCodeError("the graph code is not one class (not a print_readable payload)")
    top = body[0]
    g = GraphCode(text=text, name=top.name, params=[], outputs=[])
    classes: dict[str, ast.ClassDef] = {}
    _check_class(top, "", classes)
    fwd = _forward(top)
    g.params = [_param(a) for a in fwd.args.args[1:]]
    g.outputs = _outputs(fwd)
    for stmt in fwd.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            ann = stmt.annotation
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                g.annotations[stmt.target.id] = ann.value
    for p in g.params:
        if p.annotation is not None:
            g.annotations[p.name] = p.annotation
    # Parents before children, so a body is set before the bodies nested in it.
    g.bodies = {
        p: len(_forward(classes[p]).args.args) - 1
        for p in sorted((p for p in classes if p), key=lambda p: (p.count("."), p))
    }
    g.body_outputs = {p: _tuple_size(_forward(classes[p])) for p in g.bodies}
    attrs: set[str] = set()
    missing: set[str] = set()
    ops: set[str] = set()
    calls: set[str] = set()
    free: set[str] = set()
    for path, cls in classes.items():
        f = _forward(cls)
        defined = {a.arg for a in f.args.args} | _assigned(f)
        for node in ast.walk(f):
            odd = _not_fx(node, defined)
            if odd:
                raise GraphCodeError(
                    f"line {getattr(node, 'lineno', '?')}: {odd}, which fx never prints"
                )
            if isinstance(node, ast.Attribute) and _is_self(node.value):
                child = f"{path}.{node.attr}" if path else node.attr
                if child in classes:
                    continue
                if path:
                    missing.add(child)
                else:
                    attrs.add(node.attr)
            elif isinstance(node, ast.Call):
                target = _dotted(node.func)
                if target:
                    calls.add(target)
                    if target.startswith("torch.ops.") and target.count(".") >= 3:
                        ops.add(".".join(target.split(".")[:4]))
            elif (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id not in defined
                and node.id not in _BUILTINS
            ):
                free.add(node.id)
    for a in attrs:
        if not is_identifier(a):
            raise GraphCodeError(f"the graph reads an attribute with a strange name: {a!r}")
    g.attrs = sorted(attrs)
    g.missing = sorted(missing)
    g.ops = sorted(ops)
    g.calls = sorted(calls)
    g.torch_names = _torch_names(classes)
    g.free = sorted(free - FX_GLOBALS)
    g.mutated = _mutated(fwd)
    return g


# What `torch.ops` has besides op namespaces: a graph's `torch.ops.X` is always `torch.ops.ns.op`.
_OPS_OWN = frozenset({"load_library", "import_module", "loaded_libraries"})


def _torch_names(classes: dict[str, ast.ClassDef]) -> list[str]:
    """The dotted names rooted at `torch` the forwards read (`torch.nn.functional.linear`), each
    only at its longest; `torch.ops.ns.op` left to the op check, `torch.ops.load_library` not."""
    names: set[str] = set()
    for cls in classes.values():
        for node in ast.walk(_forward(cls)):
            name = _dotted(node) if isinstance(node, ast.Attribute) else None
            if name is None or not name.startswith("torch."):
                continue
            parts = name.split(".")
            if parts[1] == "ops" and len(parts) > 2 and parts[2] in _OPS_OWN:
                raise GraphCodeError(
                    f"line {getattr(node, 'lineno', '?')}: {name}, which fx never prints"
                )
            if parts[1] != "ops":
                names.add(name)
    # Sorted, a name's longer ones come right after it ("." sorts before every identifier's
    # characters): one look at the next name says whether it is the longest.
    order = sorted(names)
    after = [*order[1:], ""] if order else []
    return [n for n, m in zip(order, after, strict=True) if not m.startswith(n + ".")]


def _not_fx(node: ast.AST, defined: set[str]) -> str | None:
    """What of NODE no code fx printed holds: a call of what a call or an index gives (fx calls
    a name, `torch.x.y` or a value's method), an attribute of a call's result, a dunder
    attribute, a builtin fx never names. Such code is a log's, not a graph's."""
    if isinstance(node, ast.Call) and _dotted(node.func) is None:
        return f"a call of {ast.unparse(node.func)[:60]!r} (not of a name or a value's method)"
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("__") and node.attr.endswith("__"):
            return f"the attribute {node.attr}"
        if isinstance(node.value, ast.Call):
            return f"an attribute of a call's result ({node.attr})"
    if (
        isinstance(node, ast.Name)
        and node.id in _BUILTINS
        and node.id not in FX_BUILTINS
        and node.id not in defined
    ):
        return f"the builtin {node.id}"
    return None


def _mutated(fwd: ast.FunctionDef) -> list[str]:
    """What the forward changes in place, of its inputs and the `self.X` it reads: the receiver
    of `x.add_(...)`, the target of `x += 1`, the first argument of `torch.ops.aten.add_.Tensor`
    and the list of `torch._foreach_add_`, followed back through `y = x` to what `x` is."""
    what: dict[str, str] = {a.arg: a.arg for a in fwd.args.args[1:]}
    for stmt in fwd.body:  # straight-line code: each name is bound before it is used
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and stmt.targets else None
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else target
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or value is None:
            continue
        if isinstance(value, ast.Name) and value.id in what:
            what[target.id] = what[value.id]
        elif isinstance(value, ast.Attribute) and _is_self(value.value):
            what[target.id] = f"self.{value.attr}"
    hit: set[str] = set()

    def mark(node: ast.expr) -> None:
        if isinstance(node, ast.Name) and node.id in what:
            hit.add(what[node.id])
        elif isinstance(node, ast.List | ast.Tuple):
            for e in node.elts:
                mark(e)

    for node in ast.walk(fwd):
        if isinstance(node, ast.AugAssign):
            mark(node.target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            parts = (_dotted(node.func) or "").split(".")
            if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
                if parts[3].endswith("_") and node.args:
                    mark(node.args[0])
            elif parts[:1] == ["torch"]:
                if parts[-1].startswith("_foreach_") and parts[-1].endswith("_") and node.args:
                    mark(node.args[0])
            elif node.func.attr.endswith("_") and not node.func.attr.startswith("__"):
                mark(node.func.value)  # a method that changes its tensor: x.add_(y)
    return sorted(hit)


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)


def _check_class(cls: ast.ClassDef, path: str, classes: dict[str, ast.ClassDef]) -> None:
    where = f"class {cls.name} (line {cls.lineno})"
    if cls.decorator_list or cls.keywords or len(cls.bases) != 1:
        raise GraphCodeError(f"{where}: not a plain torch.nn.Module class")
    if _dotted(cls.bases[0]) not in ("torch.nn.Module", "torch.fx.GraphModule"):
        raise GraphCodeError(f"{where}: does not derive from torch.nn.Module")
    if not is_identifier(cls.name):
        raise GraphCodeError(f"{where}: not an identifier")
    classes[path] = cls
    forwards = 0
    for s in cls.body:
        if isinstance(s, ast.FunctionDef) and s.name == "forward":
            forwards += 1
            _check_forward(s)
        elif isinstance(s, ast.ClassDef):
            _check_class(s, f"{path}.{s.name}" if path else s.name, classes)
        elif not (_is_docstring(s) or isinstance(s, ast.Pass)):
            raise GraphCodeError(
                f"{where}: unexpected {type(s).__name__} at line {s.lineno} "
                "(a graph class holds only forward and nested graph classes)"
            )
    if forwards != 1:
        raise GraphCodeError(f"{where}: has {forwards} forward methods, expected 1")


def _check_forward(f: ast.FunctionDef) -> None:
    where = f"forward at line {f.lineno}"
    a = f.args
    if f.decorator_list or f.returns is not None:
        raise GraphCodeError(f"{where}: decorated or annotated (not fx code)")
    if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or a.kw_defaults:
        raise GraphCodeError(f"{where}: takes arguments fx code does not have")
    if not a.args or a.args[0].arg != "self":
        raise GraphCodeError(f"{where}: first argument is not self")
    for arg in a.args:
        ann = arg.annotation
        if ann is not None and not (
            (isinstance(ann, ast.Constant) and isinstance(ann.value, str)) or _dotted(ann)
        ):
            raise GraphCodeError(f"{where}: argument {arg.arg} has an annotation that is code")
    for s in f.body:
        if not isinstance(s, _STMTS):
            raise GraphCodeError(
                f"{where}: unexpected {type(s).__name__} at line {s.lineno} (fx code is straight-line)"
            )
        for node in ast.walk(s):
            if isinstance(node, _FORBIDDEN):
                raise GraphCodeError(
                    f"line {node.lineno}: {type(node).__name__} is never in fx code"
                )
        if isinstance(s, ast.AnnAssign) and not (
            isinstance(s.annotation, ast.Constant) and isinstance(s.annotation.value, str)
        ):
            raise GraphCodeError(f"line {s.lineno}: an annotation that is code")


def _forward(cls: ast.ClassDef) -> ast.FunctionDef:
    return next(s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward")


def _param(a: ast.arg) -> Param:
    ann = a.annotation
    text: str | None = None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        text = ann.value
    elif ann is not None:
        text = _dotted(ann)
    return Param(a.arg, text, tensor_type(text), sym_expr(text))


def _returned(f: ast.FunctionDef) -> ast.expr | None:
    """What forward's last return statement returns (None: no value)."""
    rets = [s for s in f.body if isinstance(s, ast.Return)]
    return rets[-1].value if rets else None


def _outputs(f: ast.FunctionDef) -> list[str | None]:
    v = _returned(f)
    if v is None:
        return []
    items = v.elts if isinstance(v, ast.Tuple | ast.List) else [v]
    return [e.id if isinstance(e, ast.Name) else None for e in items]


def _tuple_size(f: ast.FunctionDef) -> int | None:
    """How many values forward returns as a tuple, or None when it returns no tuple."""
    v = _returned(f)
    return len(v.elts) if isinstance(v, ast.Tuple) else None


def _assigned(f: ast.FunctionDef) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(f):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _dotted(node: ast.expr) -> str | None:
    """`torch.ops.aten.add.Tensor` for an attribute chain on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
