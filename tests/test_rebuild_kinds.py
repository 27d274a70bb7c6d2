"""Inputs of every kind, rebuilt from logs of programs that saved their real inputs.

`tests/fixtures/make_fixtures.py` runs the programs (rebuild_shapes, rebuild_kinds,
rebuild_dtensor) under TORCH_TRACE; each saved what its compiled functions were given, read off
the real tensors by `record()` (its RECORD), as <name>.inputs.json. Here the same reading of the
rebuilt tensors must give the same fields (size, stride, offset, dtype, device, layout, type,
requires_grad, Parameter, base, storage sharing through inner tensors too), and every fake must
have the exact sizes and strides of the graph's placeholder annotations.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, run_cli
from listing import flat, listing_rows
from recorded import mask as _mask
from recorded import read, saved
from recorded import reader as recorded_reader

pytestmark = pytest.mark.slow  # torch builds the tensors
torch = pytest.importorskip("torch")

from tlview import real_inputs
from tlview.index.annotations import tensor_type
from tlview.index.dims import arg_name
from tlview.load import read as load
from tlview.model import Compile, Report
from tlview.rebuild import fake_rebuild
from tlview.tensors.emit import emit_file, load_inputs
from tlview.tensors.options import RebuildOptions
from tlview.tensors.plans import plans_for, real_bytes

LOGS = ("rebuild_shapes", "rebuild_kinds", "rebuild_dtensor")


@pytest.fixture(scope="module")
def reader() -> dict[str, Any]:
    return recorded_reader()


@pytest.fixture(scope="module")
def logs() -> dict[str, tuple[Report, list[dict[str, Any]]]]:
    return {name: (load(FIXTURES / f"{name}.log"), saved(name)) for name in LOGS}


def recorded(logs: Any, log: str, function: str) -> tuple[Report, dict[str, Any]]:
    rep, records = logs[log]
    want = [r for r in records if r["function"] == function]
    assert len(want) == 1, function
    return rep, _mask(want[0]["inputs"])


def compile_of(rep: Report, function: str, key: str | None = None) -> Compile:
    got = [c for c in rep.attempts if c.function == function and (key is None or c.key == key)]
    assert len(got) == 1, [c.key for c in got]
    return got[0]


def as_graph_took(original: dict[str, Any]) -> dict[str, Any]:
    """A functorch wrapper is rebuilt as what the graph took: one example of its batch (or
    the tensor it wraps), a plain tensor whose base is the rebuilt unwrapped tensor."""
    out = {k: v for k, v in original.items() if k != "functorch"}
    inner = original["functorch"]["unwrapped"]
    grad = original["functorch"]["kind"] == "grad"
    out.update(
        is_view=True,
        base={"tensor": 0, "size": inner["size"]},
        stride=inner["stride"][1:] if not grad else inner["stride"],
        storage_offset=0,
        storage=0,
        storage_bytes=inner["storage_bytes"],
        is_conj=False,
        is_neg=False,
    )
    return out


# (log, compiled function, compile id when it has several) whose inputs rebuild field by field
EXACT = [
    ("rebuild_shapes", "jagged", None),
    ("rebuild_shapes", "sliced", "1/1"),
    ("rebuild_shapes", "views", None),
    ("rebuild_shapes", "pairs", None),
    ("rebuild_kinds", "dense", None),
    ("rebuild_kinds", "copy_into", None),
    ("rebuild_dtensor", "step", None),
    ("rebuild_dtensor", "mesh_step", None),
]


@pytest.mark.parametrize(("log", "function", "key"), EXACT)
def test_real_inputs_are_the_programs(
    reader: Any, logs: Any, log: str, function: str, key: Any
) -> None:
    rep, want = recorded(logs, log, function)
    got = real_inputs(compile_of(rep, function, key), seed=1)
    assert got.failed == {}
    assert read(reader, got.tensors, list(want)) == want


def test_functorch_wrappers_are_what_the_graph_took(reader: Any, logs: Any) -> None:
    for function in ("example", "loss"):
        rep, want = recorded(logs, "rebuild_kinds", function)
        c = compile_of(rep, function)
        got = real_inputs(c)
        assert set(got.tensors) == set(want)  # the unwrapped tensor is no input of its own
        read_back = read(reader, got.tensors, list(want))
        for src, w in want.items():
            expect = as_graph_took(w) if "functorch" in w else w
            if "functorch" in w:
                base = reader["meta"](got.tensors[src]._base)
                assert _mask(base) == w["functorch"]["unwrapped"], src
            assert read_back[src] == expect, src
    rep = logs["rebuild_kinds"][0]
    rows = run_cli("inputs", FIXTURES / "rebuild_kinds.log", "--compile-id", "0/0", "--check")
    assert "<tensor" not in rows.stdout and "2 input(s)" in rows.stdout
    assert (
        "L['u']: real: vmap's BatchedTensor at level 1 over dim 0 of a [3, 4] tensor: rebuilt "
        "outside vmap as the batch's first example, a view of it"
    ) in flat(rows.stdout)
    c = compile_of(rep, "example")
    u = next(i for i in c.inputs if i.sources == ["L['u']"])
    assert u.notes == [
        "vmap's BatchedTensor at level 1, batch dim 0 of tensor 0: the graph took one example "
        "of the batch"
    ]


def test_sparse_layouts_rebuild_from_their_parts(reader: Any, logs: Any) -> None:
    """Non-strict export describes fakes of a sparse tensor's parts (no entries), a fake made
    with a source the real parts: each rebuilds with the logged layout, size and dtypes, its
    indices valid, as many entries as the log says."""
    rep, records = logs["rebuild_kinds"]
    c = next(c for c in rep.attempts if c.key == "-/-")
    real = real_inputs(c, seed=3)
    fake = fake_rebuild(c)
    assert real.failed == {} and fake.failed == {}
    names = [name for g in real.groups for name, _tid, _src in g.sources]
    wants = [r for r in records if r["function"].startswith(("export_", "fake_"))]
    assert len(names) == len(wants) == 7
    for name, w in zip(names, wants, strict=True):
        t, f, want = real.tensors[name], fake.tensors[name], w["inputs"]["L['s']"]
        for k in ("size", "dtype", "layout", "requires_grad", "is_leaf", "type"):
            assert _mask(reader["meta"](t))[k] == want[k], (w["function"], k)
        assert str(f.layout).removeprefix("torch.") == want["layout"]
        assert [int(d) for d in f.shape] == want["size"]
        if want["layout"] == "sparse_coo":
            assert t._nnz() == 0
            continue
        got = reader["meta"](t)
        assert got["compressed"]["dtype"] == want["compressed"]["dtype"]
        assert got["compressed"]["size"] == want["compressed"]["size"]
        if w["function"].startswith("fake_"):  # its parts as they are: nnz and block size
            assert got["plain"]["size"] == want["plain"]["size"]
            assert got["values"]["size"] == want["values"]["size"]
            torch._validate_sparse_compressed_tensor_args(
                *(
                    (t.crow_indices(), t.col_indices())
                    if t.layout == torch.sparse_bsr
                    else (t.ccol_indices(), t.row_indices())
                ),
                t.values(),
                t.shape,
                t.layout,
            )
            assert t.to_dense().count_nonzero() > 0  # random values at valid places


def test_mkldnn_and_compressed_fakes_are_torchs(logs: Any) -> None:
    rep = logs["rebuild_kinds"][0]
    c = compile_of(rep, "dense")
    m = real_inputs(c).tensors["L['m']"]
    assert m.layout == torch._mkldnn and list(m.shape) == [4, 4] and m.to_dense().abs().sum() > 0
    f = fake_rebuild(c)
    assert f.notes["L['m']"] == ["mkldnn: faked as torch fakes it, a strided tensor"]


def test_memory_needed_counts_each_storage_once(logs: Any) -> None:
    """A functorch wrapper is a view of what it wraps (no bytes of its own); an mkldnn tensor
    is dense, however small its logged strides make its extent."""
    rep = logs["rebuild_kinds"][0]
    need = {c.function: real_bytes(plans_for(c)[1]) for c in rep.attempts if c.function}
    assert need["example"] == 3 * 4 * 4 + 4 * 4  # u's [3, 4] batch and the plain [4] input
    assert need["loss"] == 5 * 4
    assert need["dense"] == 4 * 4 * 4


@pytest.mark.parametrize("log", LOGS)
def test_fakes_have_the_graphs_sizes_and_strides(logs: Any, log: str) -> None:
    """Every placeholder of every graph, faked: exactly the symbols its annotation has."""
    rep = logs[log][0]
    checked = 0
    for c in rep.attempts:
        g = next((g for g in c.graphs if g.kind == "dynamo_output_graph"), None)
        if g is None or not g.placeholders:
            continue
        got = fake_rebuild(c)
        assert got.failed == {}, c.key
        by_arg = {arg_name(src): t for src, t in got.tensors.items()}
        for name, ann in g.placeholders.items():
            tt = tensor_type(ann)
            if tt is None:
                continue
            t = by_arg[name]
            assert [str(d) for d in t.shape] == [str(d) for d in tt.size], (c.key, name)
            assert [str(d) for d in t.stride()] == [str(d) for d in tt.stride], (c.key, name)
            checked += 1
    assert checked >= 6


def test_the_graphs_symbols_where_the_log_made_others(logs: Any) -> None:
    """The cases the log gets wrong without the graph: a jagged tensor's dims (s98 was made,
    then replaced by s20), a slice's dynamic stride with static sizes, a view's strides
    that are its base's sizes (not symbols of their own)."""
    rep = logs["rebuild_shapes"][0]
    f = fake_rebuild(compile_of(rep, "jagged")).tensors
    for src in ("L['a']", "L['b']"):
        assert [str(d) for d in f[src].shape] == ["s97", "s20", "s92"]
        assert [str(d) for d in f[src].stride()] == ["s20*s92", "s92", "1"]
    w = fake_rebuild(compile_of(rep, "sliced", "1/1")).tensors["L['w']"]
    assert list(w.shape) == [8, 3] and [str(d) for d in w.stride()] == ["s89", "1"]
    v = fake_rebuild(compile_of(rep, "views")).tensors
    assert [str(d) for d in v["L['s']"].stride()] == ["s75", "1"]
    assert str(v["L['s']"].storage_offset()) == "s44"
    assert [str(d) for d in v["L['t']"].stride()] == ["1", "s75"]
    rows = run_cli("inputs", FIXTURES / "rebuild_shapes.log").stdout
    for src in ("L['a']", "L['b']"):
        row = next(r for r in listing_rows(rows) if r[0] == src)
        assert row[1] == "[s97=4, s20=j1, s92=8]", row
    row = next(r for r in listing_rows(rows, "compile 1/1") if r[0] == "L['w']")
    assert row[1:3] == ["[8, 3]", "[s89=10, 1]"]


