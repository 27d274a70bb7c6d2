"""Hostile logs, third round (issue 34): what a log claims is never allocated past its bound. A
logged DeviceMesh is at most MAX_MESH_RANKS ranks and counted by --max-bytes; the indices a
compressed layout is rebuilt with are counted; each crafted log is made here, small.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import FIXTURES
from crafted import compile_of, graph, limited, source, start, storage, tensor
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


def test_listings_pad_no_row_to_a_long_cell(tmp_path: Path) -> None:
    """`show`'s listing of a compile with one artifact named by 100,000 characters: its row cut
    to the width, every row at most as wide as the terminal, the name whole once under the
    table, so the output is about the log's size, not rows x name."""
    from test_paste import artifact

    width = int(os.environ["COLUMNS"])
    long = "n" * 100_000
    log = tmp_path / "a.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(
        one + artifact(long, "x") + b"".join(artifact(f"a{i}", "y") for i in range(200))
    )
    res = run("show", str(log), "--compile-id", "0/0")
    assert_clean_exit(res, EXIT_OK, "show")
    lines = res.stdout.splitlines()
    assert sum(len(ln) for ln in lines) < 100_000 + 210 * width
    assert sum(ln.count(long) for ln in lines) == 1  # the long name whole, once
    assert max(len(ln) for ln in lines if long not in ln) <= width


def test_show_keeps_only_the_payload_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing one artifact keeps its bytes alone, not every payload of its kind."""
    from test_paste import artifact

    import tlview

    log = tmp_path / "a.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(one + b"".join(artifact("inductor_output_code", f"code {i}") for i in range(5)))
    p = tlview.artifact(str(log), "0/0", "inductor_output_code#3")
    assert p.data == b"code 2"
    report = tlview.read(str(log), keep=_keep_for(p.line))
    kept = [q for c in report.compiles for q in c.artifacts if q.data is not None]
    assert [q.data for q in kept] == [b"code 2"]


def _keep_for(line: int):  # type: ignore[no-untyped-def]
    from tlview.index.keep import Keep

    whole = 1 << 62
    return Keep(whole, whole, frozenset({"inductor_output_code"}), "0/0", exact=True, line=line)


@pytest.mark.slow  # 16 MiB of graph code through a pipe: about 5 s
def test_the_pipe_copy_for_the_trace_is_what_it_rereads(tmp_path: Path) -> None:
    """`--format perfetto` from a pipe copies the stream to read it again: the copy holds every
    record line and the payloads of the records the trace reads, the others as empty lines (so
    each line keeps its number), gzip-compressed: 16 MiB of graph code copy as a few KiB."""
    import gzip
    import io
    import json

    from crafted import record

    from tlview.commands.paths import _copy_wanted

    event = {"name": "dynamo", "ph": "B", "ts": 5, "pid": 0, "tid": 0, "cat": "dynamo_timed"}
    big = "\n".join(f"    x{i} = y{i} + 1" for i in range(800_000))
    data = (
        compile_of((0, 0), [("L['x']", [4], "torch.float32")])
        + record("dynamo_output_graph", {"sizes": {}}, (0, 0), payload=big)
        + record("chromium_event", {}, (0, 0), payload=json.dumps(event))
    )
    for src in (data, gzip.compress(data)):
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as dst:
            _copy_wanted(io.BytesIO(src), dst, (b'"chromium_event"',))
        assert len(out.getvalue()) < 200_000 < len(data) // 50
        copy = gzip.decompress(out.getvalue())
        assert copy.count(b"\n") == data.count(b"\n")  # every line keeps its number
        assert json.dumps(event).encode() in copy and b"x17 = y17" not in copy
        kept = [ln for ln in copy.split(b"\n") if ln and not ln.startswith(b"\t")]
        assert kept == [ln for ln in data.split(b"\n") if ln and not ln.startswith(b"\t")]


def test_payload_text_kept_is_one_budget_per_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of 4 rank logs keeps at most the page's reading budget of text over all its logs
    (each log its share), not that budget per log."""
    from test_paste import artifact

    import tlview
    from tlview.render.html import budget

    monkeypatch.setattr(budget, "READ_BYTES", 2 << 20)
    job = tmp_path / "job"
    job.mkdir()
    one = [("L['x']", [4], "torch.float32")]
    for r in range(4):
        codes = b"".join(
            artifact("inductor_output_code", f"{r}{k}" * 150_000, (0, 0)) for k in range(4)
        )
        (job / f"rank_{r}.log").write_bytes(compile_of((0, 0), one) + codes)
    report = tlview.read(str(job), keep=budget.page_keep(False))
    kept = [p for c in report.compiles for p in c.artifacts if p.text is not None]
    assert sum(len(p.text or "") for p in kept) <= 2 << 20
    assert {c.rank for c in report.compiles if any(p.text for p in c.artifacts)} == {0, 1, 2, 3}
