"""`tlview report` on real logs: compile ids, statuses, breaks, recompiles, failures and inputs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, corpus, gloo_rank0, only_log, report_json, run_cli
from listing import listing_rows

from tlview.analyze.baseline import every_attempt


def compiles(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in every_attempt(data)}


def test_json_contract_keys() -> None:
    data = report_json(only_log("mlp_aot_eager"))
    assert data["format"] == "tlview.report/2"
    for key in ("lines", "records", "bad_lines", "unknown_kinds"):
        assert key in data["stats"]
    assert data["stats"]["records"] == 247
    assert data["stats"]["bad_lines"] == 0
    assert data["stats"]["unknown_kinds"] == {}
    for c in every_attempt(data):
        assert {"compile_id", "log", "rank", "status", "inputs"} <= c.keys()
        for i in c["inputs"]:
            assert {
                "sources",
                "size",
                "stride",
                "storage_offset",
                "dtype",
                "device",
                "storage",
                "requires_grad",
                "is_parameter",
            } <= i.keys()


def test_mlp_compiles_statuses_and_breaks() -> None:
    data = report_json(only_log("mlp_aot_eager"))
    by = compiles(data)
    assert [k for k in by] == ["-/-", "0/0", "0/0_1", "0/1", "0/1_1", "1/0", "1/1"]
    assert by["-/-"]["compile_id"] is None
    assert {k: c["status"] for k, c in by.items()} == {
        "-/-": "outside",
        "0/0": "restarted",
        "0/0_1": "graph_break",
        "0/1": "restarted",
        "0/1_1": "graph_break",
        "1/0": "ok",
        "1/1": "ok",
    }
    assert by["0/0_1"]["function"] == "forward"
    assert by["1/0"]["function"] == "torch_dynamo_resume_in_forward_at_13"
    # One graph-break reason, seen twice, at the same user line.
    (gb,) = data["graph_breaks"]
    assert gb["count"] == 2
    assert gb["title"] == "Call to `torch._dynamo.graph_break()`"
    assert gb["where"] == {"/home/user/corpus/gen/mlp_aot_eager.py:13": 2}
    assert gb["compiles"] == ["0/0_1", "0/1_1"]  # the compiles whose attempts broke
    assert data["stats"]["graph_breaks"] == 2
    assert data["stats"]["restarts"] == 2
    # Recompiles name the guard that failed.
    assert by["0/1"]["recompile_reasons"] == [
        "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 12"
    ]
    assert by["1/1"]["recompile_reasons"] == [
        "1/0: tensor 'h' size mismatch at index 0. expected 8, actual 12"
    ]


def test_mlp_inputs_as_logged() -> None:
    by = compiles(report_json(only_log("mlp_aot_eager")))
    inputs = by["1/0"]["inputs"]
    assert [i["sources"] for i in inputs] == [
        ["L['self']._modules['l2']._parameters['weight']"],
        ["L['self']._modules['l2']._parameters['bias']"],
        ["L['h']"],
        ["L['self']._modules['l3']._parameters['weight']"],
        ["L['self']._modules['l3']._parameters['bias']"],
    ]
    w, b, h = inputs[0], inputs[1], inputs[2]
    assert (w["size"], w["stride"], w["storage_offset"]) == ([64, 64], [64, 1], 0)
    assert w["is_parameter"] and w["requires_grad"] and w["is_leaf"]
    assert (h["size"], h["stride"], h["dtype"], h["device"]) == (
        [8, 64],
        [64, 1],
        "torch.float32",
        "cpu",
    )
    assert h["requires_grad"] and not h["is_leaf"] and not h["is_parameter"]
    assert b["storage_bytes"] == 256
    # No two inputs share storage here.
    assert len({i["storage"] for i in inputs}) == 5
    # The restarted attempt's inputs are kept and marked superseded.
    assert all(i["superseded"] for i in by["0/0"]["inputs"])
    assert not any(i["superseded"] for i in by["0/0_1"]["inputs"])
    assert [i["size"] for i in by["0/1_1"]["inputs"]][2] == [12, 16]


def test_views_offsets_and_alias_groups() -> None:
    by = compiles(report_json(only_log("views_aliasing")))
    a, b, c = by["0/0"]["inputs"]
    assert a["sources"] == ["L['a']"]
    assert (a["size"], a["stride"], a["storage_offset"]) == ([3, 10, 8], [80, 1, 10], 80)
    assert a["is_view"] and a["storage_bytes"] == 1920
    assert (b["size"], b["stride"], b["storage_offset"]) == ([8, 5], [24, 1], 2)
    assert (c["size"], c["stride"]) == ([7, 5], [1, 7])
    # g(x, y): two arguments that share one storage form one alias group.
    x, y = by["1/0"]["inputs"]
    assert x["storage"] == y["storage"] and x["storage"] is not None
    assert x["alias_group"] == y["alias_group"] == 1
    assert (y["size"], y["storage_offset"], y["storage_bytes"]) == ([6], 4, 40)
    # channels_last conv weight and input.
    conv = by["4/0"]["inputs"]
    assert conv[2]["sources"] == ["L['args'][0]"]
    assert conv[2]["stride"] == [768, 1, 48, 3]
    # Expanded (stride 0) input.
    assert by["6/0"]["inputs"][0]["stride"] == [0, 1]


def test_dtypes_as_logged() -> None:
    by = compiles(report_json(only_log("dtypes_zoo")))
    dtypes = [c["inputs"][0]["dtype"] for k, c in by.items() if k.startswith("0/")]
    assert dtypes == [
        "torch.float16",
        "torch.bfloat16",
        "torch.float64",
        "torch.int64",
        "torch.int32",
        "torch.int16",
        "torch.int8",
        "torch.uint8",
        "torch.complex64",
        "torch.complex128",
    ]
    assert [c["inputs"][0]["dtype"] for k, c in by.items() if k.startswith("2/")][:2] == [
        "torch.float8_e4m3fn",
        "torch.float8_e5m2",
    ]
    assert by["1/0"]["inputs"][1]["dtype"] == "torch.bool"


def test_failures_with_type_and_reason() -> None:
    data = report_json(corpus("compile_error"))
    assert len(data["logs"]) == 2
    failed = [c for c in every_attempt(data) if c["status"] == "failed"]
    assert len(failed) == data["stats"]["failures"] == 7
    types = sorted({c["fail_type"] for c in failed})
    assert types == ["BackendCompilerFailed", "TorchRuntimeError"]
    mm = next(c for c in failed if c["function"] == "mm")
    assert mm["fail_reason"].startswith("RuntimeError when making fake tensor call")
    # The failure's crash stack (dynamo_error) is kept.
    assert any(a["kind"] == "dynamo_error" and "Traceback" in a["text"] for a in mm["artifacts"])


def test_failure_table_says_where_a_long_reason_was_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # 6/0's reason is 9 lines; the table keeps 4, drops the "User stack:" heading whose lines
    # are cut, and says how many are left and how to see them.
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside the reason cell
    out = run_cli("report", only_log("dynamic_shapes")).output
    start = out.index("Failures and unfinished compiles")
    table = out[start : out.index("\n0/0 ", start)]
    assert "Constraints violated (L['x'].size()[0])!" in table
    assert "... 5 more lines: --compile-id 6/0 shows them" in table
    assert "User stack:" not in table
    full = run_cli("report", only_log("dynamic_shapes"), "--compile-id", "6/0").output
    assert "User stack:" in full and "more lines" not in full


def test_crashed_run_has_an_unfinished_compile() -> None:
    by = compiles(report_json(only_log("truncated_log")))
    assert by["0/0"]["status"] == "ok"
    assert by["0/1"]["status"] == "incomplete"
    assert len(by["0/1"]["inputs"]) == 65
    # Begin events that never ended are kept as open phases.
    assert any(p["dur_us"] is None for p in by["0/1"]["phases"])


def test_dynamic_shapes_symbols_and_symbolic_sizes() -> None:
    by = compiles(report_json(only_log("dynamic_shapes")))
    syms = {(s["kind"], s["symbol"], s["source"]) for s in by["0/0"]["symbols"]}
    assert ("created", "s17", "L['y'].size()[0]") in syms
    unbacked = [s for c in by.values() for s in c["symbols"] if s["kind"] == "unbacked"]
    assert unbacked and unbacked[0]["symbol"].startswith("u")
    assert by["6/0"]["fail_type"] == "ConstraintViolationError"
    # export: a symbolic storage size stays a string as logged.
    ex = compiles(report_json(only_log("export")))
    (pred, x) = ex["1/0"]["inputs"]
    assert x["size"] == ["s77", 4]
    assert x["storage_bytes"] == "16*s77"
    assert pred["size"] == [] and pred["dtype"] == "torch.bool"


def test_subclass_and_nested_inputs() -> None:
    by = compiles(report_json(only_log("subclasses")))
    n = by["1/0"]["inputs"][0]
    assert n["size"] == [3, "j1", 8]
    assert n["stride"] == ["8*j1", 8, 1]
    assert n["type"] == "torch.nested._internal.nested_tensor.NestedTensor"
    assert set(n["inner"]) >= {"_values", "_offsets"}


def test_ranks_from_multirank_logs() -> None:
    data = report_json(corpus("multirank_gloo"))
    assert data["ranks"] == [0, 1]
    assert {c["rank"] for c in every_attempt(data)} == {0, 1}
    data = report_json(corpus("tlparse-tests", "multi_rank_logs"))
    assert data["ranks"] == [0, 1, 2, 3]


def test_corrupted_log_reports_and_strict_fails() -> None:
    path = corpus("tlparse-tests", "simple_corrupted_json.log")
    data = report_json(path)
    assert data["stats"]["bad_lines"] == 1
    assert data["bad_lines"][0]["line"] == 14
    assert "0/0" in compiles(data)
    result = run_cli("report", path, "--strict", "-q")
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines() == [f"tlview: {path}: 1 bad line(s) (--strict)"]


def test_text_report_shows_compiles_breaks_and_inputs() -> None:
    result = run_cli("report", only_log("views_aliasing"))
    assert result.exit_code == 0
    out = result.stdout
    assert "\x1b[" not in out  # plain when not a terminal
    assert "torch 2.13.0+cpu" in out
    for key in ("0/0", "1/0", "1/1", "2/0_1", "6/1"):
        assert key in out
    assert "L['a']" in out and "[3, 10, 8]" in out and "[80, 1, 10]" in out
    assert "#1" in out  # the alias group of g(x, y)


def test_text_report_one_compile() -> None:
    result = run_cli("report", only_log("mlp_aot_eager"), "--compile-id", "0/1")
    assert result.exit_code == 0
    assert "recompiled because: 0/0: tensor 'x' size mismatch" in result.stdout
    assert "L['x']" in result.stdout and "[12, 16]" in result.stdout
    unknown = run_cli("report", only_log("mlp_aot_eager"), "--compile-id", "9/9")
    assert unknown.exit_code == 2
    assert "no compile '9/9'" in unknown.stderr


def test_a_graph_break_says_its_hint_context_and_the_calls_that_reached_it() -> None:
    """tests/fixtures/nested_break.log: f calls helper, which calls graph_break(); torch logs
    the break's hint, its debug context and the user-code traceback f:12 -> helper:6."""
    out = run_cli("report", FIXTURES / "nested_break.log", "--compile-id", "0/0").stdout
    lines = [ln.strip() for ln in out.splitlines()]
    at = lines.index(next(ln for ln in lines if ln.startswith("graph break at")))
    assert lines[at].endswith("nested_break.py:6: Call to `torch._dynamo.graph_break()`")
    assert lines[at + 1 : at + 8] == [
        "User-inserted graph break. Message: None",
        "hint: Remove the `torch._dynamo.graph_break()` call.",
        "debug context: Called `torch._dynamo.graph_break()` with args `[]`, kwargs `{}`",
        "reached from:",
        lines[at + 5],
        lines[at + 6],
        lines[at + 7],
    ]
    assert lines[at + 5].endswith("nested_break.py:12 in f: return helper(y) * 2")
    assert lines[at + 6].endswith("nested_break.py:6 in helper: torch._dynamo.graph_break()")
    assert lines[at + 7].startswith("missing: ")  # the frames torch logged below are its own
    # The graph-break table gives the hint too; a break in the compiled function itself (demo)
    # has no call chain beyond the compile's own stack.
    table = run_cli("report", FIXTURES / "nested_break.log").stdout
    assert "hint: Remove the `torch._dynamo.graph_break()` call." in table
    demo = run_cli("report", FIXTURES / "demo.log", "--compile-id", "0/0").stdout
    assert "hint: Remove the `torch._dynamo.graph_break()` call." in demo
    assert "reached from" not in demo


