"""Integer inputs in their domain: follow each integer input's values through the graph's code
(views, casts, expand, gather, arithmetic) to the sizes they index (embedding, index_select,
gather/scatter, index_copy/index_put, take, advanced indexing, one_hot, cross_entropy), so that
random values keep every use in range. The code is read with `ast`; nothing from it runs."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlview.model import Dim
from tlview.replay import graphcode as gc
from tlview.units import number

if TYPE_CHECKING:
    from typing import TypeGuard

    from torch import Tensor

    from tlview.replay.planned import Plan

_INT_DTYPES = frozenset({"i64", "i32", "i16", "i8", "u8", "u16", "u32", "u64"})
# Calls whose output holds (some of) the values of their first tensor argument.
_SAME_VALUES = frozenset(
    {
        "view", "reshape", "expand", "expand_as", "view_as", "reshape_as", "to", "long", "int",
        "short", "clone", "contiguous", "flatten", "unflatten", "unsqueeze", "squeeze", "t",
        "transpose", "permute", "type", "repeat", "repeat_interleave", "narrow", "select",
        "detach", "flip", "roll", "movedim", "swapaxes", "cpu", "cuda", "type_as", "tile",
        "broadcast_to", "ravel", "split", "chunk", "unbind", "gather", "take_along_dim",
        "masked_select", "sort", "topk", "cat", "concat", "stack", "hstack", "vstack", "where",
        "clamp", "clamp_", "abs", "getitem", "_to_copy", "lift_fresh_copy", "new_tensor",
        "max", "min", "amax", "amin", "maximum", "minimum", "pad", "constant_pad_nd",
    }
)  # fmt: skip
# Calls that take indices and do not bound them above (bincount: any non-negative value).
_UNBOUNDED = frozenset({"bincount", "unique", "unique_consecutive", "eq", "ne", "lt", "le", "gt"})
_ADD = frozenset({"add", "add_", "__add__", "iadd"})
_SUB = frozenset({"sub", "sub_", "__sub__", "floor_divide", "div", "remainder", "fmod"})


@dataclass(slots=True)
class Domain:
    """What the graph does with one integer input's values: the uses that bound them."""

    param: str  # its placeholder
    bound: int | None = None  # values must stay below this
    why: str = ""  # where the bound came from
    empty: bool = False  # no value keeps every use in range
    uses: int = 0  # index uses found
    unknown: list[str] = field(default_factory=list)  # index uses whose size is not known
    opaque: list[str] = field(default_factory=list)  # calls its values reach, not followed


def _name_of(call: ast.expr) -> tuple[str, ast.expr | None]:
    """`torch.nn.functional.embedding` -> ("embedding", None); `x.view` -> ("view", x)."""
    if isinstance(call, ast.Attribute):
        head = call.value
        dotted = gc._dotted(call) or ""
        if dotted.startswith(("torch.", "operator.", "_operator.")):
            return call.attr, None
        return call.attr, head
    if isinstance(call, ast.Name):
        return call.id.rsplit("_", 1)[-1] if call.id.startswith("_operator_") else call.id, None
    return "", None


