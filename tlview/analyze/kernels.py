"""The kernels inductor wrote for a compile's graphs, from its provenance artifacts."""

from __future__ import annotations

from tlview.analyze.breaks import innermost_frame
from tlview.model import Compile, Kernel, StackFrame
from tlview.units import number


def kernels(c: Compile) -> list[Kernel]:
    """The kernels inductor wrote for a compile's graphs, from its provenance artifacts (logged
    when provenance tracking is on): per graph in log order (forward, then backward, compiled at
    the first backward), each kernel with its FX nodes and the user code they came from."""
    if not c.provenance:
        return []
    items = sorted(c.provenance, key=lambda p: p.line)
    # Each graph logs its node mapping, then its kernels' stacks: a stack artifact ends a graph.
    graph_of: list[int] = []
    n = 0
    last_code = max((i for i, p in enumerate(items) if p.kind == "code"), default=-1)
    for i, p in enumerate(items):
        graph_of.append(n)
        if p.kind == "code" or i >= last_code:  # no stack artifact after it
            n += 1
    names = (
        ["inference"]
        if any(g.kind == "aot_inference_graph" for g in c.graphs)
        else ["forward", "backward"]
    )
    found: dict[tuple[int, str], tuple[list[str], list[StackFrame]]] = {}
    for g, p in zip(graph_of, items, strict=True):
        for key, values in p.by_kernel.items():
            nodes, code = found.setdefault((g, key), ([], []))
            if p.kind == "nodes":
                nodes.extend(values)
            else:
                code.extend(f for f in map(innermost_frame, values) if f is not None)
    out = []
    listed: dict[int, int] = {}  # kernels of each graph so far, in the order torch lists them
    for (g, key), (nodes, code) in found.items():
        listed[g] = listed.get(g, 0) + 1
        name, _, order = key.rpartition(":")
        # torch 2.9 and later number each kernel call ("cpp_fused_relu_0:2", its debug handle
        # in the code); older torch names kernels alone: their place in torch's list.
        called = number(order) if name and order.isdecimal() else None
        n = listed[g] if called is None else called
        out.append((g, n, key if called is None else name, nodes, list(dict.fromkeys(code))))
    return [
        Kernel(names[g] if g < len(names) else f"graph {g + 1}", n, name, nodes, code)
        for g, n, name, nodes, code in sorted(out, key=lambda k: k[:2])
    ]
