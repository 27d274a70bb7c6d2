"""The kernels inductor wrote for a compile's graphs, from its provenance artifacts."""

from __future__ import annotations

from tlview.analyze.breaks import innermost_frame
from tlview.model import Compile, Kernel, Provenance, StackFrame
from tlview.units import number

Found = dict[tuple[int, str], tuple[list[str], list[StackFrame]]]  # (graph, kernel key) -> ...


def kernels(c: Compile) -> list[Kernel]:
    """The kernels inductor wrote for a compile's graphs, from its provenance artifacts (logged
    when provenance tracking is on): per graph in log order (forward, then backward, compiled at
    the first backward), each kernel with its FX nodes and the user code they came from."""
    if not c.provenance:
        return []
    items = sorted(c.provenance, key=lambda p: p.line)
    names = (
        ["inference"]
        if any(g.kind == "aot_inference_graph" for g in c.graphs)
        else ["forward", "backward"]
    )
    out = _numbered(_found(items, _graph_of(items)))
    return [
        Kernel(names[g] if g < len(names) else f"graph {g + 1}", n, name, nodes, code)
        for g, n, name, nodes, code in sorted(out, key=lambda k: k[:2])
    ]


def _graph_of(items: list[Provenance]) -> list[int]:
    """Which graph each artifact is of: each graph logs its node mapping, then its kernels'
    stacks, so a stack artifact ends a graph (and so does the last artifact after the last)."""
    graph_of: list[int] = []
    n = 0
    last_code = max((i for i, p in enumerate(items) if p.kind == "code"), default=-1)
    for i, p in enumerate(items):
        graph_of.append(n)
        if p.kind == "code" or i >= last_code:
            n += 1
    return graph_of


def _found(items: list[Provenance], graph_of: list[int]) -> Found:
    """Each kernel of each graph: its FX nodes and the innermost frame of each of its stacks."""
    found: Found = {}
    for g, p in zip(graph_of, items, strict=True):
        for key, values in p.by_kernel.items():
            nodes, code = found.setdefault((g, key), ([], []))
            if p.kind == "nodes":
                nodes.extend(values)
            else:
                code.extend(f for f in map(innermost_frame, values) if f is not None)
    return found


def _numbered(
    found: Found,
) -> list[tuple[int, int, str, list[str], list[StackFrame]]]:
    """(graph, its number, name, nodes, code) of each kernel: torch 2.9 and later number each
    kernel call ("cpp_fused_relu_0:2", its debug handle in the code); older torch names kernels
    alone, numbered by their place in torch's list."""
    out = []
    listed: dict[int, int] = {}  # kernels of each graph so far, in the order torch lists them
    for (g, key), (nodes, code) in found.items():
        listed[g] = listed.get(g, 0) + 1
        name, _, order = key.rpartition(":")
        called = number(order) if name and order.isdecimal() else None
        n = listed[g] if called is None else called
        out.append((g, n, key if called is None else name, nodes, list(dict.fromkeys(code))))
    return out
