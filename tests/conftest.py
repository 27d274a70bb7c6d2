"""pytest's hooks for the suite: skips allowed and reported, columns, the corpus checked.

The paths and helpers tests import live in tests/helpers.py.

`python -m pytest -m "not slow"` runs the fast subset: no torch, browser or server, each test < 1 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Dask and S3 tests run last: a Dask client leaves threads in the process for good, and
    tlview forks a second renderer only from a process of one thread (runtime/halves.py)."""
    items.sort(key=lambda item: item.path.name in ("test_dask.py", "test_s3.py"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under -m "not slow", a module marked slow as a whole is not even imported: importing
    torch, Dask or moto for tests that will not run took seconds of the fast run."""
    if config.getoption("markexpr", "").strip() != "not slow" or collection_path.suffix != ".py":
        return None
    text = collection_path.read_text(encoding="utf-8")
    return True if "\npytestmark = pytest.mark.slow" in text else None


TEST_COLUMNS = "160"


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees text 160 columns wide (its own COLUMNS aside), whatever the terminal
    pytest runs in: tlview fits text to an attached terminal even when it is piped. Tests of
    the width itself unset it (tests/test_screen.py)."""
    monkeypatch.setenv("COLUMNS", TEST_COLUMNS)


def pytest_configure(config: pytest.Config) -> None:
    """The corpus is required: a run without it stops at once, in one line, rather than skip
    half the suite and pass."""
    if not CORPUS.is_dir():
        raise pytest.UsageError(
            f"tlview's tests need the shared corpus of real logs at {CORPUS} "
            "(a copy beside the checkout as ../shared/corpus, or TLVIEW_CORPUS=DIR)"
        )


def pytest_report_header() -> str:
    return f"tlview corpus: {CORPUS}"


# Skips allowed, by the start of their reason; any other skip fails the run (docs/testing.md).
ALLOWED_SKIPS: tuple[str, ...] = (
    "needs /dev/full",  # a machine without /dev/full (macOS): test_report's full-disk tests
)
_SKIPPED: list[str] = []


def _note_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Note a skip (of a test, or of a whole module at import) not on ALLOWED_SKIPS."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")
        if not reason.startswith(ALLOWED_SKIPS):
            _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_skip(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that skipped what it must test fails (exit 1), unless it failed already."""
    if _SKIPPED and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SKIPPED:
        terminalreporter.section("skips not allowed (tests/conftest.py ALLOWED_SKIPS)", red=True)
        for line in _SKIPPED:
            terminalreporter.line(line)
