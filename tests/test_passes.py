"""`tlview show`'s diffs: --passes (torch's and vLLM's pass graphs in the order they ran),
--diff, --diff-previous, NAME[SUBGRAPH] names and --bytecode, on logs torch wrote; and the
hostile-input rules for every text they show."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crafted import record
from helpers import FIXTURES, run_cli

import tlview
from tlview.analyze.bytecode import assembled, instructions
from tlview.analyze.names import find_compile
from tlview.analyze.passes import pass_stages, shown_steps, unified
from tlview.analyze.rare import has_subgraphs
from tlview.analyze.subgraphs import by_subgraph
from tlview.model import Compile

TP0 = next((FIXTURES / "vllm_tp").glob("*rank_0_*.log"))


def compile_of(path: Path, ref: str) -> Compile:
    return find_compile(tlview.read(path), ref)


def show(*args: object) -> str:
    result = run_cli("show", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_inductors_own_passes_stage_by_stage() -> None:
    c = compile_of(FIXTURES / "passes.log", "0/0")
    stages = pass_stages(c)
    assert [(s.stage, [st.pass_name for st in s.steps]) for s in stages] == [
        ("pre_grad", ["before_pre_grad_graph", "merge_splits_pass", "after_pre_grad_graph"]),
        ("joint", ["before_joint_graph", "after_joint_graph"]),
        (
            "post_grad",
            [
                "before_post_grad_graph",
                "optimus_BatchMulPostGradFusion",
                "normalization_aten_pass",
                "inductor_post_grad_graph",
            ],
        ),
    ]
    assert [s.passes for s in stages] == [1, 0, 2]


def test_passes_show_the_first_graph_whole_then_each_pass_as_a_diff() -> None:
    """The shape of tlparse's vllm_post_grad_diff.log, on a log torch wrote: the graph before
    post-grad passes whole, then vLLM's FusionPass removing sin and cos for fused_sincos."""
    out = show(TP0, "--compile-id", "0/0", "--passes").splitlines()
    # each stage names the vLLM piece and range it compiled
    k = out.index(
        "== stage 3/6: post_grad, 2 pass graph(s) (vLLM backbone submod_0, range [1, 16])"
    )
    assert out[out.index(">> before_post_grad_graph#2 (line 2518), whole:") - 1] == (
        "== stage 6/6: post_grad, 2 pass graph(s) (vLLM backbone submod_2, range [1, 16])"
    )
    assert out[k + 1] == ">> before_post_grad_graph (line 892), whole:"
    fusion = out.index(
        ">> vllm_post_grad.0.FusionPass (line 1124), against before_post_grad_graph:"
    )
    assert k < fusion
    diff = out[
        fusion + 1 : out.index(
            ">> vllm_post_grad.1.NoOpEliminationPass (line 1138): "
            "unchanged from vllm_post_grad.0.FusionPass"
        )
    ]
    assert diff[:2] == ["--- before_post_grad_graph", "+++ vllm_post_grad.0.FusionPass"]
    removed = [line for line in diff if line.startswith("-") and "aten." in line]
    added = [line for line in diff if line.startswith("+") and "fused_sincos" in line]
    assert [("sin.default" in r, "cos.default" in r) for r in removed[:2]] == [
        (True, False),
        (False, True),
    ]
    assert "torch.ops.tlv.fused_sincos.default(all_reduce)" in added[0]
    # the second piece's stages follow, in log order, each begun by its own graph whole
    assert ">> before_post_grad_graph#2 (line 2518), whole:" in out
    # a rank of the job's directory, by its rank
    assert show(FIXTURES / "vllm_tp", "--compile-id", "rank0:0/0", "--passes").splitlines() == out


def test_a_compile_without_pass_graphs_says_so() -> None:
    out = show(FIXTURES / "demo.log", "--compile-id", "2/0", "--passes")
    assert out.endswith(": no pass graphs (torch logs them from inductor's passes)\n")


