"""Collective graphs re-run on a world of the size their calls name: N gloo processes, each on
its own rank's inputs, or one process on torch's fake process group (tests/fixtures/collectives:
all_gather_into_tensor(y, 2, '0'), reduce_scatter_tensor, all_reduce, traced on 2 gloo ranks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli

import tlview

pytestmark = pytest.mark.slow

JOB = FIXTURES / "collectives"


def test_a_collective_graph_runs_on_two_gloo_processes(tmp_path: Path) -> None:
    out = tmp_path / "r"
    o = tlview.repro(JOB, "rank1:0/0", out, run=True)
    assert o.status == "ran", o.reason
    assert o.outputs == ["Tensor float32[4, 6]"]
    assert any("a world of 2 gloo processes" in n and "its own log" in n for n in o.notes)
    text = (out / "repro.py").read_text()
    assert "WORLD = 'gloo'" in text and "WORLD_SIZE = 2" in text
    assert "0: 'rank0:0/0'" in text and "1: 'rank1:0/0'" in text
    inputs = tlview.load_inputs(out / "inputs.pt")["compiles"]
    assert set(inputs) == {"0/0", "rank0:0/0", "rank1:0/0"}


def test_each_rank_computes_what_the_job_did(tmp_path: Path) -> None:
    """The two ranks run this script as rank 0 and 1 on one store: their collectives really
    communicate, so both outputs are 4 * (relu(x0 @ w0) + relu(x1 @ w1)) + 1."""
    import torch

    out = tmp_path / "r"
    assert tlview.repro(JOB, "rank0:0/0", out).status == "written"
    store, results = tmp_path / "store", [tmp_path / f"{r}.json" for r in (0, 1)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(out / "repro.py"), "--rank", str(r), "--store", str(store)]
            + ["--result", str(results[r])]
        )
        for r in (0, 1)
    ]
    assert [p.wait(240) for p in procs] == [0, 0]
    inputs = tlview.load_inputs(out / "inputs.pt")["compiles"]
    x = [inputs[f"rank{r}:0/0"]["L['x']"] for r in (0, 1)]
    w = [inputs[f"rank{r}:0/0"]["L['w']"] for r in (0, 1)]
    assert not torch.equal(x[0], x[1])  # each rank's own inputs
    want = 4 * ((x[0] @ w[0]).relu() + (x[1] @ w[1]).relu()) + 1
    for r in (0, 1):
        got = json.loads(results[r].read_text())
        assert got["problems"] == [] and got["outputs"] == ["Tensor float32[4, 6]"]
        assert got["sums"][0] == pytest.approx(float(want.double().sum()), rel=1e-5)


def test_fake_world_runs_in_one_process(tmp_path: Path) -> None:
    result = run_cli(
        "repro", JOB, "--compile-id", "rank0:0/0", "-o", tmp_path / "f", "--run", "--world", "fake"
    )
    assert result.exit_code == 0, result.output
    assert "outputs match the shapes and dtypes in the log" in result.stdout
    # The note is said once: by the repro as it runs (issue 29), not again by tlview.
    assert result.stdout.count("fake process group of 2 rank(s)") == 1
    assert "fake process group" not in result.stderr
    assert "WORLD = 'fake'" in (tmp_path / "f" / "repro.py").read_text()


def test_every_graph_of_the_job_reruns(tmp_path: Path) -> None:
    outcomes = tlview.repro_all(JOB, tmp_path / "all", run=True, backend="inductor")
    assert [(o.ref, o.status) for o in outcomes] == [("rank0:0/0", "ran"), ("rank1:0/0", "ran")]


def test_max_bytes_counts_every_ranks_inputs(tmp_path: Path) -> None:
    """Each rank's inputs are 320 B (x float32[4, 8], w float32[8, 6]): 500 B holds
    the graph's own rank, not the other's, so the repro is skipped naming rank 1 and both figures,
    and nothing is written; 640 B holds both."""
    out = tmp_path / "r"
    o = tlview.repro(JOB, "rank0:0/0", out, max_bytes=500)
    assert o.status == "skipped"
    assert o.reason == (
        "inputs of rank 1 not rebuilt: they need 320 B of memory and as much on disk, over "
        "--max-bytes 500 B, 320 B by the other ranks' inputs of this graph"
    )
    assert not (out / "inputs.pt").exists()
    assert tlview.repro(JOB, "rank0:0/0", tmp_path / "ok", max_bytes=640).status == "written"
