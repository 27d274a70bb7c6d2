"""Ranks of one program on different GPUs: real CUDA logs, and each rank's log on its own GPU
derived from them by changing only the device index and the rank (tests/fixtures/gpu_rank.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, corpus, report_json, run_cli

from tlview.index.digests import graph_md5, mask_by_rank
from tlview.load import read as load

sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_rank
import make_job

JIT = ("tlparse-tests", "inductor_provenance_jit_cuda_log.txt")
AOT = ("tlparse-tests", "inductor_provenance_aot_cuda_log.txt")


def gpu_job(dest: Path, parts: tuple[str, ...], ranks: int) -> Path:
    gpu_rank.write_job(corpus(*parts), dest, ranks)
    return dest


def test_derived_rank_changes_only_the_device_index(tmp_path: Path) -> None:
    """What the derivation changed is what torch writes per GPU, and each kernel's path hash is
    inductor's hash of the kernel as changed (checked against the logged one first)."""
    job = gpu_job(tmp_path / "job", JIT, 2)
    zero = (job / "dedicated_log_torch_trace_rank_0.log").read_bytes()
    one = (job / "dedicated_log_torch_trace_rank_1.log").read_bytes()
    assert zero == corpus(*JIT).read_bytes()
    assert len(zero.splitlines()) == len(one.splitlines())
    assert b"torch.cuda.set_device(1)" in one and b"stream1 = get_raw_stream(1)" in one
    assert b"stream=stream1)" in one and b"_DeviceGuard(1)" in one and b"cuda:0" not in one
    # The kernel paths moved with their hashes: the hash's 2nd and 3rd letters are the folder.
    assert b"/bl/cblbpnydnhzljc3pj3lkezkxixus35xucszjgpgajd2vlnjwyos5.py" in zero
    assert b"cblbpnydnhzljc3pj3lkezkxixus35xucszjgpgajd2vlnjwyos5" not in one
    assert gpu_rank.code_hash(b"x")[:1] == b"c" and len(gpu_rank.code_hash(b"x")) == 52
    # Both logs read whole: no bad line, every payload's md5 holds.
    for log in load(job).logs:
        assert log.bad_count == 0 and all(p.ok for c in log.compiles for p in c.payloads())


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("parts", [JIT, AOT], ids=["jit", "aot"])
def test_a_healthy_gpu_job_reports_no_divergence(tmp_path: Path, parts: tuple[str, ...]) -> None:
    # Three GPUs: no majority among raw hashes, so unmasked every rank but one would differ.
    job = gpu_job(tmp_path / "job", parts, 3)
    data = report_json(job)
    assert data["ranks"] == [0, 1, 2]
    assert data["divergence"] == []
    assert "All 3 ranks agree" in run_cli("report", job, "-q").stdout
    logs = load(job).logs
    raw = {
        p.md5
        for lg in logs
        for c in lg.compiles
        for p in c.graphs
        if p.kind in ("inductor_output_code", "inductor_aot_wrapper_code")
    }
    assert len(raw) >= 3  # the graphs' own md5s do differ by rank


def test_output_code_masks_every_device_artefact() -> None:
    """The real output code of a CUDA compile, on GPU 0 and as GPU 3 writes it: equal once
    masked, and nothing of the index is left."""
    units = make_job.read_units(corpus(*JIT))
    (code,) = [u.payload for u in units if b'"inductor_output_code"' in u.head and u.payload]
    three = gpu_rank.on_device(code, 3)
    assert three != code
    assert mask_by_rank(three) == mask_by_rank(code)
    masked = mask_by_rank(code)
    for left in (b"cuda:0", b"set_device(0)", b"stream0", b"get_raw_stream(0)", b"index=0"):
        assert left not in masked, left
    assert b"kernel path: #" in masked and b"torchinductor_" not in masked
    md5 = graph_md5("inductor_output_code", code)
    assert md5 is not None and md5 == graph_md5("inductor_output_code", three)


