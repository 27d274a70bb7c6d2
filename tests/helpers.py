"""Paths and helpers the tests import: real logs only (the shared corpus and tests/fixtures)."""

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
