"""The dims of a compile's inputs that it took as symbols, from its graph or its symbols."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from tlview.model import Compile, Input

_NUMBER = re.compile(r"-?\d+")


_SIZE_SOURCE = re.compile(r"(.+)\.size\(\)\[(\d+)\]")


@functools.lru_cache(maxsize=4096)
def fx_name(source: str) -> str:
    """The FX placeholder dynamo names after a source, as the graph's `sizes` key it:
    `L['x']` -> `l_x_`, `L['hiddenStates']` -> `l_hidden_states_` (FX's snake case)."""
    name = re.sub(r"[^a-zA-Z0-9]+", "_", source)
    name = re.sub(r"(?<=[a-z])([A-Z])", r"_\1", name).lower()
    return f"_{name}" if name[:1].isdigit() else name


# Per input (describer, source): its dims the compile took as symbols, {dim: symbol}.
DynamicDims = dict[tuple[int | None, str], dict[int, str]]


def dynamic_dims(c: Compile) -> DynamicDims:
    """Per input (describer, source), the dims its compile took as symbols: from the graph's
    sizes for the fake mode that traced the graph (the compile's first), else from the
    `create_symbol` records of its own fake mode (a subclass, such as a jagged tensor, has no
    sizes in the graph; two exports filed under one id have a fake mode each)."""
    sizes: dict[str, Any] = {}
    for g in c.graphs:
        if g.kind == "dynamo_output_graph" and g.meta and isinstance(g.meta.get("sizes"), dict):
            sizes = g.meta["sizes"]
            break
    created: DynamicDims = {}
    if c.symbols:
        specialized = {sym.source for sym in c.symbols if sym.kind == "specialized"}
        for sym in c.symbols:
            if sym.kind != "created" or not sym.source or sym.source in specialized:
                continue
            m = _SIZE_SOURCE.fullmatch(sym.source)
            if m:
                created.setdefault((sym.describer, m.group(1)), {})[int(m.group(2))] = sym.symbol
    traced = c.input_sets[0].describer if c.input_sets else None
    get: Callable[[str], Any] = sizes.get
    out: DynamicDims = {}
    for i in c.inputs:
        mine = i.describer == traced
        for s in i.sources:
            dims = get(fx_name(s)) if mine else None
            if type(dims) is list:
                if str in map(type, dims):  # not all ints: the usual case is static
                    out[(i.describer, s)] = {
                        k: d
                        for k, d in enumerate(dims)
                        if isinstance(d, str) and not _NUMBER.fullmatch(d)
                    }
            elif created:
                d = created.get((i.describer, s)) or created.get((None, s))
                if d:
                    out[(i.describer, s)] = d
    return out


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
