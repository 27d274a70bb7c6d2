"""What a log claims is never allocated past its bound: real tensors are counted before anything
is built (`--max-bytes`, the copies `torch.save` makes, repro's total over a run), a rarer dtype
is filled a part at a time, a logged DeviceMesh is at most MAX_MESH_RANKS ranks, the indices a
compressed layout is rebuilt with are counted, and 10^12-byte claims allocate nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import (
    compile_of,
    graph,
    interned,
    limited,
    metrics,
    one_input,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from damage import (
    EXIT_OK,
    EXIT_REFUSED,
    assert_clean_exit,
    payload_of,
    record_json,
    run,
    unit_bytes,
    units,
)
from helpers import FIXTURES
from planted import DEMO

from tlview.analyze.baseline import every_attempt
from tlview.tensors.mesh import MAX_MESH_RANKS

EXIT_NO_REPRO = 6


DTYPES = [
    ("torch.float32", 4),
    ("torch.float16", 2),
    ("torch.bfloat16", 2),
    ("torch.float64", 8),
    ("torch.int8", 1),
    ("torch.uint8", 1),
    ("torch.int16", 2),
    ("torch.int32", 4),
    ("torch.int64", 8),
    ("torch.complex64", 8),
    ("torch.bool", 1),
    ("torch.float8_e4m3fn", 1),
]


def twelve_views(tmp: Path, size: int) -> Path:
    """One storage of SIZE bytes viewed whole under 12 dtypes."""
    parts = [interned("/m.py"), start(), storage(0, size)]
    for i, (dt, item) in enumerate(DTYPES):
        parts += [tensor(i, [size // item], [1], 0, dtype=dt), source(i, f"L['x{i}']")]
    return write_log(tmp, "views.log", *parts, metrics())


@pytest.mark.slow
def test_max_bytes_counts_the_copies_saving_makes(tmp_path: Path) -> None:
    """torch.save copies each view of another dtype: 12 views of 4 MiB need 48 MiB, refused
    under that before anything is allocated, and the file written is what was counted."""
    pytest.importorskip("torch")
    size = 4 << 20
    log = twelve_views(tmp_path, size)
    out = tmp_path / "o.pt"
    res = run("inputs", str(log), "--emit", str(out), "--max-bytes", str(12 * size - 1))
    assert_clean_exit(res, EXIT_REFUSED, "under the copies")
    assert "need 48.0 MiB of memory" in res.stderr and not out.exists(), res.stderr
    p = limited(["inputs", str(log), "--emit", str(out), "--max-bytes", str(12 * size)], 3 << 30)
    assert p.returncode == 0, p.stderr.decode()
    assert 12 * size <= out.stat().st_size < 12 * size + (1 << 20)


@pytest.mark.slow
def test_rarer_dtypes_fill_with_bounded_temporaries(tmp_path: Path) -> None:
    """A 128 MiB float8 storage is filled from random floats a part at a time: the process
    grows by about the storage, not by the four times more a whole float copy would take."""
    pytest.importorskip("torch")
    size = 128 << 20
    log = write_log(
        tmp_path,
        "f8.log",
        interned("/m.py"),
        start(),
        storage(0, size),
        tensor(0, [size], [1], 0, dtype="torch.float8_e4m3fn"),
        source(0, "L['x']"),
        metrics(),
    )
    code = (
        "import resource, sys\nfrom tlview.cli import main\nimport torch\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base\n"
        "    print(f'GREW {grew * 1024}', file=sys.stderr)\n    raise\n"
    )
    import subprocess

    p = subprocess.run(
        [sys.executable, "-c", code, "inputs", str(log), "--emit", str(tmp_path / "o.pt")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    grew = int(re.search(r"GREW (\d+)", p.stderr).group(1))  # type: ignore[union-attr]
    assert grew < 2 * size, grew


@pytest.mark.slow
def test_repro_all_stops_at_max_bytes_with_the_figure(tmp_path: Path) -> None:
    """Six graphs of 1 MiB inputs under --max-bytes 3M: two written, four skipped saying what
    they need and what is left; the disk holds about what was allowed."""
    pytest.importorskip("torch")
    parts = [interned("/m.py")]
    for i in range(6):
        parts.append(compile_of((i, 0), [("L['x']", [256, 1024], "torch.float32")]))
    log = write_log(tmp_path, "six.log", *parts)
    out = tmp_path / "repros"
    res = run("repro", str(log), "--all", "-o", str(out), "--max-bytes", "3M")
    assert res.exit_code == EXIT_NO_REPRO, res.output
    summary = json.loads((out / "summary.json").read_text())
    statuses = [g["status"] for g in summary["graphs"]]
    assert statuses == ["written"] * 2 + ["skipped"] * 4, statuses
    reason = summary["graphs"][2]["reason"]
    assert "need 1.0 MiB of memory and as much on disk, over --max-bytes 3.0 MiB" in reason
    assert "taken by the repros before" in reason
    written = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert written < 3 << 20, written
    one = run(
        "repro", str(log), "--compile-id", "1/0", "-o", str(tmp_path / "x"), "--max-bytes", "1000K"
    )
    assert_clean_exit(one, EXIT_NO_REPRO, "one graph over")
    assert "need 1.0 MiB" in one.stderr and not (tmp_path / "x" / "inputs.pt").exists()


def test_the_repro_default_is_bounded_by_the_disk(tmp_path: Path) -> None:
    from tlview.replay.make import default_bytes
    from tlview.tensors.options import DEFAULT_MAX_BYTES

    got = default_bytes(tmp_path / "not" / "yet")
    import shutil

    assert got == min(DEFAULT_MAX_BYTES, shutil.disk_usage(tmp_path).free // 2)


@pytest.mark.slow
def test_a_size_beyond_what_torch_builds_is_a_refused_tensor(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    odd = b"".join(
        [
            start(),
            storage(0, "1048575**64"),
            tensor(0, [4, 4], [4, 1], 0),
            source(0, "L['x']"),
            storage(1, 64),
            tensor(1, ["2**62*8", 4], [4, 1], 1),
            source(1, "L['y']"),
            graph([("L_x_", "f32[4, 4][4, 1]cpu")]),
            metrics(),
        ]
    )
    log = write_log(tmp_path, "pow.log", interned("/m.py"), odd, one_input((1, 0)))
    out = tmp_path / "o.pt"
    res = run("inputs", str(log), "--emit", str(out))
    assert_clean_exit(res, EXIT_OK, "inputs --emit")
    import torch

    saved = torch.load(out, weights_only=True)
    assert "more than torch can build" in saved["failed"]["0/0"]["L['x']"]
    assert "more than torch can build" in saved["failed"]["0/0"]["L['y']"]
    assert list(saved["compiles"]["1/0"]) == ["L['x']"]
    assert_clean_exit(run("inputs", str(log)), EXIT_OK, "inputs")
    res = run("repro", str(log), "--all", "-o", str(tmp_path / "r"))
    assert res.exit_code == EXIT_NO_REPRO and "internal error" not in res.output, res.output
    graphs = json.loads((tmp_path / "r" / "summary.json").read_text())["graphs"]
    assert [g["status"] for g in graphs] == ["skipped", "written"]
    assert "more than torch can build" in graphs[0]["reason"]


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


def huge(tmp: Path) -> Path:
    """The demo log claiming a 10^12-byte storage and tensors of 10^9 and 10^15 elements."""
    out = []
    n = 0
    for u in units(DEMO.read_bytes()):
        meta = record_json(u, lenient=False)
        assert meta is not None
        kind = next(iter(meta))
        body = meta[kind]
        if kind == "describe_storage" and body["id"] in (0, 2):
            body["size"] = 10**12
        elif kind == "describe_tensor" and n < 3:
            body["size"], body["stride"] = [
                ([10**9], [1]),
                ([10**5, 10**5, 10**5], [10**10, 10**5, 1]),
                ([2**62, 2], [2, 1]),
            ][n]
            body["ndim"] = len(body["size"])
            n += 1
        out.append(unit_bytes(meta, payload_of(u), u))
    dest = tmp / "huge.log"
    dest.write_bytes(b"".join(out))
    return dest


def _peak(*args: str) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        res = run(*args)
        return tracemalloc.get_traced_memory()[1], res
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_huge_claims_allocate_nothing_in_report(tmp_path: Path, fmt: str) -> None:
    log = huge(tmp_path)
    run("report", str(DEMO), "--format", fmt, "-v", "--jobs", "1")  # imports done before measuring
    base, _ = _peak("report", str(DEMO), "--format", fmt, "-v", "--jobs", "1")
    peak, res = _peak("report", str(log), "--format", fmt, "-v", "--jobs", "1")
    assert_clean_exit(res, EXIT_OK, fmt)
    assert peak < base * 1.5 + (8 << 20), (peak, base)
    if fmt == "json":
        doc = orjson.loads(res.stdout_bytes)
        sizes = [i["size"] for c in every_attempt(doc) for i in c["inputs"]]
        assert [10**9] in sizes and [10**5, 10**5, 10**5] in sizes
        assert 10**12 in [i["storage_bytes"] for c in every_attempt(doc) for i in c["inputs"]]


@pytest.mark.slow
def test_huge_claims_real_rebuild_is_refused_meta_and_fake_work(tmp_path: Path) -> None:
    """tlview inputs: real tensors past --max-bytes stop with one line (exit 4); meta and the
    listing (fake and meta rebuilds) still work, in a process that never grows past 1.5 GB."""
    pytest.importorskip("torch")
    log = huge(tmp_path)
    # VmHWM, the peak of this process's own memory: getrusage's ru_maxrss keeps, across exec,
    # the peak of the forked copy of pytest it started as (a large suite's parent).
    code = (
        "import re, sys\nfrom tlview.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    status = open('/proc/self/status').read()\n"
        "    r = re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1)\n"
        "    print(f'MAXRSS {r}', file=sys.stderr)\n    raise\n"
    )

    def inputs(*args: str) -> tuple[int, str, int]:
        p = subprocess.run(
            [sys.executable, "-c", code, "inputs", str(log), *args],
            capture_output=True,
            check=False,
            timeout=300,
        )
        err = p.stderr.decode()
        m = re.search(r"MAXRSS (\d+)", err)
        assert m is not None, err
        return p.returncode, err.replace(m.group(0), "").strip(), int(m.group(1)) * 1024

    status, err, rss = inputs("--compile-id", "0/0", "--emit", str(tmp_path / "real.pt"))
    assert status == EXIT_REFUSED, err
    assert err.startswith("tlview: ") and len(err.splitlines()) == 1 and "--max-bytes" in err, err
    assert rss < 1536 << 20, rss
    status, err, rss = inputs(
        "--compile-id", "0/0", "--mode", "meta", "--emit", str(tmp_path / "m.pt")
    )
    assert status == EXIT_OK and "Traceback" not in err, err
    assert rss < 1536 << 20, rss
    status, err, rss = inputs()
    assert status == EXIT_OK and "Traceback" not in err, err
    assert rss < 1536 << 20, rss


@pytest.mark.slow  # torch, as a process under a memory limit
def test_a_mesh_just_past_its_bound_is_refused(tmp_path: Path) -> None:
    """MAX_MESH_RANKS + 1 ranks: refused with the bound, in the listing and in meta mode."""
    log = with_mesh(tmp_path, str(MAX_MESH_RANKS + 1))
    res = limited(["inputs", str(log), "--mode", "meta"], TORCH_LIMIT)
    assert res.returncode == EXIT_OK, res.stderr[-2000:]
    assert f"over {MAX_MESH_RANKS:,} ranks" in res.stdout.decode()
