"""Shared paths and helpers for the tests: real logs only (the shared corpus and tests/fixtures).

`python -m pytest -m "not slow"` runs the fast subset: no torch, browser or server, each test < 1 s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def _find_corpus() -> Path:
    """The shared corpus of real TORCH_TRACE logs: TLVIEW_CORPUS, else beside the checkout.

    A clone elsewhere (CI's clean checkout in a temp dir) still finds the workplace's corpus.
    """
    env = os.environ.get("TLVIEW_CORPUS")
    if env:
        return Path(env).resolve()
    for candidate in (ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if candidate.is_dir():
            return candidate.resolve()
    return (ROOT.parent / "shared" / "corpus").resolve()


CORPUS = _find_corpus()


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


def corpus(*parts: str) -> Path:
    """A path in the shared corpus, which must hold it."""
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.fail(f"{p}: not in the shared corpus at {CORPUS}")
    return p


def only_log(folder: str) -> Path:
    """The single log of a corpus folder."""
    logs = sorted(corpus(folder).glob("*.log"))
    assert len(logs) == 1, logs
    return logs[0]


def every_launch(path: Path, **kw: Any) -> Any:
    """A folder's launches as one Report, as tlview read folders before it told launches apart
    (tests of every log of the corpus; tlview itself reads one launch at a time)."""
    import tlview
    from tlview.errors import TlviewError
    from tlview.model import Report

    try:
        return tlview.read(path, **kw)
    except TlviewError as e:
        if " launches in one folder" not in e.message:
            raise
    logs = []
    n = 1
    while True:
        try:
            logs += tlview.read(path, launch=n, **kw).logs
        except TlviewError as e:
            if f"no launch {n}" not in e.message:
                raise
            return Report(path=str(path), logs=logs)
        n += 1


def run_cli(*args: object) -> Result:
    from tlview.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def report_json(path: Path | str, *extra: str) -> dict[str, Any]:
    """`tlview report PATH --format json`, run in-process, parsed; it must succeed."""
    result = run_cli("report", path, "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def without_paths(data: dict[str, Any]) -> dict[str, Any]:
    """A JSON report with where the logs were read from left out (a pool, a cluster, S3)."""
    return dict(data, path=None, logs=[dict(lg, path=None) for lg in data["logs"]])


def gloo_rank0() -> Path:
    """Rank 0 of the corpus's real 2-rank DDP job."""
    return corpus("multirank_gloo", "dedicated_log_torch_trace_rank_0_f534302x.log")


def fake_dim(d: Any) -> Any:
    """A rebuilt tensor's dim as an int (a symbol's hint for fakes), or `j` for a nested int."""
    if isinstance(d, int):
        return d
    node = d.node
    if node.is_nested_int():
        return "j"
    if node.maybe_as_int() is not None:
        return node.maybe_as_int()
    return node.hint if isinstance(node.hint, int) else "j"