class _Graph:
    """The forward's names: which integer inputs' values each holds, and with what added."""

    def __init__(self, code: gc.GraphCode, hints: dict[str, int]) -> None:
        self.code = code
        self.hints = hints
        self.symbols = set(hints)
        self.flow: dict[str, dict[str, int]] = {}  # name -> {param: the most added to it}
        self.maxes: dict[str, int] = {}  # name -> its largest value, where known (arange)
        self.domains: dict[str, Domain] = {}
        self.alias: dict[str, str] = {}  # `l_x_ = L_x_`: the name whose annotation it has
        for q in code.params:
            tt = q.tensor
            if tt is not None and tt.dtype in _INT_DTYPES:
                self.flow[q.name] = {q.name: 0}
                self.domains[q.name] = Domain(q.name)

    def size(self, name: str, dim: int | None) -> int | None:
        """A node's size at DIM (None: its number of elements), a symbol its hint."""
        tt = self.code.output_type(self.alias.get(name, name))
        if tt is None:
            return None
        dims = [self._hint(d) for d in tt.size]
        if dim is None:
            out = 1
            for d in dims:
                if d is None:
                    return None
                out *= d
            return out
        if dim < 0:
            dim += len(dims)
        return dims[dim] if 0 <= dim < len(dims) else None

    def ndim(self, name: str) -> int | None:
        tt = self.code.output_type(self.alias.get(name, name))
        return len(tt.size) if tt is not None else None

    def _hint(self, d: Dim) -> int | None:
        if isinstance(d, int):
            return d
        text = gc.dim_code(d, self.symbols)
        if text is None:
            return None
        try:
            v = _arith(ast.parse(text, mode="eval").body, self.hints)
        except (ValueError, ZeroDivisionError, SyntaxError, RecursionError):
            return None
        return v

    def values(self, e: ast.expr | None) -> dict[str, int]:
        """The integer inputs whose values E holds, each with the most added to them."""
        if isinstance(e, ast.Name):
            return self.flow.get(e.id, {})
        if isinstance(e, ast.Subscript):
            return self.values(e.value)
        if isinstance(e, ast.List | ast.Tuple):
            out: dict[str, int] = {}
            for x in e.elts:
                for k, v in self.values(x).items():
                    out[k] = max(out.get(k, 0), v)
            return out
        if isinstance(e, ast.BinOp):
            return self._binop_values(e)
        if isinstance(e, ast.Call):
            return self._call_values(e)
        return {}

    def _binop_values(self, e: ast.BinOp) -> dict[str, int]:
        a, b = self.values(e.left), self.values(e.right)
        if isinstance(e.op, ast.Add):
            return _plus(a, self.most(e.right)) | _plus(b, self.most(e.left))
        if isinstance(e.op, ast.Sub | ast.FloorDiv | ast.Mod):
            return a
        return {}

    def _call_values(self, e: ast.Call) -> dict[str, int]:
        name, head = _name_of(e.func)
        args = [head, *e.args] if head is not None else list(e.args)
        first = args[0] if args else None
        if name in _ADD and len(args) >= 2:
            a, b = self.values(args[0]), self.values(args[1])
            return _plus(a, self.most(args[1])) | _plus(b, self.most(args[0]))
        if name == "where" and len(args) >= 3:
            return {**self.values(args[1]), **self.values(args[2])}
        if name in _SUB or name in _JOINS or name in _SAME_VALUES:
            return self.values(first)
        return {}

    def most(self, e: ast.expr) -> int:
        """The largest value E adds (an int, an arange), 0 where not known."""
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and e.value > 0:
            return int(e.value)
        if isinstance(e, ast.Name):
            return self.maxes.get(e.id, 0)
        return 0

    def bind(self, target: str, value: ast.expr) -> None:
        vals = self.values(value)
        if vals:
            self.flow[target] = vals
        if isinstance(value, ast.Call) and _name_of(value.func)[0] == "arange":
            nums = [
                a.value
                for a in value.args
                if isinstance(a, ast.Constant) and isinstance(a.value, int)
            ]
            if nums and len(nums) == len(value.args):
                self.maxes[target] = (nums[1] if len(nums) > 1 else nums[0]) - 1
        if isinstance(value, ast.Name):
            if target not in self.code.annotations:
                self.alias[target] = self.alias.get(value.id, value.id)
            if value.id in self.maxes:
                self.maxes[target] = self.maxes[value.id]

    def use(self, index: ast.expr | None, bound: int | None, what: str, line: int) -> None:
        """INDEX indexes something of BOUND entries (None: a size not known here)."""
        for param, added in self.values(index).items():
            d = self.domains[param]
            d.uses += 1
            if bound is None:
                d.unknown.append(what)
                continue
            top = bound - added
            if top <= 0:
                d.empty = True
            if d.bound is None or top < d.bound:
                d.bound = max(top, 0)
                plus = f" after adding up to {added}" if added else ""
                d.why = f"{what} (graph line {line}){plus}"

    def call(self, e: ast.Call, line: int) -> None:
        """An index use in a call, if it is one; else note the integer inputs it reaches."""
        c = _Call.of(e, line)
        use = _USES.get(c.name)
        if use is not None:
            use(self, c)
        elif not (c.name in _UNBOUNDED or c.name in _SAME_VALUES or c.name in _ADD_SUB):
            self.opaque(c)

    def opaque(self, c: _Call) -> None:
        """A call tlview does not follow: named in the domains of the inputs it reaches."""
        for a in [*c.args, *c.kw.values()]:
            for param in self.values(a) if a is not None else {}:
                dom = self.domains[param]
                if c.name and c.name not in dom.opaque:
                    dom.opaque.append(c.name)

    def subscript(self, e: ast.Subscript, line: int) -> None:
        """Advanced indexing: `x[idx]`, `x[(slice(None), idx)]`."""
        base = e.value.id if isinstance(e.value, ast.Name) else ""
        items = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        d = 0
        for x in items:
            if isinstance(x, ast.Constant) and x.value is None:
                continue  # a new axis
            if isinstance(x, ast.Constant) and x.value is Ellipsis:
                break
            if self.values(x):
                size = self.size(base, d)
                self.use(x, size, f"indexing {base}'s dim {d}, {size} long", line)
            d += 1


