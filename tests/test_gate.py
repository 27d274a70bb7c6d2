"""The --fail-on gate: parsing, absolute limits for report, limits over BASE for diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FIXTURES, corpus, report_json, run_cli

from tlview.analyze.diff import compare
from tlview.analyze.gate import Check, check_diff, check_report, parse_checks
from tlview.analyze.summary import overview
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.load import read as load


def test_parse_items_and_limits() -> None:
    got = parse_checks(["graph-breaks,recompiles:+2", "compile-time:+20%", "failures:0"], True)
    assert got == [
        Check("graph-breaks", None, text="graph-breaks"),
        Check("recompiles", 2.0, True, False, "recompiles:+2"),
        Check("compile-time", 20.0, True, True, "compile-time:+20%"),
        Check("failures", 0.0, False, False, "failures:0"),
    ]
    assert parse_checks(["compile-time:90s"], False) == [
        Check("compile-time", 90.0, False, False, "compile-time:90s")
    ]


@pytest.mark.parametrize(
    ("spec", "against_base", "says"),
    [
        ("graph-brakes", True, "unknown measure 'graph-brakes'"),
        ("recompiles:lots", True, "the limit must be N, +N or +N%"),
        ("recompiles:3s", True, "only compile-time takes seconds"),
        ("recompiles:20%", True, "a percentage is over BASE"),
        ("graph-breaks:+1", False, "a +limit is relative to BASE"),
        ("compile-time", False, "give a limit in seconds"),
        ("input-changes", False, "input changes are between two runs"),
    ],
)
def test_bad_specs_are_usage_errors(spec: str, against_base: bool, says: str) -> None:
    with pytest.raises(TlviewError) as e:
        parse_checks([spec], against_base)
    assert e.value.exit_code == EXIT_USAGE
    assert says in e.value.message and spec in e.value.message


def test_report_absolute_limits_on_a_real_log() -> None:
    o = overview(load(corpus("mlp_aot_eager")))  # 2 graph breaks, 2 recompiles, 1.71 s
    assert check_report(o, parse_checks(["graph-breaks:2,recompiles:2,failures"], False)) == []
    assert check_report(
        o, parse_checks(["graph-breaks:0,recompiles:1,compile-time:1s"], False)
    ) == [
        "graph-breaks: 2 (limit 0)",
        "recompiles: 2 (limit 1)",
        "compile-time: 1.71 s (limit 1.00 s)",
    ]


def test_report_cli_exit_status() -> None:
    log = corpus("mlp_aot_eager")
    bad = run_cli("report", log, "-q", "--fail-on", "graph-breaks:0,recompiles:0")
    assert bad.exit_code == 3
    assert bad.stderr.splitlines() == [
        "tlview: fail-on graph-breaks: 2 (limit 0)",
        "tlview: fail-on recompiles: 2 (limit 0)",
    ]
    assert "Compiles" in bad.stdout  # the report is still written
    ok = run_cli("report", log, "-q", "--fail-on", "graph-breaks:2", "--fail-on", "failures")
    assert ok.exit_code == 0 and ok.stderr == ""
    failed = run_cli("report", corpus("dynamic_shapes"), "-q", "--fail-on", "failures")
    assert failed.exit_code == 3
    assert failed.stderr.splitlines() == ["tlview: fail-on failures: 1 (limit 0)"]
    usage = run_cli("report", log, "--fail-on", "graph-breaks:+1")
    assert usage.exit_code == 2 and len(usage.stderr.splitlines()) == 1


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_report_gate_uses_the_renderers_one_pass(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The figures the gate checks are the ones the report was written with: no second pass
    # over the compiles (each may have to be read back from disk).
    import tlview.analyze.summary

    def second_pass(report):  # type: ignore[no-untyped-def]
        raise AssertionError("overview() called again after the report was written")

    monkeypatch.setattr(tlview.analyze.summary, "overview", second_pass)
    out = tmp_path / f"r.{fmt}"
    bad = run_cli(
        "report", corpus("mlp_aot_eager"), "--format", fmt, "-o", out, "--fail-on", "recompiles:0"
    )
    assert bad.exit_code == 3, bad.output
    assert bad.stderr.splitlines()[-1] == "tlview: fail-on recompiles: 2 (limit 0)"
    assert out.stat().st_size > 0


def test_diff_relative_limits_and_time_noise() -> None:
    # dtypes_zoo: 28.91 s of compiling, 15 recompiles; dynamic_shapes: 32.50 s, 5, 1 failure.
    d = compare(load(corpus("dtypes_zoo")), load(corpus("dynamic_shapes")))
    assert check_diff(d, parse_checks(["compile-time:+20%,recompiles"], True)) == []
    assert check_diff(d, parse_checks(["compile-time:+10%,failures,compile-time:+3s"], True)) == [
        "compile-time: 28.91 s -> 32.50 s (allowed +10%)",
        "failures: 0 -> 1 (no more than BASE)",
        "compile-time: 28.91 s -> 32.50 s (allowed +3.00 s)",
    ]
    assert check_diff(d, parse_checks(["compile-time:30s,recompiles:4"], True)) == [
        "compile-time: 28.91 s -> 32.50 s (limit 30.00 s)",
        "recompiles: 15 -> 5 (limit 4)",
    ]
    # Under a second more is noise for a relative limit: mlp_aot_eager against itself plus 0.
    same = compare(load(corpus("mlp_aot_eager")), load(corpus("mlp_aot_eager")))
    assert (
        check_diff(same, parse_checks(["compile-time,compile-time:+0%,input-changes"], True)) == []
    )


def test_compiles_outside_dynamo_count_as_failures_and_compile_time() -> None:
    """export_strict.log: a strict export that fails (its failure is logged outside any compile
    id, `-/-`) fails `--fail-on failures`; aoti.log's AOTInductor compile counts in
    `compile-time`. Both passed the gate before, whatever they logged."""
    bad = run_cli("report", FIXTURES / "export_strict.log", "-q", "--fail-on", "failures")
    assert bad.exit_code == 3
    assert bad.stderr == "tlview: fail-on failures: 1 (limit 0)\n"
    stats = report_json(FIXTURES / "aoti.log")["stats"]
    total = stats["compile_time_s"] + stats["outside_compile_time_s"]
    assert stats["outside_compile_time_s"] > stats["compile_time_s"]
    limit = f"compile-time:{stats['compile_time_s'] + 0.01:.2f}s"
    slow = run_cli("report", FIXTURES / "aoti.log", "-q", "--fail-on", limit)
    assert slow.exit_code == 3
    assert slow.stderr == f"tlview: fail-on compile-time: {total:.2f} s (limit {limit[13:-1]} s)\n"
    ok = run_cli(
        "report", FIXTURES / "aoti.log", "-q", "--fail-on", f"compile-time:{total + 1:.0f}s"
    )
    assert ok.exit_code == 0