def test_two_artifacts_as_a_diff() -> None:
    out = show(
        FIXTURES / "passes.log",
        "--compile-id",
        "0/0",
        "before_post_grad_graph",
        "--diff",
        "inductor_post_grad_graph",
    ).splitlines()
    # each named as `show` lists it: inductor's graphs by the graph they are of
    assert out[0] == "--- before_post_grad_graph (inference) (line 913)"
    assert out[1] == "+++ inductor_post_grad_graph (inference) (line 1477)"
    assert out[2].startswith("@@ ")
    same = show(
        FIXTURES / "demo.log",
        "--compile-id",
        "0/0_1",
        "aot_forward_graph",
        "--diff",
        "aot_forward_graph",
    )
    assert same == "aot_forward_graph (line 512) and aot_forward_graph (line 512) are the same\n"


def test_an_artifact_against_the_frames_previous_compile() -> None:
    """What the recompile changed: the batch dim became a symbol."""
    out = show(
        FIXTURES / "demo.log", "--compile-id", "1/1", "dynamo_output_graph", "--diff-previous"
    )
    lines = out.splitlines()
    assert lines[:3] == [
        "compile 1/0 -> 1/1: dynamo_output_graph",
        "--- 1/0:dynamo_output_graph (line 1007)",
        "+++ 1/1:dynamo_output_graph (line 2820)",
    ]
    assert any(line.startswith("+") and 'L_h_: "f32[s75, 32]' in line for line in lines)
    assert any(line.startswith("-") and 'L_h_: "f32[4, 32]' in line for line in lines)


def test_refusals_are_one_line_with_exit_2() -> None:
    demo = FIXTURES / "demo.log"
    cases = [
        (("--compile-id", "0/0", "--passes", "--bytecode"), "give one of --passes"),
        (("--compile-id", "0/0", "--diff", "x"), "--diff and --diff-previous need an ARTIFACT"),
        (("--compile-id", "0/0", "dynamo_output_graph", "--passes"), "give no ARTIFACT"),
        (("--compile-id", "2/0", "dynamo_output_graph", "--diff-previous"), "no previous compile"),
        (("--compile-id", "2/0", "nope", "--diff", "dynamo_output_graph"), "no artifact 'nope'"),
    ]
    for args, said in cases:
        result = run_cli("show", demo, *args)
        assert result.exit_code == 2, (args, result.output)
        assert said in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_artifacts_by_subgraph_and_named_with_it() -> None:
    """torch's regional inductor names each region's records (`subgraph_name`)."""
    regional = FIXTURES / "regional.log"
    c = compile_of(regional, "0/0")
    assert has_subgraphs(c)
    groups = by_subgraph(c)
    assert [(g.subgraph, len(g.artifacts)) for g in groups] == [
        (None, 7),
        ("repeated_subgraph0", 4),
        ("repeated_subgraph1", 4),
    ]
    assert [n for n, _ in groups[2].artifacts] == [
        "fx_graph_runnable#2",
        "before_post_grad_graph#2",
        "inductor_post_grad_graph#2",
        "inductor_output_code#2",
    ]
    by_name = show(regional, "--compile-id", "0/0", "inductor_output_code[repeated_subgraph1]")
    assert by_name == show(regional, "--compile-id", "0/0", "inductor_output_code#2")
    listing = show(regional, "--compile-id", "0/0").splitlines()
    assert [c.strip() for c in listing[1].split("|")] == [
        "name", "log line", "lines", "bytes", "subgraph"
    ]  # fmt: skip
    assert listing[8].split()[0] == "fx_graph_runnable" and listing[8].endswith(
        "repeated_subgraph0"
    )
    # each region's pass graphs are a stage of their own
    assert [s.subgraph for s in pass_stages(c)] == ["repeated_subgraph0", "repeated_subgraph1"]
    result = run_cli("show", regional, "--compile-id", "0/0", "fx_graph_runnable[nope]")
    assert result.exit_code == 2
    assert "its subgraphs: repeated_subgraph0, repeated_subgraph1" in result.stderr


