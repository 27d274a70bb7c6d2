"""Usage errors (unknown option, missing argument, bad value, unknown command) are one line on
stderr, `tlview: COMMAND: ...`, exit 2, for every command: never click's usage block."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT, run_cli

COMMANDS = ("report", "inputs", "repro", "diff", "show")


def _one_line(args: list[str], start: str) -> str:
    res = run_cli(*args)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), res.stderr
    return lines[0]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_unknown_option_is_one_line(cmd: str) -> None:
    line = _one_line([cmd, "x.log", "y.log", "--bogus"], f"tlview: {cmd}: ")
    assert "No such option" in line and "--bogus" in line
    assert line.endswith(f"(see 'tlview {cmd} --help')")


@pytest.mark.parametrize("cmd", COMMANDS)
def test_missing_argument_is_one_line(cmd: str) -> None:
    line = _one_line([cmd], f"tlview: {cmd}: Missing argument ")
    assert "'PATH'" in line or "'BASE'" in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["report", "x.log", "--format", "nope"], "'--format'"),
        (["report", "x.log", "-j", "0"], "'-j' / '--jobs'"),
        (["inputs", "x.log", "--mode", "q"], "'--mode'"),
        (["inputs", "x.log", "--seed", "abc"], "'--seed'"),
        (["repro", "x.log", "--backend", "jit"], "'--backend'"),
        (["repro", "x.log", "--world", "mpi"], "'--world'"),
        (["diff", "a.log", "b.log", "--format", "perfetto"], "'--format'"),
        (["show", "x.log"], "'--compile-id'"),
    ],
)
def test_bad_value_is_one_line(args: list[str], named: str) -> None:
    assert named in _one_line(args, f"tlview: {args[0]}: ")


def test_unknown_command_and_group_option_are_one_line() -> None:
    assert _one_line(["bogus"], "tlview: No such command 'bogus'")
    assert _one_line(["--bogus"], "tlview: No such option")


def test_usage_error_is_one_line_from_the_process() -> None:
    """The installed command's path (funnel.run, not the test runner) says the same line."""
    got = subprocess.run(
        [sys.executable, "-m", "tlview", "report", "--bogus", "x.log"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.splitlines() == [
        "tlview: report: No such option '--bogus'. (Did you mean one of: '--jobs', '--verbose'?) "
        "(see 'tlview report --help')"
    ]
