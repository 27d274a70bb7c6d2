"""Divergence between the ranks of a job: real rank logs, and jobs built from them with known plants."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, corpus, gloo_rank0, report_json, run_cli

from tlview.analyze.names import rank_ranges
from tlview.index.digests import artifact_meta
from tlview.load import read as load

sys.path.insert(0, str(ROOT / "benchmarks"))
import make_job


def kinds(data: dict[str, Any]) -> dict[tuple[str, tuple[int, ...]], str]:
    return {(d["kind"], tuple(d["ranks"])): d["detail"] for d in data["divergence"]}


# -- real rank logs, as torch wrote them ---------------------------------------------------------
def test_gloo_job_ranks_differ_in_one_input_shape() -> None:
    # The DDP program fed rank 0 a batch of 8 and rank 1 a batch of 9.
    data = report_json(corpus("multirank_gloo"))
    assert data["ranks"] == [0, 1]
    assert data["divergence"] == [
        {
            "kind": "inputs",
            "ranks": [1],
            "processes": ["rank1"],
            "detail": "0/0_1 L['args'][0] size [9, 32] (rank 0: [8, 32])",
        }
    ]
    assert {c["rank"] for c in data["compiles"]} == {0, 1}


def test_tlparse_multi_rank_logs() -> None:
    # Ranks 0 and 2 ran one failing compile, ranks 1 and 3 a kernel recompiled 14 and 6 times.
    data = report_json(corpus("tlparse-tests", "multi_rank_logs"))
    assert data["ranks"] == [0, 1, 2, 3]
    got = kinds(data)
    assert got[("compile_ids", (1,))].startswith("extra 0/1, 0/2, 0/3")
    assert "and 2 more" in got[("compile_ids", (1,))]  # 0/1 .. 0/14
    assert got[("compile_ids", (3,))].startswith("extra 0/1, 0/2, 0/3, 0/4, 0/5, 0/6 ")
    # Two of four agree: no majority, so each is compared with rank 0 (and says so).
    assert got[("status", (1, 3))] == "0/0 ok (no majority; ranks 0, 2: failed)"
    assert got[("recompiles", (1,))] == "14 recompiles (no majority; ranks 0, 2: 0 recompiles)"
    assert got[("recompiles", (3,))] == "6 recompiles (no majority; ranks 0, 2: 0 recompiles)"
    assert "0/0 L['x'] size [2, 2] (no majority; ranks 0, 2: [4, 4])" in got[("inputs", (1, 3))]
    assert got[("cache", (1, 3))] == (
        "0/0 fx_graph hit, aotautograd hit (no majority; ranks 0, 2: no cache lookup)"
    )
    assert (
        "dynamo_output_graph content 95fa0bd4 (no majority; ranks 0, 2: 289c7de0)"
        in got[("graph", (1, 3))]
    )


def test_collective_schedule_kept_small_beside_its_md5() -> None:
    log = load(gloo_rank0()).logs[0]
    (c,) = [c for c in log.compiles if c.key == "4/0"]
    (p,) = [p for p in c.artifacts if p.kind == "inductor_collective_schedule"]
    assert p.meta == {"collectives": 2, "ops": ["all_reduce_", "wait_tensor"]}
    assert p.text is None  # the payload text itself is not kept


# -- jobs built from a real rank log, with divergences planted ------------------------------------
def test_identical_ranks_report_no_divergence(tmp_path: Path) -> None:
    make_job.make_job(tmp_path, 6, gloo_rank0())
    data = report_json(tmp_path)
    assert data["ranks"] == [0, 1, 2, 3, 4, 5]
    assert data["divergence"] == []
    assert sorted({c["rank"] for c in data["compiles"]}) == [0, 1, 2, 3, 4, 5]
    text = run_cli("report", tmp_path).stdout
    assert "All 6 ranks agree" in text
    assert "Compiles of ranks 0-5 (6 ranks, the same compiles)" in text
    assert text.count("Compiles of") == 1


def test_every_planted_divergence_found_with_its_ranks(tmp_path: Path) -> None:
    make_job.make_job(tmp_path, 8, gloo_rank0(), make_job.PLANTS)
    data = report_json(tmp_path)
    assert kinds(data) == {
        ("compile_ids", (2,)): "extra 4/1",
        ("compile_ids", (6,)): "missing 3/0",
        ("status", (1,)): "3/0 graph_break (majority: empty)",
        ("break", (1,)): (
            "3/0 Attempted to call function marked as skipped at contextlib.py:105 "
            "(majority: no graph break)"
        ),
        ("graph", (4,)): "4/0 dynamo_output_graph content c00de700 (majority: 4580318a)",
        ("inputs", (5,)): "4/0 L['t'] size [8] (majority: [4])",
        ("cache", (3,)): (
            "4/0 aotautograd miss, fx_graph hit (majority: aotautograd miss, fx_graph miss)"
        ),
        ("collective_schedule", (7,)): "4/0 collective 1 is wait_tensor (majority: all_reduce_)",
        # Its schedule was reversed, not its output code: the two no longer match.
        ("collective_parity", (7,)): (
            "4/0 collective 1 is wait_tensor in the schedule, all_reduce_ in the output code"
        ),
        ("recompiles", (2,)): "1 recompile (majority: 0 recompiles)",
        ("graph_breaks", (1,)): "4 graph breaks (majority: 3 graph breaks)",
    }
    # Rank 0 is like the majority: it appears in no divergence.
    assert all(0 not in d["ranks"] for d in data["divergence"])


def test_agreeing_ranks_are_one_line(tmp_path: Path) -> None:
    missing = [make_job.missing_compile(3, 0)]
    make_job.make_job(tmp_path, 12, gloo_rank0(), {3: missing, 9: missing, 10: missing})
    data = report_json(tmp_path)
    assert kinds(data) == {("compile_ids", (3, 9, 10)): "missing 3/0"}
    text = run_cli("report", tmp_path, "-q").stdout
    assert "Compiles of ranks 0-2, 4-8, 11 (9 ranks, the same compiles)" in text
    assert "Compiles of ranks 3, 9-10 (3 ranks, the same compiles)" in text
    lines = [ln for ln in text.splitlines() if "missing 3/0" in ln]
    assert len(lines) == 1 and "3, 9-10" in lines[0]


def test_tie_compares_with_the_lowest_rank(tmp_path: Path) -> None:
    make_job.make_job(tmp_path, 2, gloo_rank0(), {1: [make_job.input_size(4, 0, 16)]})
    assert kinds(report_json(tmp_path)) == {("inputs", (1,)): "4/0 L['t'] size [16] (rank 0: [4])"}


def test_each_rank_on_its_own_gpu_is_no_divergence(tmp_path: Path) -> None:
    # As on a GPU job: rank N's graphs and inputs name cuda:N. Rank 3 stayed on the CPU.
    def on_gpu(n: int) -> list[make_job.Edit]:
        return [
            make_job.edit_payload(b"dynamo_output_graph", b"cpu", b"cuda:%d" % n),
            make_job.edit_lines(
                b"describe_tensor", b"device(type='cpu')", b"device(type='cuda', index=%d)" % n
            ),
        ]

    make_job.make_job(tmp_path, 4, gloo_rank0(), {0: on_gpu(0), 1: on_gpu(1), 2: on_gpu(2)})
    got = kinds(report_json(tmp_path))
    assert set(got) == {("graph", (3,)), ("inputs", (3,))}
    assert got[("inputs", (3,))] == (
        "0/0_1 L['args'][0] device cpu (majority: cuda); 4/0 L['t'] device cpu (majority: cuda)"
    )
    # Masked hashes are made when ranks are compared: read as a job, not as one log.
    cuda0 = next(log for log in load(tmp_path).logs if log.rank == 0)
    (g,) = [
        p
        for c in cuda0.compiles
        if c.key == "4/0"
        for p in c.graphs
        if p.kind == "dynamo_output_graph"
    ]
    assert g.masked_md5 is not None and g.masked_md5 != g.md5  # the real md5 is left as logged


def test_divergence_in_terminal_report(tmp_path: Path) -> None:
    make_job.make_job(tmp_path, 8, gloo_rank0(), make_job.PLANTS)
    text = run_cli("report", tmp_path, "-q").stdout
    assert "Divergence between 8 ranks" in text
    for line in ("extra 4/1", "missing 3/0", "collective 1 is wait_tensor", "1 recompile"):
        assert line in text
    assert "Compiles of rank 6" in text and "Compiles of ranks 0, 3, 5, 7" not in text


def test_span() -> None:
    assert rank_ranges([0, 1, 2, 3, 5, 7, 8, 9]) == "0-3, 5, 7-9"
    assert rank_ranges(range(1000)) == "0-999"
    assert rank_ranges([4]) == "4"


# -- runtime estimates, kernel tensor metadata, graph execution order (torch run once) -----------
PROGRAM = r"""
import torch
import torch._inductor.config as config
from torch._inductor.debug import record_and_log_graph_execution_order