@dataclass(slots=True)
class _Call:
    """One call of the graph's code, its receiver first among its arguments."""

    name: str
    e: ast.Call
    args: list[ast.expr]
    kw: dict[str, ast.expr]
    line: int

    @classmethod
    def of(cls, e: ast.Call, line: int) -> _Call:
        name, head = _name_of(e.func)
        args = [head, *e.args] if head is not None else list(e.args)
        return cls(name, e, args, {k.arg: k.value for k in e.keywords if k.arg}, line)

    def arg(self, i: int, key: str) -> ast.expr | None:
        return self.args[i] if i < len(self.args) else self.kw.get(key)

    @property
    def base(self) -> str:
        return _nm(self.args[0]) if self.args else ""


def _nm(x: ast.expr | None) -> str:
    return x.id if isinstance(x, ast.Name) else ""


def _dim(x: ast.expr | None) -> int | None:
    """An int literal (`-1` too), else None."""
    if isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.USub):
        inner = _dim(x.operand)
        return -inner if inner is not None else None
    return x.value if isinstance(x, ast.Constant) and isinstance(x.value, int) else None


def _embedding(g: _Graph, c: _Call) -> None:
    idx, w = (c.arg(0, "input"), c.arg(1, "weight"))
    if gc._dotted(c.e.func) in ("torch.embedding", "torch.ops.aten.embedding.default"):
        w, idx = idx, c.arg(1, "indices")
    rows = g.size(_nm(w), 0)
    g.use(idx, rows, f"an embedding of {rows} rows ({_nm(w)})", c.line)


def _index_dim(g: _Graph, c: _Call) -> None:
    """index_select(x, dim, index) and the index_copy/add/fill/reduce family."""
    d = _dim(c.arg(1, "dim"))
    size = g.size(c.base, d) if d is not None else None
    g.use(c.arg(2, "index"), size, f"{c.name} of {c.base}'s dim {d}, {size} long", c.line)


def _gather(g: _Graph, c: _Call) -> None:
    """gather, scatter and take_along_dim: an index tensor along a dim."""
    along = c.name == "take_along_dim"
    d = _dim(c.arg(2, "dim") if along else c.arg(1, "dim"))
    at = c.arg(1, "indices") if along else c.arg(2, "index")
    size = g.size(c.base, d) if d is not None else None
    g.use(at, size, f"{c.name} of {c.base}'s dim {d}, {size} long", c.line)


def _take(g: _Graph, c: _Call) -> None:
    size = g.size(c.base, None)
    g.use(c.arg(1, "index"), size, f"take of {c.base}'s {size} elements", c.line)


def _index_put(g: _Graph, c: _Call) -> None:
    """index_put(x, (i, j), v) and index(x, (i, j)): one index per dim."""
    idx = c.arg(1, "indices")
    for i, x in enumerate(idx.elts if isinstance(idx, ast.Tuple | ast.List) else []):
        size = g.size(c.base, i)
        g.use(x, size, f"{c.name} of {c.base}'s dim {i}, {size} long", c.line)


