"""Logged symbolic sizes (`16*s77`, `Max(2, s0)`) evaluated from known values, or made sympy
expressions over known symbols: read with `ast`, never run as code."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn, TypeAlias

    import sympy

    # A size in one algebra or the other: an int, or a sympy expression (sympy is untyped).
    Value: TypeAlias = int | sympy.Expr


class _Unknown(Exception):
    pass


@dataclass(frozen=True)
class _Algebra:
    """What the one grammar of logged sizes means over ints or over sympy: `+ - *` are Python's
    on both; the rest each defines (a call raises _Unknown when its arguments do not fit)."""

    const: Callable[[int], Value]
    floordiv: Callable[[Value, Value], Value]
    mod: Callable[[Value, Value], Value]
    power: Callable[[Value, Value], Value]
    calls: Mapping[str, Callable[[list[Value]], Value]]


def _unknown(what: str) -> NoReturn:
    raise _Unknown(what)


def _int_power(a: int, b: int) -> int:
    return int(a**b) if 0 <= b <= 64 and abs(a) < 1 << 20 else _unknown("power")


def _some(fn: Callable[[list[Value]], Value]) -> Callable[[list[Value]], Value]:
    """A call of one or more arguments, given as a list, else unknown."""
    return lambda args: fn(args) if args else _unknown("call")


def _two(fn: Callable[[Value, Value], Value]) -> Callable[[list[Value]], Value]:
    """A call of exactly two arguments, else unknown."""
    return lambda args: fn(*args) if len(args) == 2 else _unknown("call")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_INTS = _Algebra(
    const=int,
    floordiv=lambda a, b: a // b,
    mod=lambda a, b: a % b,
    power=_int_power,
    calls={
        "Max": _some(max),
        "Min": _some(min),
        "FloorDiv": _two(lambda a, b: a // b),
        "CeilDiv": _two(_ceil_div),
        "CeilToInt": _two(_ceil_div),
        "Mod": _two(lambda a, b: a % b),
        "PythonMod": _two(lambda a, b: a % b),
    },
)


@cache
def _sympy() -> _Algebra:
    """sympy with torch's own FloorDiv and PythonMod (imported here: reading never needs torch)."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, PythonMod

    def power(a: Value, b: Value) -> Value:
        return a**b if isinstance(b, sympy.Integer) and 0 <= int(b) <= 64 else _unknown("power")

    return _Algebra(
        const=sympy.Integer,
        floordiv=FloorDiv,
        mod=PythonMod,
        power=power,
        calls={
            "Max": _some(lambda xs: sympy.Max(*xs)),
            "Min": _some(lambda xs: sympy.Min(*xs)),
            "FloorDiv": _two(FloorDiv),
            "Mod": _two(PythonMod),
            "PythonMod": _two(PythonMod),
        },
    )


def eval_expr(text: str, env: Mapping[str, int]) -> int | None:
    """The value of a logged size expression (`16*s77`), or None; never runs code from the log."""
    got: int | None = _read(text, env, _INTS)
    return got


def sympy_expr(text: str, symbols: Mapping[str, sympy.Expr]) -> sympy.Expr | None:
    """The sympy expression of a logged size (`s20*s92`, `(s0 + 1)//2`) over the given
    symbols, built as torch builds them (FloorDiv, Max); None when it names others."""
    return _read(text, symbols, _sympy())


def _read(text: str, names: Mapping[str, Value], alg: _Algebra) -> Value | None:
    if len(text) > 300:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _ev(tree.body, names, alg)
    except (SyntaxError, _Unknown, ZeroDivisionError, OverflowError, RecursionError, ValueError):
        return None


_NO_OP = object()  # an operator size expressions do not have


def _binop(op: ast.operator, a: Value, b: Value, alg: _Algebra) -> Value | object:
    """A op b, in the algebra: `+ - *` as they are, `// % **` as it defines them."""
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.FloorDiv):
        return alg.floordiv(a, b)
    if isinstance(op, ast.Mod):
        return alg.mod(a, b)
    if isinstance(op, ast.Pow):
        return alg.power(a, b)
    return _NO_OP


def _ev(n: ast.AST, names: Mapping[str, Value], alg: _Algebra) -> Value:
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return alg.const(n.value)
    if isinstance(n, ast.Name):
        if n.id in names:
            return names[n.id]
        raise _Unknown(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        v = _ev(n.operand, names, alg)
        return -v if isinstance(n.op, ast.USub) else v
    if isinstance(n, ast.BinOp):
        a, b = _ev(n.left, names, alg), _ev(n.right, names, alg)
        got = _binop(n.op, a, b, alg)
        if got is not _NO_OP:
            return got
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
        args = [_ev(a, names, alg) for a in n.args]
        call = alg.calls.get(n.func.id)
        if call is not None:
            return call(args)
    raise _Unknown(ast.dump(n)[:40])