def test_a_symbol_made_inside_a_higher_order_op_is_placed_at_the_users_line() -> None:
    """tests/fixtures/hop_while.log: while_loop's counter becomes s18 while dynamo traces torch's
    own while_loop and pytree code; the record's user_stack ends in those frames."""
    (sym,) = [s for c in report_json(FIXTURES / "hop_while.log")["compiles"] for s in c["symbols"]]
    assert (sym["symbol"], sym["source"]) == ("s18", "L['i'].item()")
    assert sym["where"]["file"].endswith("hop_while.py")
    assert (sym["where"]["line"], sym["where"]["name"]) == (7, "f")
    assert sym["where"]["loc"].startswith("return while_loop(")


def test_compile_ids_started_over_by_dynamo_reset_are_compiles_of_their_run() -> None:
    # torch._dynamo.reset() between three compiles: f, g and f again, each logged as 0/0.
    log = FIXTURES / "reset.log"
    data = report_json(log)
    got = [(c["key"], c["compile_id"], c["run"], c["function"]) for c in every_attempt(data)[1:]]
    assert got == [("0/0", "0/0", 1, "f"), ("0/0@2", "0/0", 2, "g"), ("0/0@3", "0/0", 3, "f")]
    by = {c["key"]: c for c in every_attempt(data)}
    assert [i["size"] for i in by["0/0@3"]["inputs"]] == [[4, 4]]
    for c in every_attempt(data)[1:]:
        assert [i["size"] for k in [c] for i in k["inputs"]] in ([[4]], [[4, 4]])
        assert c["events"] == [] and c["status"] == "ok"
        assert c["metrics"]["co_name"] == c["function"]
        # The phases begun before each dynamo_start (dynamo, entire_frame_compile) are its own.
        assert [p["name"] for p in c["phases"][:2]] == ["dynamo", "entire_frame_compile"]
        assert c["phases"][0]["dur_us"] > c["phases"][1]["dur_us"] > 0
    assert data["stats"]["compiles"] == 3
    (note,) = data["logs"][0]["notes"]
    assert note.startswith(
        "this process started compile ids over 2 time(s) (torch._dynamo.reset())"
    )
    result = run_cli("report", log, "--compile-id", "0/0@2")
    assert result.exit_code == 0
    assert "0/0@2  g  [ok]" in result.stdout and "0/0  f" not in result.stdout
    assert (
        "note: reset.log: this process started compile ids over 2 time(s)"
        in run_cli("report", log).stdout
    )
    # A log that never started ids over says nothing of it, and names no run.
    demo = report_json(FIXTURES / "demo.log")
    assert demo["logs"][0]["notes"] == []
    assert all("@" not in c["key"] and c["run"] == 1 for c in demo["compiles"])


def test_a_reset_after_a_restart_starts_a_new_run() -> None:
    """f breaks its graph, so 0/0 restarts as 0/0_1 (whose metrics end attempt 0 too), then
    torch._dynamo.reset(), twice: the second run's 0/0 is a compile of its own, not the first's."""
    data = report_json(FIXTURES / "reset_break.log")
    got = [(c["key"], c["status"], c["function"]) for c in every_attempt(data)[1:]]
    resume = "torch_dynamo_resume_in_f_at_6"
    assert got == [
        ("0/0", "restarted", "f"),
        ("0/0_1", "graph_break", "f"),
        ("1/0", "ok", resume),
        ("0/0@2", "restarted", "f"),
        ("0/0_1@2", "graph_break", "f"),
        ("1/0@2", "ok", resume),
    ]
    by = {c["key"]: c for c in every_attempt(data)}
    for key, n in (("0/0", 3), ("0/0_1", 3), ("0/0@2", 6), ("0/0_1@2", 6)):
        assert [i["size"] for i in by[key]["inputs"]] == [[n]], key
    assert data["stats"]["restarts"] == 2 and data["stats"]["graph_breaks"] == 2
    assert all(by[k]["compile_time_s"] for k in ("0/0_1", "1/0", "0/0_1@2", "1/0@2"))


def test_a_copied_dynamo_start_is_no_new_run(tmp_path: Path) -> None:
    # A record written twice (damage) repeats an id whose compile has not ended: the same run.
    data = (FIXTURES / "reset.log").read_bytes()
    at = data.index(b'{"dynamo_start"')
    start, end = data.rfind(b"\n", 0, at) + 1, data.index(b"\n", at) + 1
    log = tmp_path / "copied.log"
    log.write_bytes(data[:end] + data[start:end] + data[end:])
    keys = [c["key"] for c in every_attempt(report_json(log))]
    assert keys == ["-/-", "0/0", "0/0@2", "0/0@3"]


@pytest.mark.slow
def test_latest_reads_the_newest_log_of_a_directory(tmp_path: Path) -> None:
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    old.write_bytes((FIXTURES / "demo.log").read_bytes())
    new.write_bytes((FIXTURES / "reset.log").read_bytes())
    os.utime(old, (1_700_000_000, 1_700_000_000))
    os.utime(new, (1_800_000_000, 1_800_000_000))
    res = run_cli("report", tmp_path, "--latest", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [log["name"] for log in data["logs"]] == ["new.log"]
    assert [c["key"] for c in every_attempt(data)] == ["-/-", "0/0", "0/0@2", "0/0@3"]
    assert res.stderr == f"tlview: reading the newest log, {new}\n"
    listed = run_cli("inputs", tmp_path, "--latest", "--compile-id", "0/0@3")
    assert listed.exit_code == 0 and "[4, 4]" in listed.stdout
    # Not a directory, or no log in it: one line, and the usage or no-trace status.
    for path, code, why in [
        (new, 2, "--latest needs a local directory of logs"),
        (tmp_path / "none", 2, "--latest needs a local directory of logs"),
    ]:
        res = run_cli("report", path, "--latest")
        assert res.exit_code == code and res.stderr == f"tlview: {path}: {why}\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("report", empty, "--latest")
    assert res.exit_code == 1
    assert res.stderr == f"tlview: {empty}: no *.log or *.log.gz file in this directory\n"


def test_json_output_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("report", FIXTURES / "demo.log", "--format", "json", "-o", out)
    assert result.exit_code == 0
    data = json.loads(out.read_text())
    assert data["stats"]["compiles"] == 5
    # tlview replaces its own output without --force.
    again = run_cli("report", FIXTURES / "demo.log", "--format", "json", "-o", out)
    assert again.exit_code == 0


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda p: None, "no such file or directory"),
        (lambda p: p.write_bytes(b""), "empty file"),
        (lambda p: p.write_bytes(bytes(range(256)) * 64), "binary file"),
        (lambda p: p.write_text("hello\nworld\n"), "no TORCH_TRACE record in 2 line(s)"),
    ],
)
def test_unreadable_input_is_one_line_exit_1(tmp_path: Path, make: Any, reason: str) -> None:
    path = tmp_path / "x.log"
    make(path)
    result = run_cli("report", path)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tlview: {path}") and reason in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_report_never_imports_torch() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['tlview', 'report', sys.argv[1], '--format', 'json', '-o', '/dev/null']\n"
        "from tlview.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    for log in (only_log("transformer_inductor"), only_log("subclasses")):
        subprocess.run([sys.executable, "-c", code, str(log)], check=True, cwd=ROOT, timeout=300)


