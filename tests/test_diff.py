"""`tlview diff` on two runs of one program that differ in one thing: that thing, nothing else."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus, run_cli
from runs import BREAK_LINE, traces  # noqa: F401  (session fixture)

from tlview.analyze.diff import (
    Change,
    Diff,
    FrameKey,
    _guard,
    change_words,
    compare,
    frames_of,
    match,
)
from tlview.load import read as load

# Two real runs' compile times differ as the machine's load does: the gate and the changes these
# tests check leave time out (compile-time checks are tested on fixed logs, in test_gate.py).
GATE = "graph-breaks,recompiles,failures"


def untimed(changes: list[Change]) -> list[Change]:
    return [c for c in changes if c.kind != "compile-time"]


def diff_of(traces: dict[str, Path], new: str) -> Diff:  # noqa: F811
    return compare(load(traces["base"]), load(traces[new]))


def diff_json(*args: Any) -> tuple[int, dict[str, Any], str]:
    result = run_cli("diff", *args, "--format", "json")
    return result.exit_code, json.loads(result.stdout), result.stderr


@pytest.mark.slow
def test_identical_runs_have_no_change(traces: dict[str, Path]) -> None:  # noqa: F811
    d = diff_of(traces, "base2")
    assert untimed(d.changes) == []
    assert [(p.match, len(p.compiles)) for p in d.frames] == [("exact", 2), ("exact", 3)]
    assert all(not f.changed for f in d.figures if not f.seconds)
    result = run_cli("diff", traces["base"], traces["base2"], "--fail-on", GATE)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert ("No changes" in result.stdout) == (d.changes == [])


@pytest.mark.slow
def test_dtype_change_is_the_only_change(traces: dict[str, Path]) -> None:  # noqa: F811
    d = diff_of(traces, "dtype")
    assert [(c.kind, c.frame, c.base_compile, c.new_compile) for c in untimed(d.changes)] == [
        ("input", "f (prog.py:9)", "0/0", "0/0"),
        ("input", "f (prog.py:9)", "0/1", "0/1"),
    ]
    for c in untimed(d.changes):
        assert c.input is not None
        assert (c.input.source, c.input.field) == ("L['x']", "dtype")
        assert (c.before, c.after) == ("torch.float32", "torch.float64")
    assert [(f.name, f.base, f.new) for f in d.figures if f.name != "compile time (s)"] == [
        ("compiles", 5, 5),
        ("graph breaks", 0, 0),
        ("recompiles", 3, 3),
        ("failures", 1, 1),
        ("restarts", 0, 0),
        ("graph ops", 10, 10),
    ]
    text = run_cli("diff", traces["base"], traces["dtype"]).stdout
    assert "compile #1: L['x'] dtype: float32 -> float64" in text
    assert "compile #2: L['x'] dtype: float32 -> float64" in text
    # The usual gate passes (nothing got worse by those measures); input-changes fails.
    assert run_cli("diff", traces["base"], traces["dtype"], "--fail-on", GATE).exit_code == 0
    result = run_cli("diff", traces["base"], traces["dtype"], "--fail-on", "input-changes")
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [
        "tlview: fail-on input-changes: 2 input change(s) in matched compiles (limit 0), "
        "first: f (prog.py:9): compile #1: L['x'] dtype: float32 -> float64"
    ]


@pytest.mark.slow
def test_new_graph_break_and_what_follows_from_it(traces: dict[str, Path]) -> None:  # noqa: F811
    d = diff_of(traces, "break")
    got = [(c.kind, c.frame, c.what, c.before, c.after) for c in untimed(d.changes)]
    assert got == [
        (
            "graph-break-new",
            "f (prog.py:9)",
            "Call to `torch._dynamo.graph_break()`",
            None,
            f"prog.py:{BREAK_LINE}",
        ),
        ("status", "f (prog.py:9)", "compile #1", "ok", "graph_break"),
        ("graph-ops", "f (prog.py:9)", "compile #1", 4, 2),
        ("status", "f (prog.py:9)", "compile #2", "ok", "graph_break"),
        ("graph-ops", "f (prog.py:9)", "compile #2", 4, 2),
        (
            "frame-added",
            f"torch_dynamo_resume_in_f_at_{BREAK_LINE} (prog.py:{BREAK_LINE})",
            "2 compile(s)",
            None,
            2,
        ),
    ]
    # g moved from frame 1 to frame 2 (the resume function took id 1): matched by place.
    g = next(p for p in d.frames if p.key.function == "g")
    assert g.match == "exact"
    assert [c.key for c in g.base.compiles] == ["1/0", "1/1", "1/2"]  # type: ignore[union-attr]
    assert [c.key for c in g.new.compiles] == ["2/0", "2/1", "2/2"]  # type: ignore[union-attr]
    f = next(p for p in d.frames if p.key.function == "f")
    assert [(cc.base.key, cc.new.key) for cc in f.compiles] == [  # type: ignore[union-attr]
        ("0/0", "0/0_1"),
        ("0/1", "0/1_1"),
    ]
    assert all(cc.compared and not cc.input_changes for cc in f.compiles)


@pytest.mark.slow
def test_gate_fails_on_the_new_graph_break(traces: dict[str, Path]) -> None:  # noqa: F811
    result = run_cli("diff", traces["base"], traces["break"], "--fail-on", GATE)
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [
        "tlview: fail-on graph-breaks: 0 -> 2 (no more than BASE)",
        "tlview: fail-on recompiles: 3 -> 4 (no more than BASE)",
    ]
    # Allowances: two more graph breaks and one more recompile are accepted.
    ok = run_cli(
        "diff", traces["base"], traces["break"], "--fail-on", "graph-breaks:+2,recompiles:+1"
    )
    assert ok.exit_code == 0, ok.stderr
    # The other way round NEW is better: nothing fails.
    assert run_cli("diff", traces["break"], traces["base"], "--fail-on", GATE).exit_code == 0


@pytest.mark.slow
def test_json_format(traces: dict[str, Path]) -> None:  # noqa: F811
    code, data, err = diff_json(traces["base"], traces["break"], "--fail-on", GATE)
    assert code == 3
    assert data["format"] == "tlview.diff/1"
    assert data["base"]["path"] == str(traces["base"])
    assert data["base"]["stats"]["graph_breaks"] == 0
    assert data["new"]["stats"]["graph_breaks"] == 2
    # as torch counts: the two attempts that restarted at the breaks are restarts, not compiles
    assert {f["name"]: (f["base"], f["new"]) for f in data["figures"]}["compiles"] == (5, 7)
    kinds = [c["kind"] for c in data["changes"] if c["kind"] != "compile-time"]
    assert kinds == ["graph-break-new", "status", "graph-ops", "status", "graph-ops", "frame-added"]
    assert data["gate"] == {
        "checked": True,
        "failures": [
            "graph-breaks: 0 -> 2 (no more than BASE)",
            "recompiles: 3 -> 4 (no more than BASE)",
        ],
    }
    assert err.splitlines() == [f"tlview: fail-on {f}" for f in data["gate"]["failures"]]
    frames = {f["frame"]: f for f in data["frames"]}
    assert frames["f (prog.py:9)"]["compiles"][0] == {
        "index": 0,
        "base": "0/0",
        "new": "0/0_1",
        "status": ["ok", "graph_break"],
        "graph_ops": [4, 2],
        "compile_time_s": frames["f (prog.py:9)"]["compiles"][0]["compile_time_s"],
        "inputs_compared": True,
        "input_changes": [],
    }
    code, data, _ = diff_json(traces["base"], traces["dtype"])
    assert code == 0 and data["gate"] == {"checked": False, "failures": []}
    assert [c["input"] for c in data["changes"] if c["kind"] != "compile-time"] == [
        {"source": "L['x']", "field": "dtype", "before": "torch.float32", "after": "torch.float64"}
    ] * 2


@pytest.mark.slow
def test_html_page(traces: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "diff.html"
    result = run_cli(
        "diff", traces["base"], traces["dtype"], "--format", "html", "-o", out, "--fail-on", GATE
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.startswith("<!doctype html>")
    assert "<script" not in page
    assert "--fail-on: every check passed" in page
    # Log text is escaped, never markup.
    assert "L[&#39;x&#39;] dtype: float32 -&gt; float64" in page
    assert f"Changes ({len(diff_of(traces, 'dtype').changes)})" in page
    # A file tlview did not write is not replaced.
    other = tmp_path / "notes.html"
    other.write_text("mine")
    refused = run_cli("diff", traces["base"], traces["dtype"], "--format", "html", "-o", other)
    assert refused.exit_code == 4 and other.read_text() == "mine"


def test_same_log_twice_and_unreadable_input(tmp_path: Path) -> None:
    log = corpus("dynamic_shapes")
    code, data, _ = diff_json(log, log, "--fail-on", GATE + ",input-changes")
    assert code == 0
    assert data["changes"] == []
    missing = run_cli("diff", log, tmp_path / "nope")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("tlview: ") and len(missing.stderr.splitlines()) == 1


def test_frames_match_after_a_move() -> None:
    """A checkout in another place, with lines shifted: frames still pair up by name and file."""
    rep = load(corpus("mlp_aot_eager"))
    base = frames_of(rep)
    new = frames_of(rep)
    for f in new:
        k = f.key
        fn = re.sub(r"_at_\d+$", f"_at_{(k.line or 0) + 3}", k.function)
        f.key = FrameKey(k.process, fn, "/elsewhere/" + Path(k.file).name, (k.line or 0) + 3)
    pairs = match(base, new)
    assert [(p.match, p.base.key.function, p.new.key.function) for p in pairs] == [  # type: ignore[union-attr]
        ("moved", "forward", "forward"),
        (
            "renamed",
            "torch_dynamo_resume_in_forward_at_13",
            "torch_dynamo_resume_in_forward_at_16",
        ),
    ]
    assert all(not cc.input_changes and cc.compared for p in pairs for cc in p.compiles)


def test_processes_pair_by_rank() -> None:
    d = compare(load(corpus("multirank_gloo")), load(corpus("multirank_gloo")))
    assert d.changes == []
    assert {p.key.process for p in d.frames} == {"rank 0", "rank 1"}
    half = compare(
        load(corpus("multirank_gloo")),
        load(sorted(corpus("multirank_gloo").glob("*rank_0*.log"))[0]),
    )
    assert half.notes == ["BASE has 2 process log(s), NEW has 1"]
    frames = [c for c in half.changes if c.frame]
    assert {c.kind for c in frames} == {"frame-removed", "graph-break-gone"}
    assert {c.frame.split(":")[0] for c in frames} == {"rank 1"}
    assert {c.kind for c in half.changes if not c.frame} <= {"compile-time", "cache"}


def test_diff_records_are_typed() -> None:
    d = compare(load(corpus("mlp_aot_eager")), load(corpus("dynamic_shapes")))
    assert dataclasses.is_dataclass(d)
    assert {c.kind for c in d.changes} <= {
        "frame-added",
        "frame-removed",
        "graph-break-gone",
        "failure-new",
        "compile-time",
        "cache",
    }
    assert any(c.kind == "failure-new" and "ConstraintViolationError" in c.what for c in d.changes)


def test_diff_never_imports_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.argv = ['tlview', 'diff', sys.argv[1], sys.argv[2], '--format', 'html',\n"
        "            '-o', sys.argv[3], '--fail-on', 'graph-breaks,input-changes']\n"
        "from tlview.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 3, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    base, new = corpus("dynamic_shapes"), corpus("mlp_aot_eager")
    out = tmp_path / "d.html"
    subprocess.run(
        [sys.executable, "-c", code, str(base), str(new), str(out)], check=True, timeout=300
    )
    assert out.read_text().startswith("<!doctype html>")


def test_two_ranks_of_one_job_pair_up() -> None:
    """One log against one log: its frames pair up whatever rank each log is, and what
    differs is what the ranks did differently (rank 1 got one more row of data)."""
    r0, r1 = (sorted(corpus("multirank_gloo").glob(f"*rank_{r}_*.log"))[0] for r in (0, 1))
    d = compare(load(r0), load(r1))
    assert d.notes == ["the two runs have different ranks"]
    assert [(c.kind, c.frame.split(" ")[0], c.what, c.before, c.after) for c in d.changes] == [
        ("input", "inner", "compile #1: L['args'][0] size[0]", 8, 9)
    ]
    assert all(p.base is not None and p.new is not None for p in d.frames)


def test_html_page_says_dash_for_no_value(tmp_path: Path) -> None:
    """Graph ops and times a compile did not log (it failed) show as "-", never as None."""
    a, b = sorted(corpus("compile_error").glob("*.log"))
    out = tmp_path / "diff.html"
    assert run_cli("diff", a, b, "--format", "html", "-o", out).exit_code == 0
    page = out.read_text()
    assert "None" not in page and "<td>-</td>" in page


def test_a_frame_compiled_more_often_is_said_once() -> None:
    """A compiles change reads "1 -> 2 compiles", not "1 -> 2 compiles: 1 -> 2"."""
    c = Change("compiles", "f (p.py:2)", "1 -> 2 compiles", 1, 2, True)
    assert change_words(c) == "1 -> 2 compiles"


def test_a_guard_is_the_same_guard_whatever_values_it_saw() -> None:
    """Two runs whose recompile reason differs in the sizes seen, or in the stack torch adds
    (paths of one checkout), failed the same guard: no reason new in one and gone in the other.
    The reasons are mlp_aot_eager's, as torch 2.13 writes them."""
    (c,) = [c for c in load(corpus("mlp_aot_eager")).attempts if c.key == "0/1_1"]
    (logged,) = c.recompile.reasons  # type: ignore[union-attr]
    other = logged.replace("actual 12", "actual 16") + '\nUser stack trace:\n  File "/x.py", line 3'
    assert (
        _guard(logged)
        == _guard(other)
        == "tensor 'x' size mismatch at index 0. expected …, actual …"
    )
    assert _guard(logged.replace("index 0", "index 1")) != _guard(logged)


