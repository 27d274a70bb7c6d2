"""tlview's outputs of a few real logs are the golden files in tests/gold/ (see tests/gold.py)."""

from __future__ import annotations

import json
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
    problem = gold.mismatch(out, gold.files(out), tmp_path)
    if problem:
        pytest.fail(problem, pytrace=False)


def test_json_goldens_are_whole() -> None:
    """Every JSON golden file parses and is all of its output: none is cut to a head and a
    digest; a large report's compiles are in files of their own, each named from the report."""
    found = sorted(gold.GOLD.rglob("*.json"))
    assert len(found) > 20
    for path in found:
        text = path.read_text(encoding="utf-8")
        assert "characters kept; sha256" not in text, path
        if path.name != "trace.json":  # the trace is an event a line: checked by its own test
            doc = json.loads(text)
            for ref in doc.get("compiles", []) if isinstance(doc, dict) else []:
                if isinstance(ref, str):  # "[gold: report.compiles/003_0_1.json]"
                    assert (path.parent / ref.removeprefix("[gold: ").rstrip("]")).is_file()