def _text_report(path: Path, **opts: Any) -> str:
    import io

    from rich.console import Console

    from tlview.load import read as load
    from tlview.render.text import report as text

    out = io.StringIO()
    text.draw(load(path), Console(file=out, width=200), text.TextOptions(**opts))
    return out.getvalue()


def _listed(report: str) -> list[str]:
    """The compile ids of the compile table, in the order it lists them."""
    lines = report.split("\nCompiles", 1)[1].split("\n")[3:]  # past the title, head and rule
    ids = []
    for line in lines:
        if "|" not in line:
            break
        ids.append(line.split("|")[0].strip())
    return ids


def test_the_compile_table_keeps_problems_first_in_log_order_when_capped() -> None:
    # A log of thousands of compiles does not flood the terminal: the table lists at most
    # max_rows, failures, graph breaks, restarts and recompiles first, and says what it left out.
    path = only_log("mlp_aot_eager")
    whole = _text_report(path)
    # The attempts that restarted (0/0, 0/1) are no rows: the compile after each says so.
    assert _listed(whole) == ["0/0_1", "0/1_1", "1/0", "1/1"]
    assert "not listed" not in whole
    three = _text_report(path, max_rows=3)
    assert _listed(three) == ["0/0_1", "0/1_1", "1/1"]  # 1/1 is a recompile
    assert "... 1 more compiles not listed (1 ok): -v lists them all" in three
    two = _text_report(path, max_rows=1)
    assert _listed(two) == ["0/0_1"]
    assert "... 3 more compiles not listed (2 ok, 1 graph_break)" in two
    assert _listed(_text_report(path, max_rows=2, verbosity=1)) == _listed(whole)
    # The recompile table too: 0/1_1 and 1/1 recompiled.
    assert "... 1 more recompiles not listed: -v lists them all" in _text_report(path, max_rows=1)


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_a_compile_lists_its_own_inputs_before_hundreds_of_parameters() -> None:
    # The terminal lists 40 inputs of a compile by default: its own inputs, buffers, views and
    # shared storages first, then parameters, in log order; --compile-id and -v list every one.
    path = only_log("truncated_log")  # an MLP of 64 parameters and one input, compiled twice
    report = _text_report(path)
    assert (
        "... 25 more inputs not listed (25 param): --compile-id 0/0 or -v lists them all" in report
    )
    assert "--compile-id 0/1 or -v" in report
    first = report.split("0/0  inner", 1)[1].split("... 25 more inputs", 1)[0]
    rows = [line for line in first.splitlines() if line.startswith("L[")]
    assert len(rows) == 40 and sum("L['args'][0]" in r for r in rows) == 1
    assert rows[2].startswith("L['args'][0]")  # in its place in the log, after two parameters
    whole = run_cli("report", path, "--compile-id", "0/0").stdout
    assert "more inputs not listed" not in whole and whole.count("param grad") == 64


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize(
    "args",
    [
        ["report", "LOG"],  # the terminal report (rich)
        ["report", "LOG", "-v"],
        ["report", "LOG", "--format", "json"],
        ["report", "LOG", "--format", "html"],
        ["diff", "LOG", "LOG"],
        pytest.param(["inputs", "LOG"], marks=pytest.mark.slow),  # imports torch
    ],
)
def test_a_reader_that_goes_away_is_not_an_error(args: list[str]) -> None:
    # `tlview report LOG | head`: the reader closes the pipe before tlview is done writing.
    # Nothing on stderr and exit 0, whatever the format: rich's console exited 1 here, which
    # fails a script run with `set -o pipefail`.
    log = str(FIXTURES / "demo.log")
    r, w = os.pipe()
    os.close(r)  # no reader at all: tlview's first write meets a closed pipe
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tlview", *[log if a == "LOG" else a for a in args]],
            stdout=w,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        os.close(w)
    assert (done.returncode, done.stderr) == (0, b"")


def _tlview(args: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tlview", *args], stderr=subprocess.PIPE, cwd=ROOT, **kw, timeout=300
    )


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["report", "LOG", "--format", "json"], "standard output: "),
        (["report", "LOG", "--format", "html"], "standard output: "),
        (["report", "LOG"], ""),  # rich writes the terminal report itself
        (["report", "LOG", "--format", "json", "-o", "/dev/full"], "/dev/full: "),
        (["report", "LOG", "-o", "/dev/full"], "/dev/full: "),
        pytest.param(["inputs", "LOG"], "", marks=pytest.mark.slow),  # imports torch
        (["diff", "LOG", "LOG"], ""),
    ],
)
def test_a_full_disk_is_one_line_and_exit_4(args: list[str], named: str) -> None:
    # Writing to a full disk (/dev/full answers every write with ENOSPC) is the machine's
    # problem, not a bug of tlview's: one line that says so, naming the output when it can.
    log = str(FIXTURES / "demo.log")
    with open("/dev/full", "wb") as full:
        r = _tlview([log if a == "LOG" else a for a in args], stdout=full)
    assert r.returncode == 4
    assert r.stderr.decode() == f"tlview: {named}cannot write: No space left on device\n"