def test_a_guard_is_the_same_guard_whatever_folders_torch_cut() -> None:
    """torch names the source line of a guard with its path cut to what differs from its own
    install's ("# new/n03.py:33 in f", "# mp/v214/new/n03.py:33 in f" with torch elsewhere):
    the same guard in two environments. The reason is dynamic_shapes', as torch 2.13 wrote it."""
    (c,) = [c for c in load(corpus("dynamic_shapes")).attempts if c.key == "0/1"]
    logged = next(r for r in c.recompile.reasons if "# corpus/gen/" in r)  # type: ignore[union-attr]
    moved = logged.replace("# corpus/gen/", "# user/corpus/gen/").replace(
        "(_dynamo/variables/", "(torch/_dynamo/variables/"
    )
    assert moved != logged
    assert _guard(moved) == _guard(logged)
    assert "# dynamic_shapes.py:7 in f" in _guard(logged)
    assert _guard(logged.replace("dynamic_shapes.py:7", "dynamic_shapes.py:9")) != _guard(logged)


def test_one_program_under_torch_213_and_28_has_no_change() -> None:
    """torch 2.8 writes a failed guard without the source-line comment later torch adds, and
    words the recompile limit otherwise (RecompileLimitExceeded, not Unsupported): the same."""
    base, new = load(FIXTURES / "recomp.log"), load(FIXTURES / "torch28.log")
    (b,) = [c for c in base.attempts if c.key == "1/1"]
    (n,) = [c for c in new.attempts if c.key == "1/1"]
    assert (
        b.recompile_reasons[0].startswith("1/0: n == 2  ")
        and "# return y * n" in (b.recompile_reasons[0])
    )
    assert n.recompile_reasons[0].rstrip() == "1/0: n == 2"
    assert [c.fail_type for r in (base, new) for c in r.attempts if c.key == "2/2"] == [
        "Unsupported",
        "RecompileLimitExceeded",
    ]
    code, data, _ = diff_json(FIXTURES / "recomp.log", FIXTURES / "torch28.log")
    assert code == 0
    assert [c for c in data["changes"] if c["kind"] != "compile-time"] == []
    assert [(f["frame"], f["match"]) for f in data["frames"]] == [
        ("f (recomp.py:6)", "moved"),
        ("torch_dynamo_resume_in_f_at_8 (recomp.py:8)", "moved"),
        ("<lambda> (recomp.py:17)", "moved"),
        ("<lambda> (recomp.py:21)", "moved"),
        ("<lambda> (recomp.py:24)", "moved"),
    ]
    # Set against another run that gained a guard, it is new, shown with its comment.
    assert _reasons_shown(base, "1/1") == ["n == 2 # return y * n # the resume function"]


