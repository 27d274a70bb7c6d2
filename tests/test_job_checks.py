"""A job's checks: each log a process, collectives parity, kernels' outputs, runtime estimates,
no majority, grouped ranks. Real rank logs (tests/fixtures/collectives, the corpus's gloo job),
copied and edited by benchmarks/make_job.py (every edited payload's md5 recomputed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, gloo_rank0, report_json, run_cli

sys.path.insert(0, str(ROOT / "benchmarks"))
import make_job

COLLECTIVES = FIXTURES / "collectives"


def rank0_log() -> Path:
    return sorted(COLLECTIVES.glob("*rank_0_*.log"))[0]


def by(data: dict[str, Any]) -> dict[tuple[str, tuple[str, ...]], str]:
    """Divergence by kind and the processes named."""
    return {(d["kind"], tuple(d["processes"])): d["detail"] for d in data["divergence"]}


def write(path: Path, base: Path, rank: int, *edits: make_job.Edit) -> None:
    units = make_job.set_rank(make_job.read_units(base), rank)
    for edit in edits:
        units = edit(units)
    make_job.write_units(path, units)


def test_a_real_collectives_job_is_healthy() -> None:
    """Two gloo ranks, three collectives each: nothing differs, every schedule matched."""
    data = report_json(COLLECTIVES)
    assert data["ranks"] == [0, 1] and data["divergence"] == []
    assert [lg["process"] for lg in data["logs"]] == ["rank0", "rank1"]
    assert [lg["rank_from"] for lg in data["logs"]] == ["records", "records"]
    got = [(c["rank"], c["key"], c["collectives"]) for c in data["compiles"] if c["collectives"]]
    ops = ["all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce_"]
    waited = [x for op in ops for x in (op, "wait_tensor")]
    assert got == [
        (r, "0/0", {"schedule": waited, "code": waited, "matched": True, "problems": []})
        for r in (0, 1)
    ]
    text = run_cli("report", COLLECTIVES, "--compile-id", "rank1:0/0").stdout
    assert (
        "collectives: 3 collectives (all_gather_into_tensor, reduce_scatter_tensor, "
        "all_reduce_), each waited on: the output code calls what the schedule says"
    ) in text


def test_two_logs_of_one_rank_are_two_processes(tmp_path: Path) -> None:
    """A job of 4 ranks, and two more logs that claim rank 1 (a job run twice into one folder):
    one recompiled, one missed a compile. Each is its own process; nothing is added up."""
    job = tmp_path / "job"
    make_job.make_job(job, 4, gloo_rank0())
    write(
        job / "rerun_a.log", gloo_rank0(), 1, make_job.set_pid(4001), make_job.extra_recompile(4, 0)
    )
    write(
        job / "rerun_b.log", gloo_rank0(), 1, make_job.set_pid(4002), make_job.missing_compile(3, 0)
    )
    data = report_json(job)
    assert data["ranks"] == [0, 1, 2, 3]
    procs = {lg["name"]: lg["process"] for lg in data["logs"]}
    assert procs["rerun_a.log"] == "rank1#2" and procs["rerun_b.log"] == "rank1#3"
    assert by(data) == {
        ("compile_ids", ("rank1#2",)): "extra 4/1",
        ("compile_ids", ("rank1#3",)): "missing 3/0",
        ("recompiles", ("rank1#2",)): "1 recompile (majority: 0 recompiles)",
    }
    (note,) = [n for n in data["notes"] if "claim rank 1" in n]
    assert note.startswith(
        "3 logs claim rank 1: they are different processes (their pids differ); each is compared as a "
        "process of its own, never added up (rank1: "
    )
    assert "rank1#2: rerun_a.log (pid 4001)" in note and "rank1#3: rerun_b.log (pid 4002)" in note
    text = run_cli("report", job, "-q").stdout
    assert "6 logs | rank 0-3, 1#2, 1#3 |" in text
    assert "Divergence between 6 logs of 4 ranks (0-3, 1#2, 1#3)" in " ".join(text.split())
    assert "ranks 0-3 agree in every check; ranks 1#2, 1#3 differ" in " ".join(text.split())
    assert "2 recompiles" not in text and "Compiles of rank 1#2" in text


def test_every_log_says_rank_0(tmp_path: Path) -> None:
    """Three processes that all say rank 0 (logged before the process group existed): compared
    all the same, and the one whose schedule lacks a reduce_scatter_tensor is named."""
    drop = make_job.edit_payload(
        b"inductor_collective_schedule",
        b'"torch.ops._c10d_functional.reduce_scatter_tensor.default",\n'
        b'"torch.ops._c10d_functional.wait_tensor.default",\n',
        b"",
    )
    for n in range(3):
        edits = [make_job.set_pid(5000 + n)] + ([drop] if n == 2 else [])
        write(tmp_path / f"proc{n}.log", rank0_log(), 0, *edits)
    data = report_json(tmp_path)
    assert data["ranks"] == [0]
    assert by(data) == {
        ("collective_schedule", ("rank0#3",)): (
            "0/0 misses reduce_scatter_tensor, wait_tensor at collective 3 (majority has it)"
        ),
        ("collective_parity", ("rank0#3",)): (
            "0/0 collective 3 is all_reduce_ in the schedule, reduce_scatter_tensor in the "
            "output code"
        ),
    }
    assert any(
        n.startswith("3 logs claim rank 0: they are different processes") for n in data["notes"]
    )
    assert "3 logs | rank 0, 0#2, 0#3 |" in run_cli("report", tmp_path, "-q").stdout


def test_collectives_without_a_wait_and_waits_without_one(tmp_path: Path) -> None:
    """Rank 1's output code loses the wait of its all_gather; rank 2's waits on a buffer no
    collective made. Each is named with its call's position and buffer."""
    no_wait = make_job.edit_payload(
        b"inductor_output_code",
        b"        torch.ops._c10d_functional.wait_tensor.default(buf2)\n",
        b"",
    )
    stray = make_job.edit_payload(
        b"inductor_output_code",
        b"torch.ops._c10d_functional.all_reduce_.default(buf6, 'sum', '0')",
        b"torch.ops._c10d_functional.all_reduce_.default(buf6, 'sum', '0')\n"
        b"        torch.ops._c10d_functional.wait_tensor.default(buf9)",
    )
    for rank, edits in ((0, []), (1, [no_wait]), (2, [stray]), (3, [])):
        write(tmp_path / f"dedicated_log_torch_trace_rank_{rank}_x.log", rank0_log(), rank, *edits)
    got = by(report_json(tmp_path))
    assert got[("collective_parity", ("rank1",))] == (
        "0/0 collective 2 is wait_tensor in the schedule, reduce_scatter_tensor in the output "
        "code; all_gather_into_tensor 1 (buf2) has no wait_tensor"
    )
    assert got[("collective_parity", ("rank2",))] == (
        "0/0 the schedule has 6 collectives and the output code 7: only the output code has "
        "wait_tensor (from 7); wait_tensor 6 (buf9) waits on no collective"
    )
    assert ("graph", ("rank1",)) in got and ("graph", ("rank2",)) in got