def test_sharing_through_inner_tensors_is_one_alias_group(logs: Any) -> None:
    rep = logs["rebuild_shapes"][0]
    for function in ("jagged", "pairs"):
        c = compile_of(rep, function)
        assert {i.alias_group for i in c.inputs} == {1}, function
        real = real_inputs(c).tensors
        a, b = (real[s] for s in sorted(real))
        inner = "_offsets" if function == "jagged" else "a"
        assert (
            getattr(a, inner).untyped_storage()._cdata == getattr(b, inner).untyped_storage()._cdata
        )
    doc = json.loads(run_cli("report", FIXTURES / "rebuild_shapes.log", "--format", "json").stdout)
    jag = next(c for c in doc["compiles"] if c["function"] == "jagged")
    offs = [i["inner"]["_offsets"]["storage"] for i in jag["inputs"]]
    assert offs[0] == offs[1] is not None
    assert [i["alias_group"] for i in jag["inputs"]] == [1, 1]
    rows = run_cli("inputs", FIXTURES / "rebuild_shapes.log", "--compile-id", "3/0").stdout
    assert [r[7] for r in listing_rows(rows)] == ["#1", "#1"]


def test_a_jagged_tensor_logged_without_offsets_says_so(tmp_path: Path) -> None:
    # Damage torch never writes: the NJT's inner `_offsets` left out of its describe_tensor.
    # Faked, torch's converter raised KeyError('_offsets'); now the input says why, in words,
    # and the rest of the compile is still rebuilt.
    text = (FIXTURES / "rebuild_shapes.log").read_text()
    damaged = [
        re.sub(r'"_offsets": \d+, ', "", line) if '"layout": "torch.jagged"' in line else line
        for line in text.split("\n")
    ]
    log = tmp_path / "no_offsets.log"
    log.write_text("\n".join(damaged))
    c = compile_of(load(log), "jagged")
    fake = fake_rebuild(c)
    want = "subclass not faked: a jagged tensor logged without its _values or _offsets"
    assert fake.failed and set(fake.failed.values()) == {want}
    assert set(fake.failed) | set(fake.tensors) == {i.sources[0] for i in c.inputs}