def _reasons_shown(report: Any, key: str) -> list[str]:
    from tlview.analyze.diff import _reasons

    frame = next(f for f in frames_of(report) if any(c.key == key for c in f.compiles))
    return [" ".join(v.split())[:43] for v in _reasons(frame).values()]


def test_a_log_without_a_torch_version_is_unknown_in_the_note() -> None:
    """torch 2.4 writes no torch_version (and its log has no inductor graph to read it from):
    the diff's note said `torch None -> 2.13.0+cpu`, Python's None, where the header says unknown."""
    res = run_cli("diff", FIXTURES / "torch24.log", FIXTURES / "demo.log")
    assert "note: torch unknown -> 2.13" in res.stdout and "None" not in res.stdout


def test_one_program_under_torch_25_and_213_has_no_change() -> None:
    """torch 2.5 names a local in a guard `tensor 'L['x']'` (2.13: `tensor 'x'`), calls the
    limit cache_size_limit and does not log its value (2.13: `recompile_limit (2)`): the same
    guards and the same failure, not a guard and a failure gone and others new."""
    base, new = load(FIXTURES / "torch25.log"), load(FIXTURES / "limit.log")
    reasons = [c.recompile_reasons[0] for r in (base, new) for c in r.attempts if c.key == "0/1"]
    assert reasons == [
        "0/0: tensor 'L['x']' size mismatch at index 0. expected 1, actual 2",
        "0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2",
    ]
    code, data, _ = diff_json(FIXTURES / "torch25.log", FIXTURES / "limit.log")
    assert code == 0
    assert [c for c in data["changes"] if c["kind"] != "compile-time"] == []
    assert [(f["frame"], f["match"]) for f in data["frames"]] == [("f (torch25.py:7)", "moved")]