def test_bytecode_as_a_diff_of_the_logged_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "depyf", None)  # not installed
    out = show(FIXTURES / "demo.log", "--compile-id", "1/0", "--bytecode").splitlines()
    assert out[:4] == [
        "== torch_dynamo_resume_in_forward_at_15: 1/0",
        "as logged, offsets and argument numbers left out (pip install depyf: as Python):",
        "--- original",
        "+++ modified",
    ]
    assert "-LOAD_FAST ___stack0" in out
    assert any(line.startswith("+LOAD_GLOBAL NULL + __compiled_fn_5") for line in out)


@pytest.mark.slow  # depyf imports torch
def test_bytecode_decompiled_by_depyf_when_installed() -> None:
    out = show(FIXTURES / "demo.log", "--compile-id", "1/0", "--bytecode").splitlines()
    assert out[1] == "decompiled by depyf (what dynamo made of the frame, as Python):"
    assert "-    return self.l2(h)" in out
    assert "+    return graph_out_0[0]" in out


def test_a_listing_of_another_python_is_not_assembled() -> None:
    text = "  1           0 NO_SUCH_OP               0\n"
    assert assembled(text) is None
    assert instructions("  1     >>    4 JUMP_FORWARD   2 (to 10)\n") == "JUMP_FORWARD"


def test_shown_steps_of_texts() -> None:
    c = compile_of(FIXTURES / "passes.log", "0/0")
    stage = pass_stages(c)[1]
    got = shown_steps(stage, {stage.steps[0].line: "a\nb", stage.steps[1].line: "a\nb"})
    assert [(s.how, s.against) for s in got] == [
        ("whole", None),
        ("unchanged", "before_joint_graph"),
    ]
    missing = shown_steps(stage, {stage.steps[1].line: "x"})
    assert [s.how for s in missing] == ["missing", "whole"]
    assert unified("a\n", "a\n", "x", "y") == []


def test_every_text_shown_is_inert(tmp_path: Path) -> None:
    """A pass graph, a region name and bytecode from a log reach the terminal only as escapes."""
    evil = "def forward(self):\n    x = 1  # \x1b]0;owned\x07 \u202e\n    return x"
    log = tmp_path / "evil.log"
    log.write_bytes(
        record(
            "artifact",
            {"name": "before_post_grad_graph", "encoding": "string"},
            payload="def forward(self):\n    return 1",
        )
        + record("graph_dump", {"name": "vllm_post_grad.0.Evil\x1bPass"}, payload=evil)
        + record(
            "artifact",
            {"name": "fx_graph_runnable", "encoding": "string"},
            payload="x",
            subgraph_name="r\x1b[2J",
        )
    )
    out = show(log, "--compile-id", "0/0", "--passes") + show(log, "--compile-id", "0/0")
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "vllm_post_grad.0.Evil\\x1bPass" in out
    assert "+    x = 1  # \\x1b]0;owned\\x07 \\u202e" in out
    assert "r\\x1b[2J" in out


def test_a_subgraph_name_not_a_string_is_a_bad_line(tmp_path: Path) -> None:
    log = tmp_path / "odd.log"
    art = {"name": "fx_graph_runnable", "encoding": "string"}
    log.write_bytes(
        record("artifact", art, payload="x", subgraph_name=["r"])
        + record("artifact", art, payload="y", subgraph_name="r" * 300)
    )
    report = tlview.read(log)
    assert [b.reason for b in report.logs[0].bad_lines] == [
        "artifact: subgraph_name is not a string: ['r']"
    ]
    c = find_compile(report, "0/0")
    assert [p.subgraph for p in c.graphs] == [None, "r" * 200]  # cut, as kept
