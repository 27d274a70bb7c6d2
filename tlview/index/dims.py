"""The graph's own symbols for every size, stride and offset of a compile's inputs (and of their
bases and inner tensors): the one place that maps the log's symbols to dims, for plain, view and
jagged tensors alike. From the graph's placeholder annotations, its `sizes`, `create_symbol`."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tlview.index.annotations import TensorType, sym_expr, tensor_type
from tlview.model import Compile, Dim, Input, InputSet, Payload, Symbol, TensorDesc
from tlview.units import number

_SYMBOL = re.compile(r"[su]\d+")
_RANGE = re.compile(r"\[(-?\d+|-?int_oo|-?oo), (-?\d+|-?int_oo|-?oo)\]")
_SIZE_SOURCE = re.compile(r"(.+)\.size\(\)\[(\d+)\]")
_UNBACKED = re.compile(r"u\d+")


@functools.lru_cache(maxsize=4096)
def fx_name(source: str) -> str:
    """The FX placeholder dynamo names after a source, as the graph's `sizes` key it:
    `L['x']` -> `l_x_`, `L['hiddenStates']` -> `l_hidden_states_` (FX's snake case)."""
    name = re.sub(r"[^a-zA-Z0-9]+", "_", source)
    name = re.sub(r"(?<=[a-z])([A-Z])", r"_\1", name).lower()
    return f"_{name}" if name[:1].isdigit() else name


@functools.lru_cache(maxsize=4096)
def annotated(annotation: str | None) -> TensorType | None:
    """`tensor_type`, parsed once: every compile of a graph has the same annotations (never
    changed by a reader here)."""
    return tensor_type(annotation)


@functools.lru_cache(maxsize=4096)
def arg_name(source: str) -> str:
    """The forward argument dynamo names after a source (`L['x']` -> `L_x_`)."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", source)


@dataclass(slots=True)
class GraphDims:
    """What the log says about the dynamic dims of one compile (or of one of its fake modes).

    `names` is keyed by the source of each size, stride or offset as torch names it
    (`L['x'].size()[0]`, `L['x']._base.stride()[1]`, `L['x'].storage_offset()`) and holds the
    graph's expression for it (`s77`, `s20*s92`), or the value the graph took (`4`).
    """

    names: dict[str, Dim] = field(default_factory=dict)
    fresh: set[str] = field(default_factory=set)  # properties with a create_symbol of their own
    unbacked: set[str] = field(default_factory=set)  # sizes the graph has as unbacked (u0)
    hints: dict[str, int] = field(default_factory=dict)  # "s77" -> 10
    ranges: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    renames: dict[str, str] = field(default_factory=dict)  # s98 -> s20: the graph's replacement


def traced_graph(c: Compile) -> Payload | None:
    """Dynamo's graph of the compile, which its first fake mode traced."""
    for g in c.graphs:
        if g.kind == "dynamo_output_graph":
            return g
    return None


def graph_dims(c: Compile, describer: int | None = None) -> GraphDims:
    """Each size, stride and offset the compile took as a symbol (or pinned to a value), with
    the graph's own names: its placeholder annotations for the inputs it takes, its `sizes`
    where it has no annotation, `create_symbol` for the rest (bases, inner tensors, offsets),
    renamed as the graph shows (`s98: "Sym(s20)"`: s98 was replaced by s20). With
    `describer`, those of that fake mode alone."""
    out = GraphDims()
    symbols, sets = _of_describer(c, describer)
    pinned = _from_symbols(out, symbols)
    g = traced_graph(c)
    params = (g.placeholders or {}) if g is not None else {}
    _renames(out, params)
    _pin_and_rename(out, pinned)
    sizes = g.meta.get("sizes") if g is not None and g.meta else None
    if params or isinstance(sizes, dict):
        first = c.input_sets[0].describer if c.input_sets else None
        # The graph's annotations are those of the fake mode that traced it.
        for s in (s for s in sets if s.describer == first):
            _from_graph(out, s, params, sizes if isinstance(sizes, dict) else None)
    return out


def _of_describer(c: Compile, describer: int | None) -> tuple[Iterable[Symbol], list[InputSet]]:
    """The compile's symbols and input sets (None: all; else those of one fake mode)."""
    if describer is None:
        return c.symbols, c.input_sets
    symbols = [x for x in c.symbols if x.describer in (None, describer)]
    return symbols, [s for s in c.input_sets if s.describer == describer]


def _renames(out: GraphDims, params: dict[str, Any]) -> None:
    """A placeholder of a symbol annotated as another (`s98: "Sym(s20)"`): it was replaced."""
    for name, ann in params.items():
        e = sym_expr(ann)
        if e is not None and e != name and _SYMBOL.fullmatch(name):
            out.renames[name] = e


def _from_symbols(out: GraphDims, symbols: Iterable[Symbol]) -> dict[str, int]:
    """What `create_symbol` and `symbolic_shape_specialization` say; the symbols pinned to a
    value."""
    pinned: dict[str, int] = {}
    for sym in symbols:
        value = number(sym.value) if sym.value is not None else None
        if sym.kind == "specialized" and value is not None:
            out.hints.setdefault(sym.symbol, value)
            pinned[sym.symbol] = value
        elif sym.kind == "created":
            _created(out, sym, value)
    return pinned


def _created(out: GraphDims, sym: Symbol, value: int | None) -> None:
    if value is not None:
        out.hints[sym.symbol] = value
    if sym.source and _SYMBOL.fullmatch(sym.symbol):
        out.names.setdefault(sym.source, sym.symbol)
        out.fresh.add(sym.source)
        m = _RANGE.fullmatch(sym.range or "")
        if m and (m.group(1), m.group(2)) != ("2", "int_oo"):
            out.ranges[sym.source] = (_bound(m.group(1)), _bound(m.group(2)))


def _pin_and_rename(out: GraphDims, pinned: dict[str, int]) -> None:
    """A symbol made, then specialized: the graph takes the value; one replaced: its new name."""
    for prop, made in list(out.names.items()):
        if not isinstance(made, str):
            continue
        if made in pinned:
            out.names[prop] = pinned[made]
            out.fresh.discard(prop)
            out.ranges.pop(prop, None)
        elif made in out.renames:
            out.names[prop] = out.renames[made]


def _from_graph(
    out: GraphDims, s: InputSet, params: dict[str, Any], sizes: dict[str, Any] | None
) -> None:
    """The dims of one input set's inputs as the graph has them: its annotations, else its
    `sizes`; a jagged tensor's values' too."""
    for tid, src in s.sources:
        tt = annotated(params.get(arg_name(src)))
        if tt is not None:
            _take(out, src, "size", tt.size)
            _take(out, src, "stride", tt.stride)
        elif sizes is not None and isinstance(sizes.get(fx_name(src)), list):
            _take(out, src, "size", sizes[fx_name(src)])
        t = s.tensors.get(tid)
        if t is not None and t.type_name == NJT:
            _jagged(out, src, t)


NJT = "torch.nested._internal.nested_tensor.NestedTensor"
_RAGGED = re.compile(r"'ragged_idx': (\d+)")


def _jagged(out: GraphDims, src: str, t: TensorDesc) -> None:
    """A jagged tensor's values have its dims after the ragged one: the graph's symbols for
    those are its values' (`(B, j1, D)` over values `(sum, D)`), which duck sizing shared."""
    ctx = t.fields.get("ctx")
    m = _RAGGED.search(ctx) if isinstance(ctx, str) else None
    ragged = (number(m.group(1)) if m else None) or 1
    inner = ["_values"]
    if t.base is not None and t.base == t.attrs.get("_values"):
        inner.append("_base")  # dynamo names the values through the view's base
    for k in range(ragged + 1, len(t.size or [])):
        v = out.names.get(f"{src}.size()[{k}]")
        if v is None:
            continue
        for name in inner:
            out.names[f"{src}.{name}.size()[{k - 1}]"] = v


def _take(out: GraphDims, src: str, kind: str, dims: list[Any]) -> None:
    """The graph's dims of one input: values pin, expressions name (u0: unbacked)."""
    for i, d in enumerate(dims):
        prop = f"{src}.{kind}()[{i}]"
        v = d if type(d) is int else number(d) if isinstance(d, str) else None
        if v is not None:
            had = out.names.get(prop)
            out.names[prop] = v
            if isinstance(had, str):  # made a symbol, then pinned by a guard
                out.fresh.discard(prop)
                out.ranges.pop(prop, None)
        elif isinstance(d, str) and d:
            if kind == "size" and _UNBACKED.fullmatch(d):
                out.unbacked.add(prop)
                out.names.pop(prop, None)
            else:
                out.names[prop] = d


def _bound(text: str) -> int | None:
    return None if "oo" in text else number(text)


# Per input (describer, source): its dims the compile took as symbols, {dim: symbol}.
DynamicDims = dict[tuple[int | None, str], dict[int, str]]


def dynamic_dims(c: Compile) -> DynamicDims:
    """Per input (describer, source), the sizes its compile took as symbols (`graph_dims`): the
    graph's own for the fake mode that traced it, each fake mode's own when a compile has
    several (two exports filed under one id)."""
    if not c.symbols and not any(g.kind == "dynamo_output_graph" for g in c.graphs):
        return {}
    several = len(c.input_sets) > 1 and any(x.describer is not None for x in c.symbols)
    each: dict[int | None, GraphDims] = {}
    out: DynamicDims = {}
    for i in c.inputs:
        key = i.describer if several else None
        gd = each.get(key)
        if gd is None:  # once per fake mode: each build walks every input
            gd = each[key] = graph_dims(c, key)
        for s in i.sources:
            n = len(i.tensor.size or [])
            d: dict[int, str] = {}
            for k in range(n):
                prop = f"{s}.size()[{k}]"
                v = gd.names.get(prop)
                if isinstance(v, str):
                    d[k] = v
                elif prop in gd.unbacked:
                    d[k] = _unbacked_name(c, s, k)
            if d:
                out[(i.describer, s)] = d
    return out


def _unbacked_name(c: Compile, source: str, k: int) -> str:
    """The graph's name for an unbacked size (u0), from its annotation or `sizes`."""
    g = traced_graph(c)
    tt = annotated((g.placeholders or {}).get(arg_name(source))) if g is not None else None
    dims: Any = tt.size if tt is not None else None
    if dims is None and g is not None and g.meta and isinstance(g.meta.get("sizes"), dict):
        dims = g.meta["sizes"].get(fx_name(source))
    return str(dims[k]) if isinstance(dims, list) and k < len(dims) else "u?"


def input_symbols(i: Input, dynamic: DynamicDims) -> dict[int, str]:
    """The dims of an input that its compile took as symbols (`dynamic_dims`)."""
    for s in i.sources:
        d = dynamic.get((i.describer, s))
        if d:
            return d
    return {}


def _by_source(dynamic: DynamicDims) -> dict[str, dict[int, str]]:
    """`dynamic_dims` by source alone, the first fake mode's (as `by_source` picks inputs)."""
    out: dict[str, dict[int, str]] = {}
    for (_, s), d in dynamic.items():
        out.setdefault(s, d)
    return out
