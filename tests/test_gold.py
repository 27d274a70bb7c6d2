"""tlview's outputs of a few real logs are the golden files in tests/gold/ (see tests/gold.py)."""

from __future__ import annotations

from pathlib import Path

import gold
import pytest


@pytest.mark.parametrize(
    "out",
    [
        pytest.param(o, id=f"{o.case}/{o.name}", marks=[pytest.mark.slow] if o.slow else [])
        for o in gold.outputs()
    ],
)
def test_output_is_golden(out: gold.Output, tmp_path: Path) -> None:
    problem = gold.mismatch(out, gold.run(out), tmp_path / out.name)
    if problem:
        pytest.fail(problem, pytrace=False)
