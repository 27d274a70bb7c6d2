"""The words every command shares (issue 49): compile ids as torch and tlparse write them, the
artifacts of a forward and a backward graph, a folder's logs, one rule for paths, and where
the table puts what."""

from __future__ import annotations

import pytest
from helpers import FIXTURES, corpus, run_cli

import tlview
from tlview.analyze.names import select
from tlview.errors import EXIT_USAGE

DEMO = FIXTURES / "demo.log"
KERNELS = FIXTURES / "kernels.log"
FAILS = corpus("compile_error", "dedicated_log_torch_trace_y1oz5uyn.log")


@pytest.mark.parametrize("ref", ["[0/1_1]", "[ 0/1_1 ]"])
def test_an_id_in_brackets_is_the_id(ref: str) -> None:
    """torch's messages and tlparse write `[0/1_1]`: every command takes it as `0/1_1`."""
    plain = run_cli("report", DEMO, "--compile-id", "0/1_1").stdout
    assert run_cli("report", DEMO, "--compile-id", ref).stdout == plain
    assert "0/1_1  forward  [graph_break]" in plain
    listed = run_cli("show", DEMO, "--compile-id", ref)
    assert listed.exit_code == 0 and "compile 0/1_1 " in listed.stdout
    rep = tlview.read(DEMO)
    assert select(rep, "[0/1]")[0] == select(rep, "0/1")[0] == "0/1_1"
    assert tlview.fake_inputs(rep, ref).keys() == tlview.fake_inputs(rep, "0/1_1").keys()


def test_a_rank_in_brackets_names_its_log_as_torch_prefixes_its_lines() -> None:
    job = FIXTURES / "ranks"
    one = run_cli("report", job, "--compile-id", "[rank1]:[0/0]", "-q")
    assert (
        one.exit_code == 0
        and one.stdout == run_cli("report", job, "--compile-id", "rank1:0/0", "-q").stdout
    )
    bad = run_cli("report", job, "--compile-id", "[rank7]:[0/0]")
    assert bad.exit_code == EXIT_USAGE and "no compile 'rank7:0/0'" in bad.stderr


def test_inductors_artifacts_say_which_graph_they_are_of() -> None:
    """The first of each per-graph kind is the forward's, the second the backward's (compiled at
    the first backward call); the code itself says so in its first line."""
    named = dict(tlview.artifacts(KERNELS, "0/0"))
    assert "inductor_output_code (forward)" in named
    assert "inductor_output_code#2 (backward)" in named
    assert "fx_graph_runnable#2 (backward)" in named
    assert "dynamo_cpp_guards_str" in named and "aot_backward_graph" in named  # no role
    back = tlview.artifact(KERNELS, "0/0", "inductor_output_code (backward)")
    assert (back.data or b"").startswith(b"# AOT ID: ['0_backward']")
    for same in ("inductor_output_code#2", "inductor_output_code#2 (backward)"):
        assert tlview.artifact(KERNELS, "0/0", same).data == back.data
    fwd = tlview.artifact(KERNELS, "0/0", "inductor_output_code (forward)")
    assert (fwd.data or b"").startswith(b"# AOT ID: ['0_forward']")
    assert fwd.data == tlview.artifact(KERNELS, "0/0", "inductor_output_code").data
    res = run_cli("show", KERNELS, "--compile-id", "0/0", "inductor_output_code#2 (forward)")
    assert res.exit_code == EXIT_USAGE
    assert "no artifact 'inductor_output_code#2 (forward)'" in res.stderr


def test_a_folders_logs_are_named_by_what_tells_them_apart() -> None:
    """`dedicated_log_torch_trace_` begins every log torch writes: a folder's compiles are named
    by the rest of the file name (`4oku3kw2.log:0/0`), and the whole name is still taken."""
    folder = corpus("compile_error")
    text = run_cli("report", folder).stdout
    assert "4oku3kw2.log:0/0 " in text and "y1oz5uyn.log:3/0 " in text
    assert "dedicated_log_torch_trace_4oku3kw2.log:" not in text
    short = run_cli("report", folder, "--compile-id", "4oku3kw2.log:1/1").stdout
    long = run_cli(
        "report", folder, "--compile-id", "dedicated_log_torch_trace_4oku3kw2.log:1/1"
    ).stdout
    assert short == long and "4oku3kw2.log:1/1  g  [failed]" in short
    rep = tlview.read(folder)
    assert select(rep, "dedicated_log_torch_trace_y1oz5uyn.log:2/0")[0] == "y1oz5uyn.log:2/0"


def _rows(text: str, title: str) -> list[list[str]]:
    lines = text.splitlines()
    at = next(k for k, ln in enumerate(lines) if ln.rstrip() == title)
    rows = []
    for line in lines[at + 3 :]:
        if " | " not in line:
            break
        rows.append([c.strip() for c in line.split(" | ")])
    return rows


def test_every_table_trims_a_path_by_one_rule() -> None:
    """The compile table and the failures table name one program's file alike: its folder and
    its name (they read `gen/...` and `corpus/gen/...`)."""
    text = run_cli("report", FAILS).stdout
    compiles = _rows(text, "Compiles")
    failures = _rows(text, "Failures and unfinished compiles")
    assert compiles[4][:4] == ["3/0", "failed (TorchRuntimeError)", "mm", "gen/compile_error.py:57"]
    assert [r[-1] for r in failures if r[0] == "3/0"] == ["gen/compile_error.py:59"]


def test_the_records_outside_any_compile_come_last() -> None:
    rows = _rows(run_cli("report", corpus("export"), "-q").stdout, "Compiles")
    assert [r[0] for r in rows] == ["0/0", "1/0", "-/-"]


def test_a_failures_later_lines_are_indented_under_its_first() -> None:
    """`backend='bad_backend' raised:` and, under it, the error: not at column 0."""
    text = run_cli("report", FAILS, "--compile-id", "0/0").stdout.splitlines()
    at = next(k for k, ln in enumerate(text) if "failed: BackendCompilerFailed" in ln)
    assert text[at] == "  failed: BackendCompilerFailed: backend='bad_backend' raised:"
    assert text[at + 1].startswith("    Boom: intentional backend failure")
    table = run_cli("report", FAILS).stdout.splitlines()
    cells = [ln.split(" | ")[3] for ln in table if "Boom: intentional" in ln and " | " in ln]
    assert [c.rstrip(" |") for c in cells] == [
        "  Boom: intentional backend failure (suppress) on graph with 5 nodes"
    ]