@pytest.mark.slow
def test_closed_standard_streams() -> None:
    # `tlview ... >&-` and `2>&-`: one line and exit 4 for no stdout to write the report to;
    # with no stderr the exit status still says what happened.
    log = str(FIXTURES / "demo.log")
    r = _tlview(
        ["report", log, "--format", "json"],
        stdout=subprocess.DEVNULL,
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )
    assert (r.returncode, r.stderr) == (
        4,
        b"tlview: standard output is closed: give a file to write to with -o\n",
    )
    for args in (["report", log], ["inputs", log], ["diff", log, log]):
        r = _tlview(args, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
        assert r.returncode == 4, args
    missing = subprocess.run(
        [sys.executable, "-m", "tlview", "report", "/no/such/log"],
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
        preexec_fn=lambda: os.close(2),
        timeout=300,
    )
    assert missing.returncode == 1
    ok = subprocess.run(
        [sys.executable, "-m", "tlview", "report", log, "--format", "json"],
        capture_output=False,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        preexec_fn=lambda: os.close(2),
        timeout=300,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["stats"]["compiles"] == 5  # as torch counts


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_a_log_on_standard_input() -> None:
    # `zcat LOG.gz | tlview report -`: the same report as the file's, but for its name.
    log = FIXTURES / "demo.log"
    r = _tlview(["report", "-", "--format", "json"], input=log.read_bytes(), stdout=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    piped, direct = json.loads(r.stdout), report_json(log)
    assert [c["compile_id"] for c in every_attempt(piped)] == [
        c["compile_id"] for c in every_attempt(direct)
    ]
    assert piped["stats"] == direct["stats"]
    with log.open("rb") as f:  # `tlview report - < LOG`: a file, read as one
        r = _tlview(["report", "-", "--format", "json"], stdin=f, stdout=subprocess.PIPE)
    assert r.returncode == 0 and json.loads(r.stdout)["stats"] == direct["stats"]


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_the_output_name_picks_the_format(tmp_path: Path) -> None:
    # `-o report.html` alone writes the page (it wrote the terminal report into a .html file);
    # `--format` still decides when given, and a name that says nothing means text.
    log = FIXTURES / "demo.log"
    for name, starts in [
        ("r.html", b"<!doctype html>"),
        ("R.HTM", b"<!doctype html>"),
        ("r.json", b'{"format":"tlview.report/2"'),
        ("r.txt", b"# written by tlview"),
        ("r", b"# written by tlview"),
    ]:
        assert run_cli("report", log, "-o", tmp_path / name).exit_code == 0
        assert (tmp_path / name).read_bytes().startswith(starts), name
    assert run_cli("report", log, "--format", "text", "-o", tmp_path / "t.html").exit_code == 0
    assert (tmp_path / "t.html").read_bytes().startswith(b"# written by tlview")
    assert run_cli("diff", log, log, "-o", tmp_path / "d.json").exit_code == 0
    assert json.loads((tmp_path / "d.json").read_bytes())["format"] == "tlview.diff/1"
    assert run_cli("diff", log, log, "-o", tmp_path / "d.html").exit_code == 0
    assert (tmp_path / "d.html").read_bytes().startswith(b"<!doctype html>")


def test_an_empty_standard_input_is_named_as_given() -> None:
    r = _tlview(["report", "-"], input=b"\n", stdout=subprocess.PIPE)
    assert (r.returncode, r.stderr) == (1, b"tlview: -: no TORCH_TRACE record in 1 line(s)\n")


def test_json_of_one_compile() -> None:
    # `--compile-id` with JSON lists that compile alone; the figures still count the whole log.
    log = FIXTURES / "demo.log"
    whole = report_json(log)
    r = run_cli("report", log, "--format", "json", "--compile-id", "0/1_1")
    assert r.exit_code == 0, r.output
    one = json.loads(r.stdout)
    (c,) = one["compiles"]
    assert c == next(x for x in whole["compiles"] if x["key"] == "0/1_1")
    assert [a["key"] for a in c["attempts"]] == ["0/1"] and one["outside"] == []
    assert one["stats"] == whole["stats"] and one["graph_breaks"] == whole["graph_breaks"]
    multi = run_cli("report", corpus("multirank_gloo"), "--format", "json", "--compile-id", "0/0")
    # 0/0 restarted: the compile it restarted into, a rank each.
    assert [c["key"] for c in json.loads(multi.stdout)["compiles"]] == ["0/0_1", "0/0_1"]


def test_where_the_compile_time_went() -> None:
    # dynamic_shapes: 12 compiles, two of them (f's 0/0 and 0/1) under inductor.
    log = only_log("dynamic_shapes")
    data = report_json(log)
    timed = [c for c in every_attempt(data) if c["compile_id"] and c["metrics"]]
    phases = {
        "total": "entire_frame_compile_time_s",
        "backend": "backend_compile_time_s",
        "inductor": "inductor_compile_time_s",
        "code_gen": "code_gen_time_s",
    }
    sums = {}
    for name, metric in phases.items():
        values = [c["metrics"][metric] for c in timed if c["metrics"].get(metric) is not None]
        if values:
            sums[name] = pytest.approx(sum(values), abs=1e-5)
    stats = data["stats"]
    assert stats["compile_time_by_phase_s"] == sums
    assert stats["compile_time_by_phase_s"]["total"] == pytest.approx(stats["compile_time_s"])
    slowest = stats["slowest_compiles"]
    by_total = sorted(timed, key=lambda c: -c["metrics"]["entire_frame_compile_time_s"])[:5]
    assert [s["compile"] for s in slowest] == [c["key"] for c in by_total]
    assert slowest[0]["compile"] == "0/0" and slowest[0]["function"] == "f"
    m = by_total[0]["metrics"]
    assert slowest[0]["phases_s"] == {
        name: pytest.approx(m[metric]) for name, metric in phases.items() if m.get(metric)
    }
    # The terminal: each phase summed, then the slowest, each linked on the page.
    out = run_cli("report", log).stdout
    assert "Compile time" in out and "the 5 slowest of 12 compiles" in out
    total = next(line for line in out.splitlines() if line.startswith("all 12 "))
    assert [c.strip() for c in total.split("|")][2:] == ["32.5 s", "30.9 s", "28.6 s", "28.1 s"]
    assert run_cli("report", log, "-q").stdout.count("Compile time") == 0  # brief: not shown


def test_times_logged_only_in_microseconds() -> None:
    """A torch that logs compilation_metrics times only as *_us (tlparse's test logs): the
    compile time and its phases come from them, in seconds."""
    doc = report_json(corpus("tlparse-tests", "simple.log"))
    (c,) = [c for c in every_attempt(doc) if c["key"] == "0/0"]
    assert "entire_frame_compile_time_s" not in c["metrics"]  # as logged: nothing added
    assert c["compile_time_s"] == pytest.approx(1.659332)
    assert doc["stats"]["compile_time_s"] == pytest.approx(1.659332)
    assert doc["stats"]["compile_time_by_phase_s"] == pytest.approx(
        {"total": 1.659332, "backend": 1.30709, "inductor": 0.706575, "code_gen": 0.529174}
    )
    text = run_cli("report", corpus("tlparse-tests", "simple.log")).stdout
    assert "1.66 s compiling" in text


def test_no_time_logged_is_not_zero(tmp_path: Path) -> None:
    """Compiles whose metrics hold no time at all: "not logged", never "0.00 s"."""

    data = (FIXTURES / "demo.log").read_bytes()
    data = re.sub(
        rb'"(entire_frame_compile_time_s|dynamo_cumulative_compile_time_us)": [0-9.]+, ', b"", data
    )
    log = tmp_path / "untimed.log"
    log.write_bytes(data)
    doc = report_json(log)
    assert doc["stats"]["compiles"] > 0 and doc["bad_lines"] == []
    assert doc["stats"]["compile_time_s"] is None
    assert all(c["compile_time_s"] is None for c in every_attempt(doc))
    assert "total" not in doc["stats"]["compile_time_by_phase_s"]
    # its spans still say how long it took: that time, said to be theirs
    spans = doc["stats"]["time"]["spans_s"]
    text = run_cli("report", log).stdout
    assert f"| {spans:.2f} s compiling (from spans: no compilation_metrics time) |" in text
    page = run_cli("report", log, "--format", "html").stdout
    assert f"{spans:.2f} s (spans)" in page
    # and without spans either, it is not logged
    bare = tmp_path / "bare.log"
    bare.write_bytes(b"".join(ln for ln in data.splitlines(True) if b"chromium_event" not in ln))
    text = run_cli("report", bare).stdout
    assert "compile time not logged" in text and "s compiling" not in text
    assert "not logged" in run_cli("report", bare, "--format", "html").stdout


def test_a_recompile_reason_keeps_its_stack() -> None:
    """A recompile_reasons payload of text: one reason per guard failure (a line starting with
    a compile id), its "User stack trace:" lines part of it, not reasons of their own."""
    doc = report_json(corpus("subclasses"))
    reasons = {c["key"]: c["recompile_reasons"] for c in every_attempt(doc)}
    (only,) = reasons["2/1"]
    first, *rest = only.splitlines()
    assert first.startswith("2/0: ___check_type_id(args[0], ")
    assert rest[0] == "User stack trace:" and len(rest) == 5
    assert rest[-1].strip() == "return F.linear(input, self.weight, self.bias)"
    # a JSON list (two guard failures) stays two reasons
    zoo = {c["key"]: c["recompile_reasons"] for c in report_json(corpus("dtypes_zoo"))["compiles"]}
    assert zoo["0/2"] == [
        "0/1: tensor 'x' dtype mismatch. expected BFloat16, actual Double",
        "0/0: tensor 'x' dtype mismatch. expected Half, actual Double",
    ]


def test_a_retry_after_a_failure_is_not_a_recompile() -> None:
    """suppress_errors: f failed in 0/0 and compiled again as 0/1 with nothing cached (metrics:
    cache_size 0, no guard failed); only g's 1/1 is a recompile (its guard on x failed)."""
    path = corpus("compile_error", "dedicated_log_torch_trace_4oku3kw2.log")
    doc = report_json(path)
    by = {c["key"]: c for c in every_attempt(doc)}
    assert doc["stats"]["recompiles"] == 1
    assert by["0/1"]["status"] == "failed" and by["0/1"]["recompile"]["retry"] is True
    assert by["0/1"]["recompile"]["previous"] == "0/0"
    assert by["1/1"]["recompile"]["retry"] is False
    assert by["1/1"]["recompile"]["reasons"] == [
        "1/0: tensor 'x' size mismatch at index 0. expected 3, actual 5"
    ]
    text = run_cli("report", path).stdout
    assert "| 1 recompile |" in text
    table = text[text.index("Recompiles") : text.index("Failures")]
    assert "1/1 " in table and "0/1 " not in table


def test_one_graph_break_under_its_wrappers_is_one_row() -> None:
    """The sparse-tensor break of subclasses.py, once as a break while tracing a CALL and twice
    inside "Failed to handle graph break gracefully ...": one row of three, named by the break."""
    doc = report_json(corpus("subclasses"))
    (row,) = [b for b in doc["graph_breaks"] if "sparse" in b["reason"]]
    assert row["title"] == "Attempted to wrap sparse Tensor" and row["count"] == 3
    # 3/0 broke and restarted, 3/0_1 broke again: both breaks are compile 3/0_1's.
    assert row["compiles"] == ["3/0_1", "4/0"]
    assert sorted(row["where"].values()) == [1, 2]
    titles = {g["title"] for c in every_attempt(doc) for g in c["graph_breaks"]}
    assert titles == {"Attempted to wrap sparse Tensor"}
    # breaks of two kinds stay two rows; the four skipped calls (CALL and CALL_FUNCTION_EX) one
    gloo = report_json(corpus("multirank_gloo"))
    assert [(b["title"], b["count"]) for b in gloo["graph_breaks"]] == [
        ("Attempted to call function marked as skipped", 4),
        ("Unsupported method call", 2),
    ]


def test_a_restart_is_named_by_its_compiles_metrics() -> None:
    """An older torch (tlparse's comp_metrics.log) ends attempt 0's dynamo_start stack in its
    caller, eval_frame's `_fn`: a restart is named as its final attempt's metrics name the code."""
    doc = report_json(corpus("tlparse-tests", "comp_metrics.log"))
    got = {
        c["key"]: (c["function"], c["file"].rsplit("/", 1)[-1], c["line"])
        for c in every_attempt(doc)
        if c["key"] != "-/-"
    }
    assert got["0/0"] == got["0/0_1"] == ("fn", "test_misc.py", 9549)
    resume = ("torch_dynamo_resume_in_fn_at_9551", "test_misc.py", 9551)
    assert got["1/0"] == got["1/0_1"] == resume


def test_a_compile_with_no_graph_is_empty() -> None:
    """DDP's resume function 3/0 finished with no graph logged and no ops counted (null):
    empty, as tlparse says, not ok."""
    doc = report_json(gloo_rank0())
    by = {c["key"]: c for c in every_attempt(doc)}
    assert by["3/0"]["status"] == "empty" and by["3/0"]["graph_ops"] is None
    assert by["3/0"]["graphs"] == [] and by["4/0"]["status"] == "ok"


def test_non_compliant_custom_ops_are_said() -> None:
    """tlparse's simple.log: the graph calls test::baz, which lacks pt2_compliant_tag."""
    log = corpus("tlparse-tests", "simple.log")
    assert "  custom ops not tagged pt2_compliant_tag: test::baz" in run_cli("report", log).stdout
    page = run_cli("report", log, "--format", "html").stdout
    assert "not tagged <code>pt2_compliant_tag</code>:</strong> <code>test::baz</code>" in page


def _issues(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (x["kind"], x["log_line"], x["subject"], x["detail"], (x["where"] or {}).get("line"))
        for c in every_attempt(doc)
        for x in c["export_issues"]
    ]


def test_export_issues_as_draft_export_reports_them() -> None:
    """Draft export's issues: a data-dependent expression decided from real values (tlparse's
    export.log), a guard evaluated on an input's dynamic dim (export_guard_added.log), custom
    ops without a fake kernel and with a wrong one (draft_export.log, written by torch here)."""
    doc = report_json(corpus("tlparse-tests", "export.log"))
    assert doc["stats"]["export_issues"] == 1
    assert _issues(doc) == [
        (
            "data-dependent",
            48,
            "Eq((((-u0)//3)) + 5, 0)",
            "could not be decided from the symbols: the real tensors gave False, asserts were added",
            279,
        )
    ]
    doc = report_json(corpus("tlparse-tests", "export_guard_added.log"))
    assert _issues(doc) == [
        (
            "guard on an input",
            27,
            "Eq(s0, 3)",
            "a guard on the input dims s0 = L['args'][0][0].size()[0]: "
            "the exported program only takes those",
            297,
        )
    ]
    log = FIXTURES / "draft_export.log"
    got = [(k, s, d) for k, _, s, d, _ in _issues(report_json(log))]
    assert got == [
        (
            "missing fake kernel",
            "tlv.nofake.default",
            "this custom op has no fake kernel (torch.library.register_fake)",
        ),
        (
            "mismatched fake kernel",
            "tlv.badfake.default",
            "mismatch between fake value 3 and real value 2",
        ),
    ]
    text = run_cli("report", log).stdout
    assert "| 2 export issues" in text and "Export issues" in text
    page = run_cli("report", log, "--format", "html").stdout
    assert '<h2 id="h-issues">Export issues <span class="count">2</span></h2>' in page
    assert "<code>tlv.badfake.default</code>" in page


def test_compiles_have_no_export_issues() -> None:
    """torch.compile evaluates guards on dynamic dims all the time: those are no export issues."""
    for name in ("dynamic_shapes", "mlp_aot_eager"):
        doc = report_json(corpus(name))
        assert doc["stats"]["export_issues"] == 0 and _issues(doc) == [], name
    # The corpus's exports: one raised while tracing (x.nonzero() then `if n > 3`); torch
    # logged the graph traced until then, not the error.
    doc = report_json(corpus("export"))
    assert [(k, line, s, w) for k, line, s, _, w in _issues(doc)] == [
        ("failed trace", 1234, "make_fx", 49)
    ]


def test_exports_sharing_a_source_are_told_apart() -> None:
    """Four exports outside any compile each named an input L['x']: the report names them as
    `tlview inputs` does, L['x'] then L['x'] [describer N], and the JSON gives each describer."""
    doc = report_json(corpus("export"))
    (out,) = [c for c in every_attempt(doc) if c["key"] == "-/-"]
    got = [(i["sources"], i["describer"], i["size"]) for i in out["inputs"]]
    assert [s for s, _, _ in got] == [["L['x']"], ["L['y']"], ["L['x']"], ["L['x']"], ["L['x']"]]
    assert len({d for _, d, _ in got}) == 4
    text = run_cli("report", corpus("export"), "-v").stdout
    later = [d for s, d, _ in got[2:]]
    for d in later:
        assert f"L['x'] [describer {d}]" in text
    page = run_cli("report", corpus("export"), "--format", "html").stdout
    assert all(f"<code>L['x'] [describer {d}]</code>" in page for d in later)


def _outside_metrics(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """compilation_metrics records outside any compile id, read apart from tlview."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("V") and '{"compilation_metrics"' in line:
            m = json.loads(line[line.index("] {") + 2 :])["compilation_metrics"]
            if m.get("compile_id") is None:
                out.append((n, m))
    return out


@pytest.mark.parametrize("log", [lambda: FIXTURES / "aoti.log", lambda: only_log("export")])
def test_compiles_outside_any_compile_id_are_reported_with_their_time(
    log: Callable[[], Path],
) -> None:
    """AOTInductor's compile and export's AOT step log metrics with no compile id: each is a
    compile outside dynamo, timed from its start to its end, and not a compile of a frame."""
    path = log()
    raw = _outside_metrics(path)
    assert len(raw) == 1
    line, m = raw[0]
    took = (m["end_time_us"] - m["start_time_us"]) / 1e6
    data = report_json(path)
    st = data["stats"]
    assert st["outside_compiles"] == 1
    assert st["outside_compile_time_s"] == pytest.approx(took, abs=1e-6)
    (outside,) = [c for c in every_attempt(data) if c["key"] == "-/-"]
    assert outside["outside_compiles"] == [
        {"log_line": line, "seconds": pytest.approx(took), "fail_type": None, "fail_reason": None}
    ]
    assert outside["compile_time_s"] == pytest.approx(took)
    # The compiles of frames, as torch counts them: not the records outside any compile, nor
    # a graph export traced (export's log has one).
    assert data["outside"] == [outside]
    assert st["compiles"] == sum(1 for c in data["compiles"] if c["status"] != "traced")
    text = run_cli("report", path).stdout
    assert f"1 compiled outside dynamo ({took:.2f} s)" in text
    assert f"compiled outside dynamo (log line {line}): {took:.2f} s" in text


def test_the_page_shows_compiles_outside_dynamo(tmp_path: Path) -> None:
    path = FIXTURES / "aoti.log"
    ((line, m),) = _outside_metrics(path)
    took = (m["end_time_us"] - m["start_time_us"]) / 1e6
    out = tmp_path / "aoti.html"
    assert run_cli("report", path, "--format", "html", "-o", out).exit_code == 0
    page = out.read_text()
    assert "compiled outside dynamo (1)" in page and f"{took:.2f} s" in page
    assert "Compiled outside dynamo</strong>" in page
    assert f"<div>log line {line}: {took:.2f} s</div>" in page


def _pid(path: Path) -> int:
    return int(path.read_text().split("\n", 1)[0].split()[2])


@pytest.mark.slow
def test_processes_of_one_file_name_their_compiles_apart(tmp_path: Path) -> None:
    """Both ranks of the corpus's DDP job in one file (as `cat rank*.log` makes it): each
    process numbers its compiles from 0/0, so in that file a compile is LOG:pidN:ID, which
    --compile-id takes; LOG:ID alone says which to use."""
    logs = sorted(corpus("multirank_gloo").glob("*.log"))
    both = tmp_path / "both.log"
    both.write_bytes(b"".join(p.read_bytes() for p in logs))
    p0, p1 = (_pid(p) for p in logs)
    text = run_cli("report", both).stdout
    assert f"both.log:pid{p0}:4/0" in text and f"both.log:pid{p1}:4/0" in text
    one = run_cli("report", both, "--compile-id", f"both.log:pid{p1}:4/0").stdout
    assert f"both.log:pid{p1}:4/0  allred  [ok]" in one and f"pid{p0}:4/0" not in one
    res = run_cli("inputs", both, "--compile-id", f"both.log:pid{p0}:4/0")
    assert res.exit_code == 0 and res.stdout.startswith(f"compile both.log:pid{p0}:4/0  ok")
    res = run_cli("inputs", both, "--compile-id", "both.log:4/0", "--emit", tmp_path / "x.pt")
    assert res.exit_code == 2
    assert f"use both.log:pid{p0}:4/0, both.log:pid{p1}:4/0" in res.stderr
    data = report_json(both)
    fours = [c for c in every_attempt(data) if c["key"] == "4/0"]
    assert [(c["log"], c["pid"]) for c in fours] == [("both.log", p0), ("both.log", p1)]


def test_compile_work_at_run_time_is_an_event_of_its_compile() -> None:
    """`compilation_metrics_runtime` (compile work a compiled function did when called, logged
    by torch 2.13 and 2.14): a known record, shown as an event with its times, in no total."""
    path = FIXTURES / "aoti.log"
    raw = [
        (n, json.loads(line[line.index("] {") + 2 :]))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.startswith("V") and '{"compilation_metrics_runtime"' in line
    ]
    ((line, rec),) = raw
    m = rec["compilation_metrics_runtime"]
    assert m["is_runtime"] is True and m["compile_id"] is None
    data = report_json(path)
    assert "compilation_metrics_runtime" not in data["stats"]["unknown_kinds"]
    assert data["stats"]["kinds"]["compilation_metrics_runtime"] == 1
    (ev,) = [e for c in every_attempt(data) for e in c["events"] if e["log_line"] == line]
    assert ev["kind"] == "compilation_metrics_runtime"
    assert ev["summary"] == (
        f"compile work at run time (forward), inductor {m['inductor_compile_time_s']:.3f} s"
    )
    assert ev["where"]["file"].endswith("aoti.py") and ev["where"]["name"] == "<lambda>"
    total = sum(c["compile_time_s"] or 0 for c in every_attempt(data) if c["key"] != "-/-")
    assert data["stats"]["compile_time_s"] == pytest.approx(total)


def _records(path: Path, kind: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, body) of each `kind` record of a log, read straight from its lines."""
    return [
        (n, json.loads(line[line.index("] {") + 2 :])[kind])
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.startswith("V") and f'{{"{kind}"' in line
    ]


def test_torch26_failures_written_as_backward_metrics_are_the_frames_own() -> None:
    """torch 2.6 writes the metrics of a compile that stopped before it said it was a forward
    one (the recompile limit, error_on_recompile) as `bwd_compilation_metrics` with
    is_forward null: they are that frame's failure, not a backward compile."""
    path = FIXTURES / "torch26.log"
    bwd = {b["compile_id"]: b for _, b in _records(path, "bwd_compilation_metrics")}
    assert set(bwd) == {"0/2", "8/1"}
    assert all(b["is_forward"] is None for b in bwd.values())
    data = report_json(path)
    by_id = {c["compile_id"]: c for c in every_attempt(data)}
    for cid, b in bwd.items():
        c = by_id[cid]
        assert (c["status"], c["fail_type"]) == ("failed", b["fail_type"])
        assert c["fail_reason"] == b["fail_reason"]
    assert by_id["0/2"]["fail_type"] == "RecompileLimitExceeded"
    assert by_id["0/2"]["recompile"]["limit_hit"] is True
    assert by_id["8/1"]["fail_type"] == "RecompileError"
    assert data["stats"]["failures"] == 2 and data["stats"]["incomplete"] == 0
    text = run_cli("report", path).stdout
    assert "2 failed" in text and "never finished" not in text
    assert "0/2: frame 0 (scale) hit cache_size_limit" in text


def test_torch26_graph_breaks_are_named_by_their_reason_line() -> None:
    """torch 2.6 words a graph break "Graph break in user code at F:L" then "Reason: ...":
    the reason line names it, so two breaks on one line stay two."""
    path = FIXTURES / "torch26.log"
    data = report_json(path)
    breaks = {b["title"]: b for b in data["graph_breaks"]}
    logger = [r for r in breaks if "ogger" in r]
    assert len(logger) == 2 and len(breaks) == 3
    assert any(r.startswith("Unsupported: 'skip function getLogger") for r in logger)
    assert any(r.startswith("Unsupported: Logger not supported") for r in logger)
    assert any(r.startswith("Unsupported: 'skip function graph_break") for r in breaks)
    for r in logger:
        ((where, n),) = breaks[r]["where"].items()
        assert where.endswith("torch26.py:18") and n == breaks[r]["count"] == 1
    # Each found by an attempt that restarted: named by the compile it restarted into.
    assert [b["compiles"] for b in data["graph_breaks"]] == [["1/0_1"], ["2/0_1"], ["3/0_1"]]
    text = run_cli("report", path).stdout
    assert "| Unsupported: Logger not supported" in text
    assert "| Graph break in user code" not in text


def test_torch24_fail_type_written_as_a_class_repr_is_its_name() -> None:
    """torch 2.4 logs fail_type as `<class 'torch._dynamo.exc.X'>`; later torch as `X`."""
    path = FIXTURES / "torch24.log"
    ((_, m),) = [(n, b) for n, b in _records(path, "compilation_metrics") if b["fail_type"]]
    assert m["fail_type"] == "<class 'torch._dynamo.exc.BackendCompilerFailed'>"
    data = report_json(path)
    (c,) = [c for c in every_attempt(data) if c["status"] == "failed"]
    assert c["compile_id"] == m["compile_id"] and c["fail_type"] == "BackendCompilerFailed"
    assert "my backend exploded" in c["fail_reason"]
    assert f"{m['compile_id']} | failed (BackendCompilerFailed)" in run_cli("report", path).stdout


def test_torch28_version_from_its_runnable_graph_and_limit_from_its_config() -> None:
    """torch 2.8 logs no torch_version record, and says "recompile_limit reached" with no value:
    its inductor graph's runnable code names the version, the compile's dynamo_config the limit."""
    path = FIXTURES / "torch28.log"
    text = path.read_text()
    assert '{"artifact": {"name": "torch_version"' not in text
    assert "\t# torch version: 2.8.0+cu128\n" in text
    data = report_json(path)
    assert data["torch_version"] == data["logs"][0]["torch_version"] == "2.8.0+cu128"
    by_id = {c["compile_id"]: c for c in every_attempt(data)}
    assert (by_id["2/2"]["fail_type"], by_id["2/2"]["fail_reason"]) == (
        "RecompileLimitExceeded",
        "recompile_limit reached",
    )
    out = run_cli("report", path).stdout
    assert out.splitlines()[1].startswith("torch 2.8.0+cu128 | 1 log")
    assert "2/2: frame 2 (<lambda>) hit recompile_limit (2): dynamo stopped compiling it" in out
    # The 2.6.0a0 log in tlparse's tests names its torch only there, too.
    assert report_json(corpus("tlparse-tests", "simple.log"))["torch_version"] == (
        "2.6.0a0+giteece9ec"
    )


def test_torch215_nonstrict_export_is_traced_not_unfinished() -> None:
    """torch 2.15 logs a non-strict export's inputs, symbols and guards under a compile id of its
    own, with no dynamo_start, graph or metrics: that id is `traced`, not a run that stopped."""
    path = FIXTURES / "torch215.log"
    metas = [
        json.loads(line[line.index("] {") + 2 :])
        for line in path.read_text().splitlines()
        if line.startswith("V")
    ]
    export_kinds = {next(iter(m)) for m in metas if m.get("frame_id") == 0}
    assert export_kinds == {
        "describe_storage",
        "describe_tensor",
        "describe_source",
        "create_symbol",
    }
    data = report_json(path)
    assert data["torch_version"].startswith("2.15.0")
    by_id = {c["compile_id"]: c for c in every_attempt(data)}
    c = by_id["0/0"]
    assert c["status"] == "traced"
    assert [(i["sources"], i["size"], i["stride"]) for i in c["inputs"]] == [
        (["L['x']"], [5, 4], [4, 1]),
        (["L['y']"], [9, 2], [2, 1]),
    ]
    assert by_id["1/0"]["status"] == "ok"
    assert data["stats"]["incomplete"] == 0 and data["stats"]["failures"] == 0
    assert data["stats"]["by_status"] == {"traced": 1, "ok": 1}
    out = run_cli("report", path).stdout
    assert "1 traced by export" in out and "never finished" not in out
    assert "0/0 | traced" in out
    gate = run_cli("report", path, "-q", "--fail-on", "failures:0")
    assert gate.exit_code == 0, gate.stderr


@pytest.mark.slow
def test_torch215_traced_export_on_the_page_and_its_inputs(tmp_path: Path) -> None:
    path = FIXTURES / "torch215.log"
    page = tmp_path / "r.html"
    assert run_cli("report", path, "--format", "html", "-o", page).exit_code == 0
    html = page.read_text()
    assert "<strong>Traced, not compiled by dynamo.</strong>" in html
    assert '<span class="v">1</span> <span class="l">traced by export</span>' in html
    assert '<span class="v">0</span> <span class="l">never finished</span>' in html
    listing = run_cli("inputs", path, "--compile-id", "0/0", "--check").stdout
    rows = listing_rows(listing)
    assert [r[:2] for r in rows] == [["L['x']", "[s77=5, 4]"], ["L['y']", "[9, 2]"]]  # Dim("batch")
    assert all(r[-2:] == ["ok", "ok"] for r in rows)


def test_terminal_says_what_a_break_was_about_and_keeps_the_program_in_sight() -> None:
    """A graph break's title is torch's category ("Failed to trace builtin operator"): the
    terminal adds its Explanation line (which call), keeps a recompile reason's later lines
    under the compile, and a deep call's outermost frame (the program) beside the innermost."""
    path = FIXTURES / "recomp.log"
    (reason,) = [g["reason"] for c in report_json(path)["compiles"] for g in c["graph_breaks"]]
    why = "Dynamo does not know how to trace builtin operator `print` with argument types ['str']"
    assert f"Explanation: {why}" in reason
    out = run_cli("report", path).stdout.splitlines()
    row = next(i for i, ln in enumerate(out) if "| Failed to trace builtin operator" in ln)
    assert why in out[row + 1] and out[row + 1].startswith("      | ")
    detail = run_cli("report", path, "--compile-id", "0/0").stdout.splitlines()
    at = next(i for i, ln in enumerate(detail) if ln.startswith("  graph break at "))
    assert detail[at + 1].startswith(f"    {why}")
    again = run_cli("report", path, "--compile-id", "1/1").stdout.splitlines()
    at = next(i for i, ln in enumerate(again) if ln.startswith("  recompiled because: 1/0: n == 2"))
    trace = again.index("    User stack trace:", at)
    assert again[trace + 1].startswith('      File "') and "recomp.py" in again[trace + 1]
    deep = run_cli("report", path).stdout.splitlines()
    at = next(i for i, ln in enumerate(deep) if ln.startswith("4/0  <lambda>  [ok]"))
    stack = [ln.strip() for ln in deep[at + 1 : at + 5]]
    assert stack[0].endswith("recomp.py:32 in <module>: main()")
    assert stack[1] == "... 1 more frame(s): --compile-id 4/0 shows them"
    assert stack[2].endswith("recomp.py:27 in train: return step(x)")
    assert stack[3].endswith("recomp.py:24 in <lambda>")


def test_page_says_an_input_that_went_away_with_a_dash(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    assert (
        run_cli("report", corpus("views_aliasing"), "--format", "html", "-o", page).exit_code == 0
    )
    html = page.read_text()
    assert "<code>None</code>" not in html and "→ None" not in html
    assert "<td><code>L[&#39;y&#39;]</code></td><td>disappeared</td><td><code>" in html
    row = html[html.index("<td><code>L[&#39;y&#39;]</code></td><td>disappeared</td>") :]
    assert row.split("</tr>")[0].endswith("<td>—</td>")
    assert "<code>L[&#39;y&#39;]</code> disappeared: " in html and " → —</div>" in html


def test_a_view_names_its_base_or_says_no_source_names_it(tmp_path: Path) -> None:
    """`v = w[:, 1:5]` of a Parameter w the graph does not take: the flag says no source names its
    base (it said "view of 2", the base's tensor id; "not an input" is not always true: torch
    logs no source for an input it described first as another input's base). A jagged tensor is
    a view of its own ._values."""
    path = FIXTURES / "torch26.log"
    row = next(ln for ln in run_cli("report", path, "-v").stdout.splitlines() if "L['v']" in ln)
    assert row.rstrip().endswith("| grad non-leaf view of tensor 2 (no source names it)")
    page = tmp_path / "r.html"
    assert run_cli("report", path, "--format", "html", "-o", page).exit_code == 0
    assert "non-leaf view of tensor 2 (no source names it)" in page.read_text()
    jagged = run_cli("report", corpus("subclasses"), "--compile-id", "1/0").stdout
    row = next(ln for ln in jagged.splitlines() if ln.startswith("L['n']"))
    assert "| view of its ._values NestedTensor jagged nested" in row


def test_inputs_a_broken_graph_lacks_are_not_why_it_recompiled() -> None:
    """0/1 recompiles on `step == 0` and breaks its graph before the second layer: its graph
    takes no `b` parameters, which says where it broke, not what changed."""
    path = FIXTURES / "break_params.log"
    data = report_json(path)
    by_key = {c["key"]: c for c in every_attempt(data)}
    first = {i["sources"][0] for i in by_key["0/0"]["inputs"]}
    broken = {i["sources"][0] for i in by_key["0/1_1"]["inputs"]}
    assert first - broken == {
        "L['self']._modules['b']._parameters['weight']",
        "L['self']._modules['b']._parameters['bias']",
    }
    rec = by_key["0/1_1"]["recompile"]
    assert rec["previous"] == "0/0" and rec["reasons"][0].startswith("0/0: step == 0")
    # The int `step` became a symbol (automatic dynamic): that changed; no parameter went away.
    assert rec["input_changes"] == [
        {"source": "L['step']", "field": "dynamic", "before": None, "after": "s51"}
    ]
    assert rec["inputs_compared"] is True
    out = run_cli("report", path).stdout
    assert "disappeared" not in out and "L['step'] (a number) became dynamic: s51" in out


@pytest.mark.slow
def test_inputs_say_which_dims_the_graph_took_as_symbols(tmp_path: Path) -> None:
    """tests/fixtures/dynamic.log: `hiddenStates` marked dynamic on dim 0 (4, then 6 rows),
    `attnMask` static at 2, then dynamic at 3 (automatic dynamic). Each table of inputs says which
    dims are symbols, with their values in that compile; FX snake-cases the camelCase names in
    the graph's sizes (`l_hidden_states_`), which the recompile explanation must follow too."""
    path = FIXTURES / "dynamic.log"
    by = compiles(report_json(path))
    got = {
        k: [(i["sources"], i["size"], i["size_symbols"]) for i in by[k]["inputs"]]
        for k in ("0/0", "0/1")
    }
    assert got == {
        "0/0": [(["L['hiddenStates']"], [4, 8], ["s5", None]), (["L['attnMask']"], [2], None)],
        "0/1": [(["L['hiddenStates']"], [6, 8], ["s5", None]), (["L['attnMask']"], [3], ["s27"])],
    }
    changes = [
        (x["source"], x["field"], x["before"], x["after"])
        for x in by["0/1"]["recompile"]["input_changes"]
    ]
    assert changes == [
        ("L['hiddenStates']", "hint[0]", 4, 6),  # dynamic in both: only its example changed
        ("L['attnMask']", "size[0]", 2, 3),
        ("L['attnMask']", "dynamic[0]", 2, "s27"),
    ]
    text = run_cli("report", path).stdout
    assert "L['hiddenStates'] dim 0 (dynamic in both) example: 4 -> 6" in text
    rows = [ln.split("|")[:3] for ln in text.splitlines() if ln.startswith("L['")][:4]
    assert [[c.strip() for c in r] for r in rows] == [
        ["L['hiddenStates']", "[s5=4, 8]", "[8, 1]"],
        ["L['attnMask']", "[2]", "[1]"],
        ["L['hiddenStates']", "[s5=6, 8]", "[8, 1]"],
        ["L['attnMask']", "[s27=3]", "[1]"],
    ]
    page = tmp_path / "r.html"
    assert run_cli("report", path, "-o", page).exit_code == 0
    html = page.read_text()
    assert html.count("[s5=4, 8]") == 1 and html.count("[s5=6, 8]") == 1
    assert html.count("[s27=3]") == 1
    # What changed, in the words the terminal uses (not the JSON's field names).
    assert (
        "<td><code>L[&#39;hiddenStates&#39;]</code></td><td>dim 0 (dynamic in both) example</td>"
        "<td><code>4</code></td><td><code>6</code></td>" in html
    )
    assert "<code>L[&#39;attnMask&#39;]</code> dim 0 became dynamic: 2 → s27</div>" in html
    listing = run_cli("inputs", path).stdout
    shapes = [r[1] for r in listing_rows(listing)]
    assert shapes[:4] == ["[s5=4, 8]", "[2]", "[s5=6, 8]", "[s27=3]"]


def test_a_dim_shows_the_graphs_symbol_beside_its_value() -> None:
    """A number or a nested int gets the graph's symbol for it; a dim the log wrote as an
    expression is already symbolic and stays as logged (no `s1=2*s0`)."""
    from tlview.units import dims

    assert dims([4, "j1", 8], {0: "s97", 1: "s20", 2: "s92"}) == "[s97=4, s20=j1, s92=8]"
    assert dims(["8*j1", 1], {0: "s20*s92"}) == "[s20*s92=8*j1, 1]"
    assert dims(["2*s0", 3], {0: "s1", 1: "s2"}) == "[2*s0, s2=3]"
    assert dims([8, 3], {0: "8"}) == "[8, 3]"


@pytest.mark.slow
def test_fakes_of_dynamic_dims_carry_the_symbols_the_tables_name() -> None:
    """The fakes rebuilt from dynamic.log have the symbols its tables show, on the dims they
    show, and the real run's sizes as their hints."""
    torch = pytest.importorskip("torch")
    from tlview import fake_inputs, read, real_inputs

    rep = read(FIXTURES / "dynamic.log")
    for cid, (n, m, mask_sym) in {"0/0": (4, 2, None), "0/1": (6, 3, "s27")}.items():
        fakes = fake_inputs(str(FIXTURES / "dynamic.log"), cid)
        h, a = fakes["L['hiddenStates']"], fakes["L['attnMask']"]
        assert str(h.shape[0]) == "s5" and h.shape[1] == 8
        assert str(a.shape[0]) == (mask_sym or str(m))
        real = real_inputs({c.key: c for c in rep.attempts}[cid]).tensors
        assert real["L['hiddenStates']"].shape == torch.Size([n, 8])
        assert real["L['attnMask']"].shape == torch.Size([m])


@pytest.mark.slow
def test_a_strict_export_is_traced_and_two_exports_keep_their_own_dims() -> None:
    """export_strict.log: torch 2.13 files a strict export's trace (its dynamo graph, inputs and
    guards; no dynamo_start, no metrics) under 0/0: `traced`, not `ok`. The export that failed
    after it left its input under the same id, from a fake mode of its own: x of M is dynamic
    (`Dim("batch")`: s6), Bad's x is not, though both are `L['flat_args'][0]`."""
    by = compiles(report_json(FIXTURES / "export_strict.log"))
    assert {k: c["status"] for k, c in by.items()} == {"-/-": "outside", "0/0": "traced"}
    got = [
        (i["sources"], i["describer"], i["size"], i["size_symbols"]) for i in by["0/0"]["inputs"]
    ]
    assert got[0] == (["L['flat_args'][0]"], 0, [5, 4], ["s6", None])
    assert got[-1] == (["L['flat_args'][0]"], 1, [3], None)
    assert [o["fail_type"] for o in by["-/-"]["outside_compiles"]] == [None, "Unsupported"]
    listing = run_cli("inputs", FIXTURES / "export_strict.log").stdout
    rows = [r[:2] for r in listing_rows(listing) if "flat_args" in r[0]]
    assert rows == [["L['flat_args'][0]", "[s6=5, 4]"], ["L['flat_args'][0] [describer 1]", "[3]"]]


def test_a_number_that_became_dynamic_is_what_changed() -> None:
    """dynamic.log 2/1: `h(x, k)` recompiled when `k == 3` failed, and automatic dynamic made
    `k` the symbol s16; no tensor changed. "What changed" said there was no input change."""
    by = compiles(report_json(FIXTURES / "dynamic.log"))
    rc = by["2/1"]["recompile"]
    assert rc["reasons"][0].startswith("2/0: k == 3")
    assert rc["input_changes"] == [
        {"source": "L['k']", "field": "dynamic", "before": None, "after": "s16"}
    ]
    text = run_cli("report", FIXTURES / "dynamic.log").stdout
    assert "| L['k'] (a number) became dynamic: s16" in text
    assert "changed since 2/0: L['k'] (a number) became dynamic: s16" in text
    # A recompile on a guard that is not on an input says only tensors were compared.
    other = run_cli("report", FIXTURES / "torch26.log").stdout  # 0/1: L['n'] == 0 failed
    assert "| no tensor input changed since 0/0" in other


def test_torch25_frame_past_its_recompile_limit_is_a_failure() -> None:
    """torch 2.5 logs a frame past cache_size_limit as its recompile reasons alone (no
    dynamo_start, graph or metrics). The report said the run stopped during that compile; it is
    the limit, as later torch says in its metrics."""
    data = report_json(FIXTURES / "torch25.log")
    by = compiles(data)
    assert {k: c["status"] for k, c in by.items()} == {"0/0": "ok", "0/1": "ok", "0/2": "failed"}
    assert by["0/2"]["fail_type"] == "recompile limit (inferred)"
    rc = by["0/2"]["recompile"]
    assert rc["limit_hit"] is True and rc["limit"] == "cache_size_limit"
    assert rc["reasons"][0].startswith("0/1: tensor 'L['x']' size mismatch at index 0")
    assert data["stats"]["failures"] == 1 and data["stats"]["incomplete"] == 0
    text = run_cli("report", FIXTURES / "torch25.log").stdout
    assert "0/2: frame 0 (f) hit cache_size_limit: dynamo stopped compiling it" in text
    assert "never finished" not in text


def test_kernels_from_inductor_provenance() -> None:
    """kernels.log (INDUCTOR_PROVENANCE=1): each kernel inductor wrote for the forward graph and,
    at the first backward, the backward graph, with the FX nodes it computes (forward: torch
    logs no nodes for the backward) and the line of the program behind it."""
    program = (FIXTURES / "make_fixtures.py").read_text()
    body = program[program.index('KERNELS = r"""') + len('KERNELS = r"""') :].splitlines()
    relu = next(i for i, ln in enumerate(body) if "h = torch.relu" in ln) + 1
    out = relu + 1  # `return self.l2(h).softmax(-1)`
    (c,) = [c for c in report_json(FIXTURES / "kernels.log")["compiles"] if c["key"] == "0/0"]
    got = [
        (k["graph"], k["order"], k["kernel"], k["nodes"], [f["line"] for f in k["code"]])
        for k in c["kernels"]
    ]
    assert got[:4] == [
        ("forward", 1, "extern_kernels.addmm", ["addmm"], [relu]),
        ("forward", 2, "cpp_fused_mul_relu_threshold_backward_0", ["mul", "relu", "le"], [relu]),
        ("forward", 3, "extern_kernels.addmm", ["addmm_1"], [out]),
        ("forward", 4, "cpp_fused__softmax_1", ["amax", "exp", "sub", "sum_1", "div"], [out]),
    ]
    backward = got[4:]
    assert [k[0] for k in backward] == ["backward"] * len(backward) and len(backward) == 7
    assert [k[1] for k in backward] == list(range(1, 8))
    assert backward[0][2] == "cpp_fused__softmax_backward_data_0" and backward[0][4] == [out]
    assert {line for k in backward for line in k[4]} == {relu, out}
    assert c["kernels"][0]["code"][0]["loc"] == "h = torch.relu(self.l1(x)) * 2"
    text = run_cli("report", FIXTURES / "kernels.log", "--compile-id", "0/0").stdout
    row = next(ln for ln in text.splitlines() if "cpp_fused__softmax_1" in ln)
    assert [x.strip() for x in row.split("|")[:4]] == [
        "forward",
        "4",
        "cpp_fused__softmax_1",
        "amax, exp, sub, sum_1, div",
    ]
    page = run_cli("report", FIXTURES / "kernels.log", "--format", "html").stdout
    assert '<h3>Kernels <span class="count">11</span></h3>' in page
    assert (
        "<td><code>cpp_fused__softmax_1</code></td><td><code>amax, exp, sub, sum_1, div</code>"
        in page
    )
    # Without provenance tracking, no kernels: the corpus's inductor log.
    plain = report_json(corpus("transformer_inductor"))
    assert all(c["kernels"] == [] for c in every_attempt(plain))


def test_a_disabled_cache_is_said() -> None:
    """recomp.log was written with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1: its inductor compile
    logs `fx_graph_cache_disabled` (an instant event, no cache artifact). The report showed no
    cache activity, as if the caches had not been asked."""
    data = report_json(FIXTURES / "recomp.log")
    assert data["stats"]["cache"] == {"disabled": 1}
    (c,) = [c for c in every_attempt(data) if c["cache"]]
    assert c["key"] == "3/0"
    assert c["cache"] == [{"cache": "fx_graph", "outcome": "disabled", "key": None, "reason": None}]
    text = run_cli("report", FIXTURES / "recomp.log").stdout
    assert "| cache 1 disabled |" in text
    assert "  cache: fx_graph disabled" in run_cli("report", FIXTURES / "recomp.log", "-v").stdout
    page = run_cli("report", FIXTURES / "recomp.log", "--format", "html").stdout
    assert '<span class="v">1</span> <span class="l">caches disabled</span>' in page


def test_a_dtensor_input_says_how_it_is_sharded() -> None:
    """dtensor/: tensor parallel on 2 gloo ranks (ColwiseParallel w1, RowwiseParallel w2). A
    DTensor parameter said only `DTensor`; its placements and mesh are in what torch logs."""
    text = run_cli("report", FIXTURES / "dtensor", "--compile-id", "rank0:0/0").stdout
    flags = {
        ln.split("|")[0].strip(): ln.split("|")[-1].strip()
        for ln in text.splitlines()
        if ln.startswith("L['self']")
    }
    params = "L['self']._modules['{}']._parameters['{}']"
    assert flags == {
        params.format("w1", "weight"): "param grad DTensor Shard(dim=0) on mesh (2,)",
        params.format("w1", "bias"): "param grad DTensor Shard(dim=0) on mesh (2,)",
        params.format("w2", "weight"): "param grad DTensor Shard(dim=1) on mesh (2,)",
        params.format("w2", "bias"): "param grad DTensor Replicate() on mesh (2,)",
    }
    assert "All 2 ranks agree" in run_cli("report", FIXTURES / "dtensor").stdout


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_an_unfinished_compile_says_where_it_stopped() -> None:
    """truncated_log: the process killed itself during inductor's code generation. The terminal
    said only that the run stopped during the compile; the phase begun and never ended says
    where (the page's timeline showed it, and its row now says it too)."""
    text = run_cli("report", corpus("truncated_log")).stdout
    start = text.index("Failures and unfinished compiles")
    row = next(ln for ln in text[start:].splitlines() if ln.startswith("0/1 | incomplete"))
    assert (
        "no compilation_metrics: the run stopped during this compile, in Scheduler.codegen" in row
    )
    page = run_cli("report", corpus("truncated_log"), "--format", "html").stdout
    assert "(the process stopped during this compile, in Scheduler.codegen)" in page


def test_verbose_skips_records_outside_compiles_that_show_nothing() -> None:
    """-v printed a `-/- [outside]` rule with nothing under it (demo.log's -/- holds only the
    torch_version record); aoti.log's -/- (a compile outside dynamo) is still shown."""
    assert "[outside]" not in run_cli("report", FIXTURES / "demo.log", "-v").stdout
    aoti = run_cli("report", FIXTURES / "aoti.log", "-v").stdout.splitlines()
    at = next(i for i, ln in enumerate(aoti) if ln.startswith("-/-") and "[outside]" in ln)
    assert aoti[at + 1].startswith("  compiled outside dynamo (log line ")


def test_the_attempt_after_a_restart_says_which_attempt_broke() -> None:
    """demo.log 0/0_1 (status graph_break) printed `restart: Call to torch._dynamo.graph_break()`,
    as if it restarted itself; the break and its place are on 0/0, the attempt that restarted."""
    out = run_cli("report", FIXTURES / "demo.log").stdout.splitlines()
    at = next(i for i, ln in enumerate(out) if ln.startswith("0/0_1  forward  [graph_break]"))
    assert out[at + 3] == (
        "  restarted before this attempt: Call to `torch._dynamo.graph_break()` "
        "(--compile-id 0/0 shows where)"
    )
    # Its break, found by the attempt that restarted, is the compile's.
    assert out[at + 4] == (
        "  graph break at /tmp/tmps3otvy77/demo.py:15: Call to `torch._dynamo.graph_break()`"
    )
    alone = run_cli("report", FIXTURES / "demo.log", "--compile-id", "0/0").stdout.splitlines()
    assert any(ln.startswith("0/0  forward  [restarted]") for ln in alone)
    assert "  restart: Call to `torch._dynamo.graph_break()`" in alone
    job = run_cli("report", FIXTURES / "ranks", "--compile-id", "rank1:0/0_1").stdout
    assert "(--compile-id rank1:0/0 shows where)" in job


def test_a_restart_to_make_a_float_a_tensor_is_no_graph_break() -> None:
    """tensorify_restart.log: an embedding under dynamic=True restarts once for its float
    norm_type (torch names only the exception's type); the frame then compiles whole, so the
    report has one restart, no graph break, and the final attempt is ok."""
    data = report_json(FIXTURES / "tensorify_restart.log")
    by = compiles(data)
    assert {k: c["status"] for k, c in by.items() if k != "-/-"} == {
        "0/0": "restarted",
        "0/0_1": "ok",
    }
    assert by["0/0_1"]["restart_reasons"] == [
        "<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>"
    ]
    assert by["0/0_1"]["graph_breaks"] == [] and data["graph_breaks"] == []
    assert (data["stats"]["restarts"], data["stats"]["graph_breaks"]) == (1, 0)
    text = run_cli("report", FIXTURES / "tensorify_restart.log").stdout
    assert "0 graph breaks | 0 recompiles | 0 failed | 1 restart" in text
    assert (
        "restarted before this attempt: TensorifyScalarRestartAnalysis: a Python float made a "
        "tensor input" in text
    )