def test_kernel_outputs_and_runtime_estimates(tmp_path: Path) -> None:
    """Rank 1's first kernel writes bfloat16; ranks 0-3 estimate 1.00-1.02 ms for the graph's
    matmul (within 5%), rank 4 3 ms: off the median, and the slowest."""

    def estimate(ns: int) -> make_job.Edit:
        return make_job.edit_payload(
            b"inductor_runtime_and_tensor_meta",
            b'"name": "extern_kernels.mm",\n"type": "compute",\n"estimated_runtime_ns": 0,',
            b'"name": "extern_kernels.mm",\n"type": "compute",\n"estimated_runtime_ns": %d,' % ns,
        )

    bf16 = make_job.edit_payload(
        b"inductor_runtime_and_tensor_meta", b'"dtype": "float32"', b'"dtype": "bfloat16"'
    )
    runtimes = {0: 1_000_000, 1: 1_010_000, 2: 1_020_000, 3: 1_000_000, 4: 3_000_000}
    for rank, ns in runtimes.items():
        edits = [estimate(ns)] + ([bf16] if rank == 1 else [])
        write(tmp_path / f"dedicated_log_torch_trace_rank_{rank}_x.log", rank0_log(), rank, *edits)
    got = by(report_json(tmp_path))
    assert got == {
        ("tensor_meta", ("rank1",)): (
            "0/0 kernel 1 (extern_kernels.mm) outputs [4, 6] [6, 1] bfloat16 "
            "(majority: [4, 6] [6, 1] float32)"
        ),
        ("runtime_estimate", ("rank4",)): (
            "0/0 estimated runtime 3 ms (median of 5: 1.01 ms; the slowest)"
        ),
    }


def test_no_majority_compares_each_with_rank_0(tmp_path: Path) -> None:
    plants = {1: [make_job.input_size(4, 0, 8)], 2: [make_job.input_size(4, 0, 16)]}
    make_job.make_job(tmp_path, 3, gloo_rank0(), plants)
    got = by(report_json(tmp_path))
    assert got == {
        ("inputs", ("rank1",)): "4/0 L['t'] size [8] (no majority; rank 0: [4])",
        ("inputs", ("rank2",)): "4/0 L['t'] size [16] (no majority; rank 0: [4])",
    }


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_many_agreeing_ranks_are_one_group(tmp_path: Path) -> None:
    make_job.make_job(tmp_path, 12, gloo_rank0(), {7: [make_job.input_size(4, 0, 8)]})
    data = report_json(tmp_path)
    assert by(data) == {("inputs", ("rank7",)): "4/0 L['t'] size [8] (majority: [4])"}
    text = run_cli("report", tmp_path, "-q").stdout
    assert "ranks 0-6, 8-11 agree in every check; rank 7 differs" in text
