"""Shared paths and helpers for the tests: real logs only (the shared corpus and tests/fixtures)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# The shared corpus of real TORCH_TRACE logs; TLVIEW_CORPUS overrides where it lives.
CORPUS = Path(os.environ.get("TLVIEW_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()


def corpus(*parts: str) -> Path:
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return p


def only_log(folder: str) -> Path:
    """The single log of a corpus folder."""
    logs = sorted(corpus(folder).glob("*.log"))
    assert len(logs) == 1, logs
    return logs[0]


def run_cli(*args: str) -> Result:
    from tlview.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
