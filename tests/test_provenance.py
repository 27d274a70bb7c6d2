"""Inductor's provenance as the page's -i view shows it: each pane's payload, where its nodes and
kernels are, and the maps between them, for both formats of the node mapping, JIT and AOT."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import FIXTURES, corpus

from tlview.analyze.provenance import cross_links
from tlview.load import read as load
from tlview.model import Compile, Report
from tlview.render.html import budget as kept
from tlview.render.html import page
from tlview.render.html import report as html


def read(path: Path | str) -> Report:
    return load(path, kept.page_keep(True))


def only(rep: Report, key: str) -> Compile:
    (c,) = [c for c in rep.attempts if c.key == key]
    return c


def line(text: str, n: int) -> str:
    return text.split("\n")[n - 1]


def test_torch_213_maps_each_kernel_call_by_its_debug_handle() -> None:
    c = only(read(FIXTURES / "kernels.log"), "0/0")
    views = cross_links(c, lambda p: p.text)
    # The backward's node mapping is empty (`{"version": 2.0}`): one view, the forward's.
    assert [(v.graph, v.line) for v in views] == [("forward", 1962)]
    (x,) = views
    assert x.pre and x.post and x.code
    assert (x.pre.payload.kind, x.pre.payload.line) == ("before_pre_grad_graph", 148)
    assert (x.post.payload.kind, x.post.payload.line) == ("inductor_post_grad_graph", 1369)
    assert (x.code.payload.kind, x.code.payload.line) == ("inductor_output_code", 1608)
    assert x.pre_to_post["relu"] == ["relu"] and x.post_to_code["relu"] == [
        "cpp_fused_mul_relu_threshold_backward_0:2"
    ]
    code = x.code.payload.text or ""
    # Two calls of one extern kernel, told apart by their handles: each its handle and its call.
    for key in ("extern_kernels.addmm:1", "extern_kernels.addmm:3"):
        first, call = x.code.lines[key]
        assert line(code, first).strip() == f"# [Provenance debug handles] {key}"
        assert line(code, call).strip().startswith("extern_kernels.addmm(")
        assert call == first + 1
    # A cpp kernel: its definition, whole, then its call.
    lines = x.code.lines["cpp_fused_mul_relu_threshold_backward_0:2"]
    assert line(code, lines[0]).startswith(
        "cpp_fused_mul_relu_threshold_backward_0 = async_compile."
    )
    assert any(line(code, n) == "''')" for n in lines)
    assert line(code, lines[-1]).strip().startswith("cpp_fused_mul_relu_threshold_backward_0(")
    # Each node is where its graph defines it.
    for pane in (x.pre, x.post):
        text = pane.payload.text or ""
        for name, at in pane.lines.items():
            for n in at:
                assert re.match(rf"\s+{name}(: \"[^\"]*\")? = ", line(text, n)), (name, n)
    assert set(x.pre.lines) == {"linear", "relu", "h", "linear_1", "softmax"}


@pytest.mark.parametrize(
    "name, key, post_kind, code_kind",
    [
        (
            "inductor_provenance_jit_cuda_log.txt",
            "0/0",
            "after_post_grad_graph",
            "inductor_output_code",
        ),
        (
            "inductor_provenance_aot_cuda_log.txt",
            "-/-",
            "after_post_grad_graph",
            "inductor_aot_wrapper_code",
        ),
    ],
)
def test_torch_28_maps_kernels_by_name(name: str, key: str, post_kind: str, code_kind: str) -> None:
    # tlparse's CUDA logs: the node mapping names kernels without a handle.
    c = only(read(corpus("tlparse-tests", name)), key)
    (x,) = cross_links(c, lambda p: p.text)
    assert x.graph == "inference"
    assert x.pre and x.pre.payload.kind == "before_pre_grad_graph"
    assert x.post and x.post.payload.kind == post_kind
    assert x.code and x.code.payload.kind == code_kind
    code = x.code.payload.text or ""
    assert set(x.code.lines) == set(x.code_to_post)
    for kernel, at in x.code.lines.items():
        assert at, kernel
        named = [n for n in at if kernel in line(code, n)]
        # Every line that names it (its definition's first line, each call), and the rest of
        # its definition.
        assert named and all(
            re.search(rf"(?<!\w)(call_)?{re.escape(kernel)}(?!\w)", line(code, n)) for n in named
        )
    mm = "aoti_torch_cuda_mm_out" if code_kind.startswith("inductor_aot") else "extern_kernels.mm"
    assert len([n for n in x.code.lines[mm] if f"{mm}(" in line(code, n)]) == 2  # two calls
    assert sorted(x.code_to_post[mm]) == ["mm_default", "mm_default_1", "mul"]


def test_no_view_without_a_node_mapping() -> None:
    # A cache hit with provenance tracking off logs the mapping without a payload; a compile of
    # aot_eager has none at all.
    assert cross_links(only(read(FIXTURES / "cache_hit.log"), "0/0"), lambda p: p.text) == []
    assert all(cross_links(c, lambda p: p.text) == [] for c in read(FIXTURES / "demo.log").attempts)


def test_the_page_links_its_panes_to_the_payloads_on_it() -> None:
    rep = load(FIXTURES / "kernels.log", kept.page_keep(False))
    text = html.render(rep)
    views = re.findall(r'<details class="prov" id="([^"]+)" data-map="[^"]*">', text)
    assert views == ["c-0/0-prov1"]
    sources = re.findall(
        r'<pre class="code prov-text" data-pane="(\w+)" data-source="([^"]+)">', text
    )
    built = page.build(rep)
    (r,) = [r for r in built.compiles if r.key == "0/0"]
    names = {f"{r.anchor}-p{pl.pos}": pl.name for pl in r.payloads}
    assert [(role, names[a]) for role, a in sources] == [
        ("pre", "before_pre_grad_graph"),
        ("post", "inductor_post_grad_graph (forward)"),
        ("code", "inductor_output_code (forward)"),
    ]
