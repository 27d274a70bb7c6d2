"""`tlview inputs` listing without --check: the report's table, no torch, columns that line up."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT, only_log, run_cli

NO_TORCH = r"""
import sys
from click.testing import CliRunner
from tlview.cli import main
r = CliRunner().invoke(main, ["inputs", sys.argv[1]])
assert r.exit_code == 0, r.output
print("torch" in sys.modules, "L['self']" in r.stdout)
"""


def test_the_listing_imports_no_torch() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(only_log("transformer_inductor"))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.stdout.split() == ["False", "True"], proc.stderr


def test_the_listing_has_the_reports_columns() -> None:
    r = run_cli("inputs", only_log("views_aliasing"), "--compile-id", "1/1")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["compile", "1/1", "ok", "1", "input(s)"]
    assert lines[1].strip() == "Inputs"
    head = [c.strip() for c in lines[2].split("|")]
    assert head == ["source", "size", "stride", "offset", "dtype", "device", "storage", "alias"]
    # The graph's symbol and this run's value, as the report writes a dynamic size.
    row = [c.strip() for c in lines[4].split("|")]
    assert row == ["L['x']", "[s77=10]", "[1]", "0", "float32", "cpu", "40 B", ""]
    report = run_cli("report", only_log("views_aliasing"), "--compile-id", "1/1").stdout
    assert "L['x'] | [s77=10] | [1]    | 0      | float32 | cpu    | 40 B " in report


@pytest.mark.parametrize("width", ["80", "200"])
def test_columns_line_up_when_a_source_name_is_long(
    width: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real model's parameters: sources of 90 characters, over a column's share of 80.
    monkeypatch.setenv("COLUMNS", width)
    r = run_cli("inputs", only_log("transformer_inductor"), "--compile-id", "0/0")
    assert r.exit_code == 0, r.output
    lines = r.stdout.split("\n\n")[0].splitlines()
    assert max(len(ln) for ln in lines[2:]) > 80 or width == "80"
    bars = [k for k, ch in enumerate(lines[2]) if ch == "|"]
    assert len(bars) == 7
    rows = [ln for ln in lines[4:] if "|" in ln]  # a name cut in the middle is whole below
    assert rows
    for ln in rows:
        assert [k for k, ch in enumerate(ln) if ch == "|"] == bars, ln
        assert len(ln) <= int(width), ln
