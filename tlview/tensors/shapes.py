"""The shape env of a fake rebuild: it hands out the graph's own symbols (`index.dims`) for the
sizes, strides and offsets MetaConverter asks for, by the sources it names them with."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tlview.index.dims import GraphDims
from tlview.tensors.exprs import sympy_expr

if TYPE_CHECKING:
    from collections.abc import Callable

    import sympy
    from torch._guards import GuardSource, Source
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.types import FloatLikeType, IntLikeType

    from tlview.model import Dim


def named_shape_env(symbols: GraphDims) -> ShapeEnv:
    """A ShapeEnv that gives each size, stride and offset the graph's own symbol for it."""
    return _named_shape_env_cls()(symbols.names)


@functools.cache
def _named_shape_env_cls() -> Callable[[Mapping[str, Dim]], ShapeEnv]:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    class NamedShapeEnv(ShapeEnv):
        """ShapeEnv whose symbols take the graph's names (`index.dims.graph_dims`).

        A size, stride or offset the graph has as a symbol gets that symbol: a fresh one of its
        name the first time, the same one again where the graph shares it (as duck sizing or a
        guard made it share); one the graph has as an expression of symbols made before
        (`s20*s92`) gets that expression.
        """

        def __init__(self, names: Mapping[str, Dim]) -> None:
            super().__init__()
            self.tlview_names = dict(names)
            self.tlview_made: dict[str, sympy.Symbol] = {}
            self.tlview_want: int | None = None

        def create_symbol(
            self,
            val: IntLikeType | FloatLikeType,
            source: Source,
            dynamic_dim: DimDynamic | None = None,
            *a: Any,
            **k: Any,
        ) -> sympy.Expr:
            if dynamic_dim is None:
                dynamic_dim = DimDynamic.DUCK
            name = getattr(source, "name", None)
            if callable(name):  # an older torch's (2.6) Source.name() is a method
                name = name()
            want = self.tlview_names.get(name) if isinstance(name, str) else None
            nested = _is_nested(val)
            if type(want) is int and type(val) is int and want == val:
                import sympy

                return sympy.Integer(val)  # the graph took the value (a guard pinned it)
            if (
                not isinstance(want, str)
                or dynamic_dim in (DimDynamic.STATIC, getattr(DimDynamic, "UNBACKED", None))
                or not (type(val) is int or nested)
            ):
                return super().create_symbol(val, source, dynamic_dim, *a, **k)
            m = re.fullmatch(r"s([0-9]{1,18})", want)
            if m is None:  # an expression of the graph's symbols
                expr = self.tlview_expr(want, val)
                if expr is not None:
                    return expr
                return super().create_symbol(val, source, dynamic_dim, *a, **k)
            made = self.tlview_made.get(want)
            if made is not None and _same_hint(self.tlview_hint(made), val):
                self.source_to_var[str(name)] = made
                self.var_to_sources.setdefault(made, []).append(source)
                return made
            self.tlview_want = int(m.group(1))
            try:
                out = super().create_symbol(val, source, DimDynamic.DYNAMIC, *a, **k)
            finally:
                self.tlview_want = None
            if str(out) == want:
                self.tlview_made[want] = out
                if dynamic_dim is DimDynamic.DUCK and not nested and val not in self.val_to_var:
                    self.val_to_var[val] = out  # later dims of this value share it, as they did
            return out

        def tlview_hint(self, sym: sympy.Symbol) -> sympy.Integer | None:
            hints = getattr(self, "backed_var_to_val", None)
            if hints is None:  # an older torch's name for it
                hints = self.var_to_val
            return hints.get(sym)

        def tlview_expr(self, text: str, val: IntLikeType | FloatLikeType) -> sympy.Expr | None:
            """The sympy expression of a logged one over the symbols made so far, if its value
            is `val`; never runs the text (`exprs.sympy_expr`)."""
            made = {str(s): s for s in self.tlview_made.values()}
            hints = getattr(self, "backed_var_to_val", None)
            if hints is None:  # an older torch's name for it
                hints = self.var_to_val
            for s in hints:
                made.setdefault(str(s), s)
            expr = sympy_expr(text, made)
            if expr is None or type(val) is not int:
                return None
            try:
                got = expr.xreplace(hints)
                return expr if int(got) == val else None
            except (TypeError, ValueError):
                return None

        def _generate_unique_id(self, source_name: str) -> int:
            w = self.tlview_want
            if w is not None and w not in self.unique_ids:
                self.unique_ids.add(w)
                return w
            return super()._generate_unique_id(source_name)

    return NamedShapeEnv


def _is_nested(val: IntLikeType | FloatLikeType) -> bool:
    node = getattr(val, "node", None)
    return node is not None and getattr(node, "is_nested_int", lambda: False)()


def _same_hint(hint: sympy.Integer | None, val: IntLikeType | FloatLikeType) -> bool:
    """Whether a symbol's value in this env is `val` (an int, or a nested int as `j1`)."""
    if hint is None:
        return False
    if type(val) is int:
        try:
            return int(hint) == val
        except (TypeError, ValueError):
            return False
    node = val.node  # type: ignore[union-attr]  # a nested int: the only other size asked for
    return (node.nested_int(), node.nested_int_coeff()) == (
        getattr(hint, "_val", None),
        getattr(hint, "_coeff", None),
    )


def logged_source(name: str) -> Source:
    """A dynamo Source whose name is the logged string, so symbols get the logged sources."""
    global _SOURCE_CLS
    if _SOURCE_CLS is None:
        from dataclasses import dataclass as dc

        from torch._guards import GuardSource, Source

        @dc(frozen=True)
        class LoggedSource(Source):
            """A source known only by the name the log gave it."""

            text: str

            @property
            def guard_source(self) -> GuardSource:
                return GuardSource.LOCAL

            @property
            def _name_template(self) -> str:
                return self.text

        @dc(frozen=True)
        class OldLoggedSource(Source):
            """The same for an older torch (2.6), whose Source has the methods name() and
            guard_source() where later ones have properties."""

            text: str

            def guard_source(self) -> GuardSource:  # type: ignore[override]
                return GuardSource.LOCAL

            def name(self) -> str:  # type: ignore[override]
                return self.text

        old = inspect.isfunction(inspect.getattr_static(Source, "name", None))
        _SOURCE_CLS = OldLoggedSource if old else LoggedSource
    return _SOURCE_CLS(name)


_SOURCE_CLS: Callable[[str], Source] | None = None