def test_dtensors_on_a_mesh_of_the_logged_shape(logs: Any) -> None:
    from torch.distributed.tensor import DTensor

    rep = logs["rebuild_dtensor"][0]
    one = real_inputs(compile_of(rep, "step"))
    assert one.notes == {}  # a world of one rank: nothing differs from the job
    w = one.tensors["L['w']"]
    assert isinstance(w, torch.nn.Parameter) and w.requires_grad
    two = real_inputs(compile_of(rep, "mesh_step"))
    w = two.tensors["L['w']"]
    assert isinstance(w, DTensor) and w.device_mesh.mesh_dim_names is not None
    assert tuple(w.device_mesh.mesh_dim_names) == ("dp", "tp")
    assert torch.distributed.get_backend() == "fake" and torch.distributed.get_rank() == 1
    assert two.notes["L['w']"] == [
        "on torch's fake process group of 4 ranks, as rank 1: its collectives move no data, so "
        "values differ from the job's"
    ]
    rows = run_cli("inputs", FIXTURES / "rebuild_dtensor.log", "--compile-id", "0/0", "--check")
    assert [r[-2:] for r in listing_rows(rows.stdout)] == [["ok", "ok"]] * 3


def test_every_graph_reruns(tmp_path: Path) -> None:
    """Every graph of these programs (DTensor ones on the rebuilt world, fsdp::copy_ with the
    module of torch's that defines it) runs and gives the logged shapes."""
    for log in LOGS:
        out = tmp_path / log
        res = run_cli("repro", FIXTURES / f"{log}.log", "--all", "-o", out, "--run")
        assert res.exit_code == 0, res.output
        summary = json.loads((out / "summary.json").read_text())
        statuses = {r["compile"]: (r["status"], r["reason"]) for r in summary["graphs"]}
        assert statuses and {s for s, _ in statuses.values()} == {"ran"}, (log, statuses)
    script = (tmp_path / "rebuild_kinds" / "3-0" / "repro.py").read_text()
    assert "import torch.distributed.fsdp._fully_shard._fsdp_param" in script
    update = (tmp_path / "rebuild_kinds" / "4-0" / "repro.py").read_text()
    assert (
        "the graph changes L['args'][0] and L['args'][1] in place, leaves that require grad"
    ) in update


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_torchs_ops_and_dtensors_compile_again(tmp_path: Path, backend: str) -> None:
    """fsdp::copy_ (defined by a module of torch's) and a DTensor graph on a mesh of four
    ranks re-run compiled with each backend, outputs as logged."""
    for log, key in (("rebuild_kinds", "3/0"), ("rebuild_dtensor", "1/0")):
        out = tmp_path / log
        res = run_cli(
            "repro", FIXTURES / f"{log}.log", "--compile-id", key, "--backend", backend,
            "-o", out, "--run",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        assert f"graph {key} ran compiled with {backend}: Tensor float32[]" in res.output
        assert "outputs match the shapes and dtypes in the log" in res.output


def test_emitted_and_loaded_back_as_rebuilt(reader: Any, logs: Any, tmp_path: Path) -> None:
    for log, function, key in EXACT:
        rep, want = recorded(logs, log, function)
        c = compile_of(rep, function, key)
        out = tmp_path / f"{log}-{function}.pt"
        emit_file(rep, [c], str(out), RebuildOptions(seed=2))
        got = load_inputs(out)
        assert got["failed"] == {}
        assert read(reader, got["compiles"][c.key], list(want)) == want, function