def test_masks_the_forms_of_other_backends_and_wrappers() -> None:
    """Forms of torch/_inductor's codegen these logs do not hold: 2.13's `raw_streamN`, xpu and
    mtia, C++ wrappers, cudagraph generators, semaphores, AOTInductor's cubin paths."""
    pairs = [
        (b"raw_stream0 = get_raw_stream(0)", b"raw_stream5 = get_raw_stream(5)"),
        (b"k.run(buf0, 8, stream=raw_stream0)", b"k.run(buf0, 8, stream=raw_stream5)"),
        (b"with torch.xpu._DeviceGuard(0):", b"with torch.xpu._DeviceGuard(5):"),
        (b"torch.mtia.set_device(0)", b"torch.mtia.set_device(5)"),
        (b"with torch.mtia.device(0):", b"with torch.mtia.device(5):"),
        (b"AOTICudaGuard device_guard(0);", b"AOTICudaGuard device_guard(5);"),
        (b"device_guard.set_index(0);", b"device_guard.set_index(5);"),
        (
            b"aoti_torch_get_current_cuda_stream(0, (void**)&stream0)",
            b"aoti_torch_get_current_cuda_stream(5, (void**)&stream5)",
        ),
        (b"call_k(buf0, 128, 0, stream0);", b"call_k(buf0, 128, 5, stream5);"),
        (b"cached_torch_device_type_cuda, 0, &h", b"cached_torch_device_type_cuda, 5, &h"),
        (b"torch.cuda.default_generators[0]", b"torch.cuda.default_generators[5]"),
        (b"semaphores_cuda_0", b"semaphores_cuda_5"),
        (
            b"triton_meta={'device': 0, 'device_type': 'cuda'}",
            b"triton_meta={'device': 5, 'device_type': 'cuda'}",
        ),
        (b'torch.device("cuda:0")', b'torch.device("cuda:5")'),
        (
            b"DeviceProperties(type='xpu', index=0, cc=1)",
            b"DeviceProperties(type='xpu', index=5, cc=1)",
        ),
        (
            b'loadKernel("/scratch/cache/ab/cabcd.cubin", "k", 0, cubin_dir_)',
            b'loadKernel("/scratch/cache/ef/cefgh.cubin", "k", 0, cubin_dir_)',
        ),
        (
            b"// in /tmp/torchinductor_ann/cwhk/c4lu.wrapper.cpp\n",
            b"// in /tmp/torchinductor_bob/cxyz/c9zz.wrapper.cpp\n",
        ),
    ]
    for a, b in pairs:
        assert mask_by_rank(a) == mask_by_rank(b), (a, mask_by_rank(a), mask_by_rank(b))
    # What is not a device index stays: a kernel's size, a select's index, a stream object.
    for a, b in [
        (b"k.run(buf0, 128, stream=stream0)", b"k.run(buf0, 256, stream=stream0)"),
        (b"torch.select(x, 0, index=1)", b"torch.select(x, 0, index=2)"),
        (b"l_stream1_ = L_stream1_", b"l_stream2_ = L_stream2_"),
    ]:
        assert mask_by_rank(a) != mask_by_rank(b), a


def test_a_planted_kernel_difference_is_named(tmp_path: Path) -> None:
    """Rank 2 of a healthy 4-GPU job launches one kernel over another size: its output code
    differs, and only that is reported, for its compile."""
    job = gpu_job(tmp_path / "job", JIT, 4)
    path = job / "dedicated_log_torch_trace_rank_2.log"
    units = make_job.read_units(path)
    edit = make_job.edit_payload(
        b"inductor_output_code", b"300, stream=stream2", b"320, stream=stream2"
    )
    make_job.write_units(path, edit(units))
    got = report_json(job)["divergence"]
    assert len(got) == 1
    (d,) = got
    assert d["kind"] == "graph" and d["ranks"] == [2]
    assert d["detail"].startswith("0/0 inductor_output_code content ")
    assert "(majority: " in d["detail"]


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("name", ["rank_1", "rank_3"])
def test_real_multi_rank_logs_copied_to_four_ranks_agree(tmp_path: Path, name: str) -> None:
    """tlparse's multi_rank_logs (inductor output code, recompiles, cache hits) as a healthy job."""
    src = corpus("tlparse-tests", "multi_rank_logs", f"dedicated_log_torch_trace_{name}.log")
    gpu_rank.write_job(src, tmp_path / "job", 4)
    data = report_json(tmp_path / "job")
    assert data["ranks"] == [0, 1, 2, 3] and data["divergence"] == []


@pytest.mark.slow
def test_masks_follow_torch_codegen() -> None:
    """The strings torch's own codegen writes for a device index, for every backend it has."""
    from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides
    from torch._inductor.codegen.mtia.device_op_overrides import MTIADeviceOpOverrides
    from torch._inductor.codegen.xpu.device_op_overrides import XPUDeviceOpOverrides
    from torch._inductor.stream_utils import get_raw_stream_name

    for ops in (CUDADeviceOpOverrides(), XPUDeviceOpOverrides(), MTIADeviceOpOverrides()):
        for write in (ops.set_device, ops.device_guard):
            a, b = write(0).encode(), write(7).encode()
            assert a != b and mask_by_rank(a) == mask_by_rank(b), (a, b)
    a = f"{get_raw_stream_name(0)} = get_raw_stream(0)".encode()
    b = f"{get_raw_stream_name(7)} = get_raw_stream(7)".encode()
    assert mask_by_rank(a) == mask_by_rank(b)
