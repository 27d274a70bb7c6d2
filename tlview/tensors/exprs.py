"""Logged symbolic sizes (`16*s77`, `Max(2, s0)`) evaluated from known values, or made sympy
expressions over known symbols: read with `ast`, never run as code."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any


class _Unknown(Exception):
    pass


def eval_expr(text: str, env: Mapping[str, int]) -> int | None:
    """The value of a logged size expression (`16*s77`), or None; never runs code from the log."""
    if len(text) > 300:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _ev(tree.body, env)
    except (SyntaxError, _Unknown, ZeroDivisionError, OverflowError, RecursionError, ValueError):
        return None


def _ev(n: ast.AST, env: Mapping[str, int]) -> int:
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return n.value
    if isinstance(n, ast.Name):
        if n.id in env:
            return env[n.id]
        raise _Unknown(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        v = _ev(n.operand, env)
        return -v if isinstance(n.op, ast.USub) else v
    if isinstance(n, ast.BinOp):
        a, b = _ev(n.left, env), _ev(n.right, env)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if isinstance(n.op, ast.FloorDiv):
            return a // b
        if isinstance(n.op, ast.Mod):
            return a % b
        if isinstance(n.op, ast.Pow) and 0 <= b <= 64 and abs(a) < 1 << 20:
            return int(a**b)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
        args = [_ev(a, env) for a in n.args]
        name = n.func.id
        if name == "Max" and args:
            return max(args)
        if name == "Min" and args:
            return min(args)
        if name == "FloorDiv" and len(args) == 2:
            return args[0] // args[1]
        if name in ("CeilDiv", "CeilToInt") and len(args) == 2:
            return -(-args[0] // args[1])
        if name in ("Mod", "PythonMod") and len(args) == 2:
            return args[0] % args[1]
    raise _Unknown(ast.dump(n)[:40])


def sympy_expr(text: str, symbols: Mapping[str, Any]) -> Any:
    """The sympy expression of a logged size (`s20*s92`, `(s0 + 1)//2`) over the given
    symbols, built as torch builds them (FloorDiv, Max); None when it names others."""
    if len(text) > 300:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _sym(tree.body, symbols)
    except (SyntaxError, _Unknown, ZeroDivisionError, OverflowError, RecursionError, ValueError):
        return None


def _sym(n: ast.AST, symbols: Mapping[str, Any]) -> Any:
    import sympy
    from torch.utils._sympy.functions import FloorDiv, PythonMod

    if isinstance(n, ast.Constant) and type(n.value) is int:
        return sympy.Integer(n.value)
    if isinstance(n, ast.Name):
        if n.id in symbols:
            return symbols[n.id]
        raise _Unknown(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        v = _sym(n.operand, symbols)
        return -v if isinstance(n.op, ast.USub) else v
    if isinstance(n, ast.BinOp):
        a, b = _sym(n.left, symbols), _sym(n.right, symbols)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if isinstance(n.op, ast.FloorDiv):
            return FloorDiv(a, b)
        if isinstance(n.op, ast.Mod):
            return PythonMod(a, b)
        if isinstance(n.op, ast.Pow) and isinstance(b, sympy.Integer) and 0 <= int(b) <= 64:
            return a**b
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
        args = [_sym(a, symbols) for a in n.args]
        name = n.func.id
        if name == "Max" and args:
            return sympy.Max(*args)
        if name == "Min" and args:
            return sympy.Min(*args)
        if name == "FloorDiv" and len(args) == 2:
            return FloorDiv(*args)
        if name in ("Mod", "PythonMod") and len(args) == 2:
            return PythonMod(*args)
    raise _Unknown(ast.dump(n)[:40])
