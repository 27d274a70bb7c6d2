"""Growth checks (tests/growth.py) of the paths issue 45 added: vLLM's pieces, pass graphs and
regional subgraphs, each at N and 4N, best of three, at most 6x."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted import record
from growth import assert_linear

import tlview
from tlview.analyze.names import find_compile
from tlview.analyze.passes import pass_stages, shown_steps
from tlview.analyze.subgraphs import by_subgraph
from tlview.analyze.vllm import vllm_calls
from tlview.cli import main
from tlview.model import Compile, LogIndex

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