def _one_hot(g: _Graph, c: _Call) -> None:
    n = _dim(c.arg(1, "num_classes"))
    n = n if n is not None and n > 0 else None
    g.use(c.arg(0, "input"), n, f"one_hot of {n} classes", c.line)


def _targets(g: _Graph, c: _Call) -> None:
    """A loss's class targets: dim 1 of its input (dim 0 when 1-d)."""
    logits = _nm(c.arg(0, "input"))
    nd = g.ndim(logits)
    size = g.size(logits, 1 if nd is None or nd > 1 else 0)
    g.use(c.arg(1, "target"), size, f"{c.name} targets of {size} classes", c.line)


_USE_NAMES: dict[Callable[[_Graph, _Call], None], tuple[str, ...]] = {
    _embedding: ("embedding",),
    _index_dim: (
        "index_select", "index_copy", "index_copy_", "index_add", "index_add_", "index_fill",
        "index_fill_", "index_reduce", "index_reduce_",
    ),
    _gather: (
        "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
        "scatter_reduce_", "take_along_dim",
    ),
    _take: ("take",),
    _index_put: ("index_put", "index_put_", "index"),
    _one_hot: ("one_hot",),
    _targets: ("cross_entropy", "nll_loss", "nll_loss2d", "multi_margin_loss"),
}  # fmt: skip
# Call name -> what its index use is.
_USES: dict[str, Callable[[_Graph, _Call], None]] = {
    name: use for use, names in _USE_NAMES.items() for name in names
}
_JOINS = frozenset({"cat", "concat", "stack", "hstack", "vstack"})
_ADD_SUB = _ADD | _SUB


_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
        ast.FloorDiv: int.__floordiv__, ast.Mod: int.__mod__}  # fmt: skip


def _arith(e: ast.expr, hints: dict[str, int]) -> int:
    """The value of a size expression as dim_code writes it (integers, `sym["s0"]`, arithmetic,
    max and min); ValueError for anything else."""
    if isinstance(e, ast.Constant) and isinstance(e.value, int):
        return int(e.value)
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
        key = e.slice.value
        if isinstance(key, str) and key in hints:
            return hints[key]
    if isinstance(e, ast.BinOp) and type(e.op) in _OPS:
        return int(_OPS[type(e.op)](_arith(e.left, hints), _arith(e.right, hints)))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return -_arith(e.operand, hints)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("max", "min"):
        vals = [_arith(a, hints) for a in e.args]
        return max(vals) if e.func.id == "max" else min(vals)
    raise ValueError("not a size expression")


def _plus(vals: dict[str, int], add: int) -> dict[str, int]:
    return {k: v + add for k, v in vals.items()}


def find(code: gc.GraphCode, hints: dict[str, int]) -> dict[str, Domain]:
    """Each integer placeholder's domain, found by following its values through forward."""
    tree = ast.parse(code.text)
    top = next(s for s in tree.body if isinstance(s, ast.ClassDef))
    fwd = gc._forward(top)
    g = _Graph(code, hints)
    for stmt in fwd.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                g.call(node, stmt.lineno)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                g.subscript(node, stmt.lineno)
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and stmt.targets else None
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else target
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and value is not None:
            g.bind(target.id, value)
    return g.domains


def apply(p: Plan, code: gc.GraphCode, by_name: dict[str, str], mode: str) -> None:
    """Keep every integer input's random values in its domain; say where each came from."""
    tensors: dict[str, Tensor] = p.rebuilt.tensors
    hints = _hints(code, by_name, tensors)
    recorded: dict[str, tuple[str, int]] | None = None  # made at the first counter
    for param, d in find(code, hints).items():
        source = by_name.get(param)
        t = tensors.get(source) if source is not None else None
        if source is None or not _integers(t) or _unbounded(p, source, d):
            continue
        assert d.bound is not None  # _unbounded said so
        if t.dim() == 0:
            if recorded is None:
                recorded = _item_values(p)
            _counter(p, source, t, d, recorded.get(source))  # as logged, whatever the mode
            continue
        p.domains.append((source, f"values 0 to {d.bound - 1}: it indexes {d.why}"))
        if mode == "zeros" or int(t.min()) >= 0 and int(t.max()) < d.bound:
            continue
        t.remainder_(d.bound)
        p.notes.append(f"{source} indexes {d.why}: its random values are taken modulo {d.bound}")


