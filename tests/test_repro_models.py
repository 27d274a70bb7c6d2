"""Real models in the suite: logs of tiny transformers models built from configs (no weights;
tests/fixtures/make_fixtures.py hf_bert, with `pip install -e '.[models]'`), whose graphs
must reproduce with default options. The logs are committed, so these need torch only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

pytestmark = pytest.mark.slow  # repros are written and run with torch
torch = pytest.importorskip("torch")


def test_a_tiny_bert_reproduces_with_its_labels_and_token_types_in_range(tmp_path: Path) -> None:
    """hf_bert.log: BertForSequenceClassification (3 labels, 2 token types, 16 positions) with
    labels: every graph runs, each output is the log's, and eager agrees with aot_eager."""
    out = tmp_path / "r"
    res = run_cli(
        "repro", FIXTURES / "hf_bert.log", "--all", "-o", out, "--run", "--check-accuracy"
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    graph = json.loads((out / "summary.json").read_text())["graphs"][0]
    assert graph["status"] == "ran"
    assert graph["verdicts"] == [
        {"output": "loss", "verdict": "reproduced"},
        {"output": "logits", "verdict": "reproduced"},
    ]
    assert [a["verdict"] for a in graph["accuracy"]] == ["agrees", "agrees"]
    code = (out / "0-0" / "repro.py").read_text()
    assert (
        "#   \"L['labels']\": 'values 0 to 2: it indexes cross_entropy targets of 3 classes" in code
    )
    assert (
        "._buffers['token_type_ids']\": 'values 0 to 1: it indexes an embedding of 2 rows "
        "(l_self_modules_bert_modules_embeddings_modules_token_type_embeddings_parameters_weight_)"
    ) in code
