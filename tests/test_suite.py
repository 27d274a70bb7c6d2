"""The suite's own guards: a missing corpus stops the run in one line; a skip not on the
allow-list fails it; pytest's own failures still fail it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CORPUS, ROOT

# The cases that run pytest in a child process are slow; the others read the tests' source.
slow = pytest.mark.slow
RUNS = {"run", "check_output", "check_call", "call"}  # subprocess's functions that wait
WAITS = {"wait", "communicate", "get"}  # a Popen's waits, a queue's get: with no timeout


def _unbounded_waits(path: Path) -> list[str]:
    """The calls in PATH that could wait for ever: subprocess's without timeout=, and a
    process's wait() or a queue's get() with no argument."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f, named = node.func, {k.arg for k in node.keywords}
        if "timeout" in named:
            continue
        if f.attr in RUNS and isinstance(f.value, ast.Name) and f.value.id == "subprocess":
            found.append(f"{path}:{node.lineno}: subprocess.{f.attr}")
        elif f.attr in WAITS and not node.args and not named:
            found.append(f"{path}:{node.lineno}: .{f.attr}()")
    return found


def test_every_wait_in_the_tests_has_a_timeout() -> None:
    """No test can hang on a child, a server or a browser (pytest-timeout is the last resort)."""
    found = [w for p in sorted((ROOT / "tests").rglob("*.py")) for w in _unbounded_waits(p)]
    assert found == []


def test_the_wait_check_sees_what_it_looks_for(tmp_path: Path) -> None:
    src = tmp_path / "waits.py"
    src.write_text(
        "import subprocess\n"
        "subprocess.run(['x'])\nsubprocess.run(['x'], timeout=5)\n"
        "p = subprocess.Popen(['x'])\np.wait()\np.wait(5)\nq.get()\nq.get(timeout=1)\n",
        encoding="utf-8",
    )
    got = [w.split(": ", 1)[1] for w in _unbounded_waits(src)]
    assert got == ["subprocess.run", ".wait()", ".get()"]


def _pytest(tmp_path: Path, body: str, corpus: Path = CORPUS) -> subprocess.CompletedProcess[str]:
    """pytest in a child, on one test file beside a copy of tests/conftest.py (and the helpers
    it imports)."""
    (tmp_path / "tests").mkdir(parents=True)
    for name in ("conftest.py", "helpers.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_one.py").write_text(body, encoding="utf-8")
    env = dict(os.environ, TLVIEW_CORPUS=str(corpus))
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests"]
    return subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@slow
def test_missing_corpus_stops_the_run_in_one_line(tmp_path: Path) -> None:
    got = _pytest(tmp_path, "def test_x() -> None:\n    pass\n", corpus=tmp_path / "nowhere")
    assert got.returncode == 4, got.stdout + got.stderr
    lines = got.stderr.strip().splitlines()
    assert lines == [
        f"ERROR: tlview's tests need the shared corpus of real logs at {tmp_path / 'nowhere'} "
        "(a copy beside the checkout as ../shared/corpus, or TLVIEW_CORPUS=DIR)"
    ]


@slow
def test_a_skip_off_the_list_fails_the_run(tmp_path: Path) -> None:
    body = (
        "import pytest\n"
        "def test_off() -> None:\n    pytest.skip('no GPU here')\n"
        "@pytest.mark.skipif(True, reason='needs /dev/full')\n"
        "def test_listed() -> None:\n    pass\n"
        "def test_ok() -> None:\n    pass\n"
    )
    got = _pytest(tmp_path, body)
    assert got.returncode == 1, got.stdout
    assert "tests/test_one.py::test_off: no GPU here" in got.stdout
    assert "tests/test_one.py::test_listed" not in got.stdout
    assert "1 passed, 2 skipped" in got.stdout


@slow
def test_a_module_skipped_at_import_fails_the_run(tmp_path: Path) -> None:
    got = _pytest(tmp_path, "import pytest\npytest.importorskip('no_such_module_here')\n")
    assert got.returncode == 1, got.stdout
    assert "tests/test_one.py: could not import 'no_such_module_here'" in got.stdout


@slow
def test_only_listed_skips_pass(tmp_path: Path) -> None:
    body = (
        "import pytest\n"
        "@pytest.mark.skipif(True, reason='needs /dev/full')\n"
        "def test_listed() -> None:\n    pass\n"
    )
    assert _pytest(tmp_path, body).returncode == 0


@slow
def test_a_failure_keeps_its_status(tmp_path: Path) -> None:
    """A failed test (1) and a module that does not even import (2) keep pytest's status."""
    failed = "import pytest\ndef test_bad() -> None:\n    assert False\n"
    assert _pytest(tmp_path / "a", failed).returncode == 1
    assert _pytest(tmp_path / "b", "def test_x(:\n").returncode == 2


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    """The README's first block: one command sets up and reports on a log shipped here, one sets
    up and runs the tests; `.ci/run` runs that test command as it is. The README stays under 200
    lines."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    first = readme[readme.index("```sh\n") + 6 :]
    commands = [ln for ln in first[: first.index("```")].splitlines() if ln and ln[0] != "#"]
    assert len(commands) == 2, commands
    report, tests = commands
    assert "tlview report tests/fixtures/" in report and (root / report.split()[-1]).is_file()
    assert tests.endswith(".venv/bin/python -m pytest")
    assert tests in (root / ".ci" / "run").read_text().splitlines()
    assert len(readme.splitlines()) < 200


def test_no_test_imports_from_conftest() -> None:
    """Helpers live in modules (tests/helpers.py, ...): conftest.py holds pytest's hooks only."""
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if line.strip().startswith(("from conftest import", "import conftest"))
    ]
    assert found == []