config.log_tlparse = True

@torch.compile
def f(x, w):
    return (x @ w).relu().sum(1)

with record_and_log_graph_execution_order():
    for n in (4, 4, 6):
        f(torch.randn(n, 8), torch.randn(8, 8))
"""


@pytest.fixture(scope="module")
def inductor_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("inductor")
    script = tmp / "prog.py"
    script.write_text(PROGRAM)
    # Caches off: a cache hit skips the compile that logs the runtime estimates.
    env = dict(
        os.environ,
        TORCH_TRACE=str(tmp / "trace"),
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        TORCHINDUCTOR_CACHE_DIR=str(tmp / "cache"),
    )
    subprocess.run([sys.executable, str(script)], env=env, cwd=tmp, check=True, timeout=300)
    (log,) = (tmp / "trace").glob("*.log")
    return log


@pytest.mark.slow
def test_runtime_tensor_meta_and_execution_order(inductor_log: Path, tmp_path: Path) -> None:
    plants = {
        1: [
            make_job.edit_payload(
                b"inductor_runtime_and_tensor_meta",
                b'"estimated_runtime_ns": 0',
                b'"estimated_runtime_ns": 1500000',
            )
        ],
        2: [make_job.edit_payload(b"inductor_runtime_and_tensor_meta", b"float32", b"bfloat16")],
        3: [
            make_job.edit_payload(
                b"graph_execution", b'"compile_id": "0/1"', b'"compile_id": "0/0"'
            )
        ],
    }
    make_job.make_job(tmp_path, 5, inductor_log, plants)
    got = kinds(report_json(tmp_path))

    # Every kernel of both compiles (0/0, then 0/1 for the new batch size) was edited: the
    # first kernel whose outputs differ is named; a runtime off the median names the slowest.
    def kernel(key: str, n: int) -> str:
        return (
            f"{key} kernel 1 (extern_kernels.mm) outputs [{n}, 8] [8, 1] bfloat16 "
            f"(majority: [{n}, 8] [8, 1] float32)"
        )

    assert got == {
        ("runtime_estimate", (1,)): (
            "0/0 estimated runtime 3 ms (median of 5: 0 ns; the slowest); "
            "0/1 estimated runtime 3 ms (median of 5: 0 ns; the slowest)"
        ),
        ("tensor_meta", (2,)): f"{kernel('0/0', 4)}; {kernel('0/1', 6)}",
        ("graph_execution", (3,)): ("3 graph calls: 0/0 x3 (majority: 3 graph calls: 0/0 x2, 0/1)"),
    }


@pytest.mark.slow
def test_job_artifact_meta_of_real_payloads(inductor_log: Path) -> None:
    log = load(inductor_log).logs[0]
    metas = {
        (c.key, p.kind): p.meta
        for c in log.compiles
        for p in c.artifacts
        if p.kind in ("inductor_runtime_and_tensor_meta", "graph_execution")
    }
    assert metas[("-/-", "graph_execution")] == {"calls": 3, "runs": [["0/0", 2], ["0/1", 1]]}
    rt = metas[("0/0", "inductor_runtime_and_tensor_meta")]
    assert rt is not None and rt["ops"] == 2 and rt["runtime_ns"] == 0
    assert artifact_meta("inductor_collective_schedule", b"not json") is None
    assert artifact_meta("other", b"[]") is None


def test_ranks_that_break_elsewhere_diverge_in_break_and_frame() -> None:
    """Two real ranks compile one function: rank 0 breaks its graph at line 12 (graph_break()),
    rank 1 at line 14 (print). The counts agree; where, why and the resume function do not."""
    data = report_json(FIXTURES / "ranks")
    assert data["ranks"] == [0, 1]
    assert data["stats"]["graph_breaks"] == 2
    got = kinds(data)
    assert got[("break", (1,))] == (
        "0/0_1 Failed to trace builtin operator at ranks.py:14 "
        "(rank 0: Call to `torch._dynamo.graph_break()` at ranks.py:12)"
    )
    assert got[("frame", (1,))] == (
        "1/0 compiles torch_dynamo_resume_in_f_at_14 (ranks.py:14) "
        "(rank 0: torch_dynamo_resume_in_f_at_12 (ranks.py:12))"
    )
    assert ("graph_breaks", (1,)) not in got and ("compile_ids", (1,)) not in got
    # Two ranks have no majority: the title says what rank 1 is compared with.
    assert (
        "Divergence between 2 ranks (compared with rank 0)"
        in run_cli("report", FIXTURES / "ranks").stdout
    )


def test_ranks_in_one_file_are_compared_but_for_their_graphs(tmp_path: Path) -> None:
    """`cat rank*.log > all.log`: the file's two ranks differ as the directory's do (it said they
    all agree), but for their graphs, which a single file does not hash; a note says so."""
    both = tmp_path / "all.log"
    both.write_bytes(b"".join(p.read_bytes() for p in sorted((FIXTURES / "ranks").glob("*.log"))))
    whole = kinds(report_json(FIXTURES / "ranks"))
    data = report_json(both)
    assert data["ranks"] == [0, 1]
    assert kinds(data) == {k: v for k, v in whole.items() if k[0] != "graph"}
    assert ("graph", (1,)) in whole and ("break", (1,)) in kinds(data)
    text = run_cli("report", both).stdout
    assert "Divergence between 2 ranks (compared with rank 0)" in text
    assert "ranks agree" not in text
    assert (
        "2 ranks in one file: their compiles, inputs, caches, recompiles and graph breaks are "
        "compared, not their graphs"
    ) in " ".join(text.split())


def test_a_restarted_compile_is_compared_by_what_it_ended_with() -> None:
    """ranks_restart/: rank 0 breaks its graph (0/0 restarts, 0/0_1 is its graph), rank 1
    compiles 0/0 whole. Rank 1 was compared with rank 0's given-up attempt: `status ... (rank 0:
    restarted)`, a graph against `none`, and its input called one rank 0 does not have."""
    got = kinds(report_json(FIXTURES / "ranks_restart"))
    assert got == {
        ("compile_ids", (1,)): "missing 0/0_1, 1/0 (no majority for some: compared with rank 0)",
        ("status", (1,)): "0/0 ok (rank 0: graph_break)",
        ("break", (1,)): (
            "0/0 no graph break (rank 0: Failed to trace builtin operator at ranks_restart.py:12)"
        ),
        ("graph", (1,)): got[("graph", (1,))],
        ("graph_breaks", (1,)): "0 graph breaks (rank 0: 1 graph break)",
    }
    assert "(rank 0: none)" not in got[("graph", (1,))]


@pytest.mark.slow
def test_a_rank_names_its_compiles() -> None:
    """--compile-id rankN:ID names a compile of a job's rank log; a wrong one says both forms."""
    job = FIXTURES / "ranks"
    out = run_cli("report", job, "--compile-id", "rank1:1/0").stdout
    assert "rank1:1/0  torch_dynamo_resume_in_f_at_14  [ok]" in out and "_at_12" not in out
    listed = run_cli("inputs", job, "--compile-id", "rank0:1/0").stdout.splitlines()
    assert listed[0] == "compile rank0:1/0  ok  1 input(s)"
    bad = run_cli("report", job, "--compile-id", "rank1:0/2")
    rank0 = sorted(job.glob("*rank_0_*.log"))[0].name
    assert bad.exit_code == 2
    assert bad.stderr == (
        f"tlview: {job}: no compile 'rank1:0/2'; its 2 logs have: -/-, 0/0, 0/0_1, 1/0; "
        f"name one as LOG:ID ({rank0}:0/0 or rank0:0/0)\n"
    )