def _integers(t: Tensor | None) -> TypeGuard[Tensor]:
    """A real integer tensor with values to keep in range."""
    if t is None or getattr(t.device, "type", "meta") == "meta":
        return False
    return not (t.is_floating_point() or t.is_complex() or t.numel() == 0)


def _unbounded(p: Plan, source: str, d: Domain) -> bool:
    """Say why an input has no domain to keep (no use bounds it, a size not in the log, no value
    in range); False when it has one."""
    if d.uses == 0:
        if d.opaque:
            calls = ", ".join(d.opaque[:3])
            text = f"no domain found: its values reach {calls}, which tlview does not follow"
            p.domains.append((source, f"{text}; random values"))
            p.notes.append(f"{source}: an integer input; {text} (its values are random)")
        return True
    if d.bound is None:
        text = f"no domain found: it indexes {d.unknown[0]}, whose size the log does not give"
        p.domains.append((source, text))
        p.notes.append(f"{source}: {text}; its values are random (try --mode zeros)")
        return True
    if d.empty or d.bound <= 0:
        text = f"no value keeps {d.why} in range"
        p.domains.append((source, text))
        p.notes.append(f"{source}: {text}")
        return True
    return False


def _counter(p: Plan, source: str, t: Tensor, d: Domain, recorded: tuple[str, int] | None) -> None:
    """A 0-dim integer that reaches an index (a cache position): set to where it starts."""
    assert d.bound is not None
    start, said = _counter_start(recorded, d.bound) if recorded is not None else (0, "")
    t.fill_(start)
    text = (
        f"a 0-dim integer (a counter, such as a cache position) that reaches {d.why}: "
        f"it starts at {start}{said}"
    )
    p.domains.append((source, text))
    p.notes.append(f"{source} is {text}")


def _item_values(p: Plan) -> dict[str, tuple[str, int]]:
    """The value the log recorded for each tensor whose `.item()` dynamo made a symbol of (a
    0-dim counter's, with the run's value): source -> (symbol, value), the first one logged."""
    out: dict[str, tuple[str, int]] = {}
    for s in p.compile.symbols:
        source = s.source or ""
        if s.kind != "created" or s.value is None or not source.endswith(".item()"):
            continue
        v = number(s.value)
        if v is not None:
            out.setdefault(source[: -len(".item()")], (s.symbol, v))
    return out


def _counter_start(recorded: tuple[str, int] | None, bound: int) -> tuple[int, str]:
    """Where a 0-dim integer counter starts: the value the log recorded for it, when it keeps
    its uses in range; else 0."""
    if recorded is None:
        return 0, ""
    symbol, v = recorded
    if 0 <= v < bound:
        return v, f", the value the log recorded ({symbol})"
    return 0, f" (the log recorded {v} ({symbol}), out of that range)"


def _hints(
    code: gc.GraphCode, by_name: dict[str, str], tensors: dict[str, Tensor]
) -> dict[str, int]:
    """Each size symbol's value on the rebuilt inputs (the hint)."""
    out: dict[str, int] = {}
    for q in code.params:
        t = tensors.get(by_name.get(q.name, ""))
        if q.tensor is None or t is None or not hasattr(t, "shape"):
            continue
        for dims, got in ((q.tensor.size, list(t.shape)), (q.tensor.stride, _strides(t))):
            for d, v in zip(dims, got, strict=False):
                # a nested int (a jagged dim, j1) is no number to index with
                if isinstance(d, str) and gc.is_symbol(d) and d not in out and type(v) is int:
                    out[d] = v
    return out


def _strides(t: Tensor) -> list[int]:
    try:
        return list(t.stride())
    except Exception:  # a layout without strides
        return []
