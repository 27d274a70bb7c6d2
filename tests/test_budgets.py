"""Hostile logs, third round (issue 34): what a log claims is never allocated past its bound. A
logged DeviceMesh is at most MAX_MESH_RANKS ranks and counted by --max-bytes; the indices a
compressed layout is rebuilt with are counted; each crafted log is made here, small.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES
from crafted import graph, limited, source, start, storage, tensor
from damage import EXIT_OK, EXIT_REFUSED, assert_clean_exit, run

from tlview.tensors.mesh import MAX_MESH_RANKS

TORCH_LIMIT = 3 << 30  # address space of a child that imports torch
ONE_RANK = b"DeviceMesh((1,), 'cpu', stride=((),))"


def with_mesh(tmp: Path, shape: str) -> Path:
    """The DTensor fixture (torch wrote it) with its mesh's shape replaced by SHAPE."""
    data = (FIXTURES / "rebuild_dtensor.log").read_bytes()
    assert ONE_RANK in data
    log = tmp / "mesh.log"
    log.write_bytes(data.replace(ONE_RANK, f"DeviceMesh(({shape},), 'cpu')".encode()))
    return log


@pytest.mark.slow  # torch, as processes under a memory limit
def test_a_logged_mesh_of_1e9_ranks_is_refused_not_allocated(tmp_path: Path) -> None:
    log = with_mesh(tmp_path, "1000000000")
    for args in (["inputs", str(log)], ["inputs", str(log), "--mode", "meta"]):
        res = limited(args, TORCH_LIMIT)
        assert res.returncode == EXIT_OK, res.stderr[-2000:]
        out = res.stdout.decode()
        assert f"over {MAX_MESH_RANKS:,} ranks" in out, out[-2000:]
    emit = tmp_path / "meta.pt"
    res = limited(["inputs", str(log), "--mode", "meta", "--emit", str(emit)], TORCH_LIMIT)
    assert res.returncode == EXIT_OK, res.stderr[-2000:]


@pytest.mark.slow  # torch
def test_max_bytes_counts_the_mesh(tmp_path: Path) -> None:
    """A mesh of 65,536 ranks is built (an int64 tensor of them): --max-bytes counts its 512 KiB."""
    log = with_mesh(tmp_path, str(MAX_MESH_RANKS))
    out = tmp_path / "x.pt"
    res = run("inputs", str(log), "--emit", str(out), "--mode", "zeros", "--max-bytes", "256K")
    assert_clean_exit(res, EXIT_REFUSED, "mesh over --max-bytes")
    assert "over --max-bytes 256.0 KiB" in res.stderr
    need = res.stderr.split(" need ")[1].split(" of memory")[0]
    assert need.endswith("KiB") and float(need.split()[0]) >= 512, res.stderr
    res = run("inputs", str(log), "--emit", str(out), "--mode", "zeros", "--max-bytes", "16M")
    assert_clean_exit(res, EXIT_OK, "mesh within --max-bytes")


@pytest.mark.slow  # torch
def test_a_compressed_layout_without_indices_is_counted(tmp_path: Path) -> None:
    """A CSR tensor of 2**27 rows on a claimed 16-byte storage, logged without its indices: its
    rebuilt crow_indices (1 GiB) count against --max-bytes, and nothing is allocated."""
    log = tmp_path / "csr.log"
    rows = 1 << 27
    csr = tensor(0, [rows, 4], [], 0, layout="torch.sparse_csr").replace(b'"stride":[],', b"")
    assert b"stride" not in csr  # torch logs no stride of a sparse tensor
    params = [("L_x_", f"f32[{rows}, 4][4, 1]cpu")]
    log.write_bytes(start() + storage(0, 16) + csr + source(0, "L['x']") + graph(params))
    out = tmp_path / "x.pt"
    args = ["inputs", str(log), "--emit", str(out), "--mode", "zeros", "--max-bytes", "1M"]
    res = limited(args, TORCH_LIMIT)
    assert res.returncode == EXIT_REFUSED, res.stderr[-2000:]
    err = res.stderr.decode()
    assert "need 1.0 GiB of memory, over --max-bytes 1.0 MiB" in err, err
    assert not out.exists()
