"""Growth checks (tests/growth.py) of the paths issue 45 added: vLLM's pieces, pass graphs and
regional subgraphs, each at N and 4N, best of three, at most 6x; worked out, and drawn by
every report format."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from crafted import record
from growth import assert_linear
from rich.console import Console

import tlview
from tlview.analyze.compiles import Analyser, Analysis
from tlview.analyze.names import find_compile
from tlview.analyze.passes import pass_stages, shown_steps
from tlview.analyze.subgraphs import by_subgraph
from tlview.analyze.summary import overview
from tlview.analyze.vllm import vllm_calls
from tlview.cli import main
from tlview.model import Compile, LogIndex, Report
from tlview.render.html.budget import page_keep
from tlview.render.html.passes import passes_view
from tlview.render.html.vllm import vllm_view
from tlview.render.json.passes import compile_keys
from tlview.render.json.vllm import vllm_keys
from tlview.render.markdown.vllm import vllm_lines
from tlview.render.text.passes import compile_facts
from tlview.render.text.vllm import vllm

pytestmark = pytest.mark.slow  # each times a path at N and 4N, best of three: over a second


def _write(tmp_path: Path, name: str, records: list[bytes]) -> Path:
    log = tmp_path / name
    log.write_bytes(b"".join(records))
    return log


def _pieces(tmp_path: Path, n: int) -> LogIndex:
    """A compile call of N pieces, each a compile start, its graph and an output code."""
    out = [
        record(
            "artifact",
            {"name": "vllm_compilation_config", "encoding": "json"},
            payload='{"prefix": "backbone", "compile_sizes": "8"}',
        )
    ]
    for k in range(n):
        start = f'{{"piecewise_index": {k}, "submod_name": "submod_{2 * k}", '
        start += '"compile_range_start": 1, "compile_range_end": 16}'
        out += [
            record(
                "artifact",
                {"name": "vllm_piecewise_compile_start", "encoding": "json"},
                None,
                payload=start,
                stack=[],
            ),
            record("graph_dump", {"name": f"vllm_submod_{2 * k}"}, None, payload="g", stack=[]),
            record("inductor_output_code", {}, None, payload=f"code {k}", stack=[]),
        ]
    return tlview.read(_write(tmp_path, f"pieces{n}.log", out)).logs[0]


def test_vllm_pieces_grow_linearly(tmp_path: Path) -> None:
    assert_linear(lambda n: _pieces(tmp_path, n), vllm_calls, 200, "vLLM pieces")


def _passes(tmp_path: Path, n: int) -> Compile:
    """One compile whose post-grad stage has N pass graphs, each changing one line."""
    out = [
        record(
            "artifact",
            {"name": "before_post_grad_graph", "encoding": "string"},
            payload="def forward(x):\n    return x",
        )
    ]
    for k in range(n):
        graph = f"def forward(x):\n    y{k} = x\n    return y{k}"
        out.append(record("graph_dump", {"name": f"vllm_post_grad.{k}.Pass{k}"}, payload=graph))
    log = _write(tmp_path, f"passes{n}.log", out)
    return find_compile(tlview.read(log), "0/0")


def test_pass_stages_and_their_diffs_grow_linearly(tmp_path: Path) -> None:
    def run(c: Compile) -> object:
        texts = {s.line: f"x\ny{s.line}\nz" for st in pass_stages(c) for s in st.steps}
        return [shown_steps(st, texts) for st in pass_stages(c)]

    assert_linear(lambda n: _passes(tmp_path, n), run, 200, "pass graphs")


def test_show_passes_grows_linearly(tmp_path: Path) -> None:
    from click.testing import CliRunner

    def build(n: int) -> Path:
        _passes(tmp_path, n)
        return tmp_path / f"passes{n}.log"

    def run(log: Path) -> object:
        got = CliRunner().invoke(main, ["show", str(log), "--compile-id", "0/0", "--passes"])
        assert got.exit_code == 0, got.output
        return got

    assert_linear(build, run, 100, "show --passes")


def _regions(tmp_path: Path, n: int) -> Compile:
    out = [
        record(
            "artifact",
            {"name": "fx_graph_runnable", "encoding": "string"},
            payload=f"region {k}",
            subgraph_name=f"repeated_subgraph{k}",
        )
        for k in range(n)
    ]
    return find_compile(tlview.read(_write(tmp_path, f"regions{n}.log", out)), "0/0")


def test_subgraph_groups_grow_linearly(tmp_path: Path) -> None:
    assert_linear(lambda n: _regions(tmp_path, n), by_subgraph, 500, "subgraphs")


# -- the renderers' paths over them (phase 2: every format shows them) ---------------------------


def _pieces_report(tmp_path: Path, n: int) -> Report:
    _pieces(tmp_path, n)
    return tlview.read(tmp_path / f"pieces{n}.log")


def test_vllm_sections_of_every_format_grow_linearly(tmp_path: Path) -> None:
    """The calls gathered by the report's tally, then drawn as text, page and JSON."""

    def run(report: Report) -> object:
        o = overview(report)
        console = Console(file=io.StringIO(), width=160)
        vllm(o.vllm, console)
        return vllm_view(o.vllm, {}), vllm_keys(o.vllm), vllm_lines(o.vllm, "")

    assert_linear(lambda n: _pieces_report(tmp_path, n), run, 200, "vLLM sections")


def _analysed(path: Path) -> Analysis:
    report = tlview.read(path, keep=page_keep(False))
    return Analyser.of(report)(find_compile(report, "0/0"))


def test_pass_stages_of_every_format_grow_linearly(tmp_path: Path) -> None:
    """A compile of N pass graphs: the page's folded diffs, the terminal's stages, the JSON's."""

    def build(n: int) -> Path:
        _passes(tmp_path, n)
        return tmp_path / f"passes{n}.log"

    def run(path: Path) -> object:
        a = _analysed(path)
        console = Console(file=io.StringIO(), width=160)
        compile_facts(a, console)
        return passes_view(a, {}, True), compile_keys(a)

    assert_linear(build, run, 200, "pass stages drawn")


def test_regions_of_every_format_grow_linearly(tmp_path: Path) -> None:
    def build(n: int) -> Path:
        _regions(tmp_path, n)
        return tmp_path / f"regions{n}.log"

    def run(path: Path) -> object:
        a = _analysed(path)
        console = Console(file=io.StringIO(), width=160)
        compile_facts(a, console)
        return passes_view(a, {}, True), compile_keys(a)

    assert_linear(build, run, 500, "regions drawn")
