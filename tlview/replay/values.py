"""Values the log holds that a repro checks: the `.item()` calls of a graph whose result its
annotation gives (`item: "Sym(0.0000100000000000000)" = eps.item()`) or whose symbol the log
recorded with a value (`Sym(zf7)`, `create_symbol` with `"val": "0.0"`)."""

from __future__ import annotations

import ast
import math
import re
from typing import TYPE_CHECKING

from tlview.replay import graphcode as gc

if TYPE_CHECKING:
    from tlview.replay.planned import Plan

_SYM = re.compile(r"Sym\((?P<expr>[^()]*)\)")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def items(p: Plan, code: gc.GraphCode) -> list[tuple[str, float, str]]:
    """Each `.item()` call of forward whose value the log holds: its node name, the value, and
    where the value is from, in the order forward calls them."""
    logged = _logged(p)
    out: list[tuple[str, float, str]] = []
    for name, expr, line in _item_calls(code):
        got = _value(expr, logged)
        if got is None:
            return []  # one the log does not hold: the calls can no longer be told apart
        value, why = got
        out.append((f"{name} (graph line {line})", value, why))
    return out


def _item_calls(code: gc.GraphCode) -> list[tuple[str, str, int]]:
    """`NAME: "Sym(EXPR)" = X.item()` statements of forward: name, expression, line; none when
    forward calls `.item()` another way too (its calls could not be told apart)."""
    if ".item()" not in code.text:
        return []
    top = next(s for s in ast.parse(code.text).body if isinstance(s, ast.ClassDef))
    fwd = gc._forward(top)
    out = [_annotated(code, stmt) for stmt in fwd.body if _item_statement(stmt)]
    calls = sum(_is_item(n) for n in ast.walk(fwd))
    return out if calls == len(out) else []


def _item_statement(stmt: ast.stmt) -> bool:
    """`NAME: "..." = X.item()`."""
    return (
        isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and _is_item(stmt.value)
    )


def _annotated(code: gc.GraphCode, stmt: ast.stmt) -> tuple[str, str, int]:
    """An `.item()` statement's name, the expression of its `Sym(...)` annotation, its line."""
    assert isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    m = _SYM.fullmatch(code.annotations.get(stmt.target.id, ""))
    return stmt.target.id, m.group("expr") if m else "", stmt.lineno


def _is_item(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
        and not node.keywords
    )


def _value(expr: str, logged: dict[str, tuple[float, str]]) -> tuple[float, str] | None:
    """An annotation's value: a number, or a symbol the log recorded a value for."""
    text = expr.strip()
    if _NUMBER.fullmatch(text):
        v = float(text)
        return (v, "the graph's annotation") if math.isfinite(v) else None
    return logged.get(text)


def _logged(p: Plan) -> dict[str, tuple[float, str]]:
    """Symbol -> the value the log recorded for it, and what it was."""
    out: dict[str, tuple[float, str]] = {}
    for s in p.compile.symbols:
        if s.kind != "created" or s.value is None or not _NUMBER.fullmatch(s.value.strip()):
            continue
        v = float(s.value)
        if math.isfinite(v):
            where = f" ({s.source})" if s.source else ""
            out.setdefault(s.symbol, (v, f"as the log recorded {s.symbol}{where}"))
    return out
