"""Every input of every log in the shared corpus rebuilds (real, fake, emitted) as it was logged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, FIXTURES, corpus, every_launch, fake_dim, only_log, run_cli
from listing import flat

pytestmark = pytest.mark.slow  # every rebuild runs torch
torch = pytest.importorskip("torch")

from tlview import real_inputs
from tlview.analyze.names import compiles_with_inputs, find_compile
from tlview.errors import EXIT_REFUSED, TlviewError
from tlview.index.dims import fx_name
from tlview.load import read as load
from tlview.model import Compile, Input, Report, TensorDesc
from tlview.rebuild import eval_expr, fake_rebuild, parse_bytes
from tlview.tensors.emit import emit_file, load_inputs
from tlview.tensors.options import RebuildOptions

# Every folder of the corpus that holds logs, each launch of it (tlparse's tests hold several).
FOLDERS = (
    sorted(
        str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_dir() and any(p.glob("*.log"))
    )
    if CORPUS.exists()
    else []
)
# Notes the corpus is expected to produce: each names what could not be exact, and why.
EXPECTED_NOTES = {"logged on cuda:0, which this machine does not have: built on cpu"}


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {name: every_launch(corpus(name)) for name in FOLDERS}


def logged(d: Any) -> Any:
    if isinstance(d, str) and ("j" in d):
        return "j"
    return d


def check(name: str, x: Any, t: TensorDesc, inputs: dict[int, TensorDesc]) -> None:
    """A rebuilt tensor against its describe_tensor record: every field the log has."""
    size = t.size or []
    assert len(x.shape) == len(size), name
    for got, want in zip(x.shape, size, strict=True):
        if isinstance(want, int) or logged(want) == "j":
            assert fake_dim(got) == logged(want), (name, list(x.shape), size)
    assert str(x.dtype) == t.dtype, name
    assert x.requires_grad == t.flag("requires_grad"), name
    assert x.is_leaf == t.flag("is_leaf"), name
    assert isinstance(x, torch.nn.Parameter) == t.flag("is_parameter"), name
    plain = not t.flag("is_traceable_wrapper_subclass") and not t.flag("is_sparse")
    if plain and t.stride is not None:
        for got, want in zip(x.stride(), t.stride, strict=True):
            if isinstance(want, int):
                assert fake_dim(got) == want, (name, x.stride(), t.stride)
        if isinstance(t.storage_offset, int):
            assert fake_dim(x.storage_offset()) == t.storage_offset, name
        assert x._is_view() == t.flag("is_view"), name
        assert x.is_conj() == t.flag("is_conj") and x.is_neg() == t.flag("is_neg"), name
    if t.grad is not None and t.grad in inputs:
        assert x.grad is not None, name
        check(f"{name}.grad", x.grad, inputs[t.grad], inputs)


def check_compile(c: Compile, tensors: dict[str, Any]) -> None:
    """Each source's tensor matches its record; inputs share storage exactly when logged so."""
    keys: dict[str, str] = {}
    for inp in c.inputs:
        s = next(s for s in c.input_sets if s.describer == inp.describer)
        for src in _names(c, inp):
            check(src, tensors[src], inp.tensor, s.tensors)
            if inp.storage_key is not None and _plain(inp):
                keys[src] = inp.storage_key
    for a, ka in keys.items():
        for b, kb in keys.items():
            same = tensors[a].untyped_storage()._cdata == tensors[b].untyped_storage()._cdata
            assert same == (ka == kb), (c.key, a, b)


def _plain(inp: Input) -> bool:
    return not inp.tensor.flag("is_traceable_wrapper_subclass") and not inp.tensor.flag("is_sparse")


def _names(c: Compile, inp: Input) -> list[str]:
    """The names the rebuild gives an input's sources (suffixed when a describer repeats one)."""
    seen: dict[str, int] = {}
    for other in c.inputs:
        for s in other.sources or [other.source]:
            seen.setdefault(s, other.describer)
    out = []
    for s in inp.sources or [inp.source]:
        out.append(s if seen[s] == inp.describer else f"{s} [describer {inp.describer}]")
    return out


AS_LOGGED = "its value is as logged: "


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_corpus_input_rebuilds_real_and_fake(reports: dict[str, Report], folder: str) -> None:
    rep = reports[folder]
    chosen = list(compiles_with_inputs(rep))
    for c in chosen:
        for r, kind in ((real_inputs(c), "real"), (fake_rebuild(c), "fake")):
            assert r.failed == {}, (folder, c.key, kind)
            for src, notes in r.notes.items():
                logged = {n for n in notes if n.startswith(AS_LOGGED)}
                assert set(notes) - logged <= EXPECTED_NOTES, (folder, c.key, kind, src, notes)
                for n in logged:  # a value the log recorded: the tensor holds it
                    assert kind == "real" and n == f"{AS_LOGGED}{r.logged[src].words()}", n
                    assert r.tensors[src].item() == r.logged[src].value, (c.key, src)
            check_compile(c, r.tensors)


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_corpus_input_survives_emit_and_load(
    reports: dict[str, Report], folder: str, tmp_path: Path
) -> None:
    rep = reports[folder]
    chosen = list(compiles_with_inputs(rep))
    if not chosen:
        pytest.fail(f"{folder}: no compile described inputs")
    out = tmp_path / "inputs.pt"
    emit_file(rep, chosen, str(out), RebuildOptions(mode="zeros"))
    got = load_inputs(out)
    many = len({log.name for log in rep.logs}) > 1
    keys = [f"{c.log}:{c.key}" if many else c.key for c in chosen]
    assert sorted(got["compiles"]) == sorted(set(keys))
    for key, c in zip(keys, chosen, strict=True):
        if keys.count(key) == 1:
            check_compile(c, got["compiles"][key])
    assert got["failed"] == {}


def test_corpus_facts(reports: dict[str, Report]) -> None:
    """Specific inputs of the corpus, rebuilt as the programs that wrote it made them."""
    from torch._subclasses.fake_tensor import FakeTensor

    views = reports["views_aliasing"]
    c = next(c for c in views.attempts if c.key == "1/0")
    r = real_inputs(c)
    x, y = r.tensors["L['x']"], r.tensors["L['y']"]
    assert x._base is y._base and y.storage_offset() == 4 and x.untyped_storage().nbytes() == 40
    c = next(c for c in views.attempts if c.key == "6/1")
    fx = fake_rebuild(c).tensors["L['x']"]
    assert [str(d) for d in fx.shape] == ["s77", "s27"]  # named as the log's create_symbol said
    assert fx._base is not None and str(fx._base.shape[0]) == "s83"
    dyn = reports["dynamic_shapes"]
    c = next(c for c in dyn.attempts if c.key == "0/1")
    f = fake_rebuild(c).tensors
    assert [str(d) for d in f["L['y']"].shape] == ["s17", "s94", "s48"]
    # x's dim 0 was made s77, then a guard made it s17: the graph has s17, so the fake does
    assert [str(d) for d in f["L['x']"].shape] == ["s17", "s27", "s48"]
    c = next(c for c in dyn.attempts if c.key == "1/0")  # mark_dynamic(min=2, max=1024)
    fx = fake_rebuild(c).tensors["L['x']"]
    assert isinstance(fx, FakeTensor) and fx.fake_mode.shape_env is not None
    shape_env = fx.fake_mode.shape_env
    s77 = next(v for v in shape_env.var_to_range if str(v) == "s77")
    assert (int(shape_env.var_to_range[s77].lower), int(shape_env.var_to_range[s77].upper)) == (
        2,
        1024,
    )
    export = reports["export"]
    c = next(c for c in export.attempts if c.key == "1/0")  # sizes logged as "s77", "16*s77"
    t = real_inputs(c).tensors["L['args'][3][0]"]
    assert list(t.shape) == [4, 4] and t.untyped_storage().nbytes() == 64
    sub = reports["subclasses"]
    c = next(c for c in sub.attempts if c.key == "2/1")
    w = real_inputs(c).tensors["L['fn']._parameters['weight']"]
    assert type(w).__name__ == "TwoTensor" and isinstance(w, torch.nn.Parameter)
    assert w.a.untyped_storage()._cdata != w.b.untyped_storage()._cdata
    gpu = reports["tlparse-tests"]
    c = next(c for c in gpu.attempts if c.log == "simple.log" and c.inputs)
    assert c.inputs[0].tensor.device == "cuda:0"
    got = real_inputs(c)
    assert {t.device.type for t in got.tensors.values()} == {"cpu"}
    assert real_inputs(c, device="meta").tensors[c.inputs[0].source].device.type == "meta"


def test_placeholder_names_and_expressions() -> None:
    assert fx_name("L['x']") == "l_x_"
    assert (
        fx_name("L['self']._modules['l1']._parameters['weight']")
        == "l_self_modules_l1_parameters_weight_"
    )
    assert fx_name("L['hiddenStates']") == "l_hidden_states_"  # FX's snake case
    assert eval_expr("16*s77", {"s77": 4}) == 64
    assert eval_expr("Max(1, s0) + s1//2", {"s0": 3, "s1": 9}) == 7
    assert eval_expr("s9 * 2", {}) is None
    assert eval_expr("__import__('os').system('x')", {}) is None
    assert eval_expr("(lambda: 1)()", {}) is None
    assert parse_bytes("8G") == 8 << 30 and parse_bytes("512MiB") == 512 << 20
    assert parse_bytes("1000") == 1000


def _damaged(tmp_path: Path, edits: dict[tuple[int, int], Any]) -> Path:
    """views_aliasing with some describe_tensor records damaged as torch never writes them."""
    out = []
    for line in only_log("views_aliasing").read_text().splitlines(keepends=True):
        head, sep, body = line.partition("] {")
        if sep and body.startswith('"describe_tensor"'):
            rec = json.loads("{" + body)
            d = rec["describe_tensor"]
            edit = edits.get((d["describer_id"], d["id"]))
            if edit is not None:
                edit(d)
                line = head + "] " + json.dumps(rec) + "\n"
        out.append(line)
    path = tmp_path / "damaged.log"
    path.write_text("".join(out))
    return path


def test_one_bad_tensor_never_stops_the_others(tmp_path: Path) -> None:
    def drop_stride(d: dict[str, Any]) -> None:
        del d["stride"]

    def bad_dtype(d: dict[str, Any]) -> None:
        d["dtype"] = "torch.nonsense"

    def huge(d: dict[str, Any]) -> None:
        d["size"] = [1 << 40, 1 << 20]

    rep = load(_damaged(tmp_path, {(0, 3): drop_stride, (2, 3): bad_dtype, (15, 0): huge}))
    by = {c.key: c for c in rep.attempts}
    for r in (real_inputs(by["0/0"]), fake_rebuild(by["0/0"])):
        assert r.failed == {"L['b']": "stride is not logged"}
        assert sorted(r.tensors) == ["L['a']", "L['c']"]
    why = f"dtype 'torch.nonsense' is not a dtype of this torch ({torch.__version__})"
    for r in (real_inputs(by["1/0"]), fake_rebuild(by["1/0"])):
        assert r.failed == {"L['y']": why}
        assert list(r.tensors["L['x']"].shape) == [6]
    with pytest.raises(TlviewError) as e:
        real_inputs(by["5/0"])
    assert e.value.exit_code == EXIT_REFUSED and "use --mode meta" in e.value.message
    assert list(real_inputs(by["5/0"], mode="meta").tensors["L['x']"].shape) == [1 << 40, 1 << 20]
    assert list(fake_rebuild(by["5/0"]).tensors["L['x']"].shape) == [1 << 40, 1 << 20]
    listed = run_cli("inputs", tmp_path / "damaged.log", "--compile-id", "1/0", "--check")
    assert listed.exit_code == 0
    assert f"L['y']: not rebuilt as real: {why}" in flat(listed.stdout)


def test_sparse_and_quantized_inputs_list_emit_and_repro(tmp_path: Path) -> None:
    """A sparse COO input (no stride or storage logged) is rebuilt with nnz 0 and written by
    --emit; a quantized one fails with its reason (torch fakes none). Neither stops the rest,
    and torch's warnings about them never reach the terminal. Torch 2.13 describes neither
    for dynamo (its fake propagation rejects quantized tensors), so the records are edited."""

    def sparse(d: dict[str, Any]) -> None:
        for k in ("stride", "storage", "storage_offset", "is_view", "base", "view_func"):
            d.pop(k, None)
        d.update(is_sparse=True, layout="torch.sparse_coo", sparse_dim=2, dense_dim=0)

    def quantized(d: dict[str, Any]) -> None:
        d.update(dtype="torch.qint8", is_quantized=True, qscheme="torch.per_tensor_affine")

    log = _damaged(tmp_path, {(0, 3): sparse, (2, 3): quantized})
    by = {c.key: c for c in load(log).attempts}
    why = "quantized (qint8): torch rebuilds no quantized tensor from a description"
    for r in (real_inputs(by["1/0"]), fake_rebuild(by["1/0"])):
        assert list(r.failed) == ["L['y']"] and r.failed["L['y']"].startswith(why)
        assert list(r.tensors["L['x']"].shape) == [6]
    b = real_inputs(by["0/0"]).tensors["L['b']"]
    assert b.layout == torch.sparse_coo and list(b.shape) == [8, 5] and b._nnz() == 0
    listing = run_cli("inputs", log, "--check")
    assert listing.exit_code == 0 and "Warning" not in listing.stderr
    assert "L['y']: not rebuilt as real: " + why in flat(listing.stdout)
    out = tmp_path / "x.pt"
    res = run_cli("inputs", log, "--emit", out)
    assert res.exit_code == 0 and "Warning" not in res.stderr, res.stderr
    got = load_inputs(out)
    b = got["compiles"]["0/0"]["L['b']"]
    assert b.layout == torch.sparse_coo and list(b.shape) == [8, 5]
    assert got["failed"]["1/0"]["L['y']"].startswith(why)
    assert list(got["compiles"]["1/0"]["L['x']"].shape) == [6]
    res = run_cli("repro", log, "--all", "-o", tmp_path / "repro")
    assert res.exit_code in (0, 6) and "internal error" not in res.stderr, res.stderr


def test_rare_kinds_of_tensor_list_emit_and_load(tmp_path: Path) -> None:
    """Inputs torch handles with warnings, aborts or cannot save: each is listed, written by
    --emit (in the plain dictionary only when torch.load reads it back) and loaded exactly,
    with stderr clean. The records are edited: torch 2.13 logs none of these on this machine."""

    def edit(**fields: Any) -> Any:
        def apply(d: dict[str, Any]) -> None:
            d.update(fields)
            for k in [k for k, v in fields.items() if v is None]:
                del d[k]

        return apply

    log = _damaged(
        tmp_path,
        {
            (4, 0): edit(dtype="torch.int1"),  # torch.save cannot write it
            (6, 0): edit(dtype="torch.float8_e4m3fn", requires_grad=True),  # nor read it back
            (8, 0): edit(device="device(type='cuda', index=0)", is_leaf=False, requires_grad=True),
            (8, 1): edit(dtype="torch.complex32"),  # "ComplexHalf support is experimental"
            (15, 1): edit(layout="torch.sparse_csr", stride=None, storage=None),
            (10, 1): edit(dtype="torch.int64"),  # a Parameter that requires grad
        },
    )
    # --check: a fake non-leaf on a missing device, where torch aborts
    listing = run_cli("inputs", log, "--check")
    assert listing.exit_code == 0 and not listing.stderr, listing.stderr
    said = flat(listing.stdout)
    assert "L['x']: fake: faked as a leaf: this machine has no cuda:0" in said
    bias = "L['fn']._parameters['bias']"
    assert f"{bias}: requires_grad on int64 is impossible in torch: left off" in said
    failed = re.findall(r"L\['\w+'\]: not rebuilt[^:]*: [^:]*: [^.]*?logged", said)
    assert failed == ["L['y']: not rebuilt as fake: sparse_csr: its crow_indices are not logged"]
    for mode in ("random", "meta"):
        out = tmp_path / f"{mode}.pt"
        res = run_cli("inputs", log, "--emit", out, "--mode", mode)
        assert res.exit_code == 0 and "Warning" not in res.stderr, res.stderr
        plain = torch.load(out, weights_only=True)["compiles"]
        got = load_inputs(out)["compiles"]
        assert got["1/1"]["L['x']"].dtype == torch.int1 and list(got["1/1"]["L['x']"].shape) == [10]
        f8 = got["2/0"]["L['x']"]
        assert f8.dtype == torch.float8_e4m3fn and f8.requires_grad
        assert got["3/0"]["L['w']"].dtype == torch.complex32
        b = got["4/0"][bias]
        assert isinstance(b, torch.nn.Parameter) and b.dtype == torch.int64 and not b.requires_grad
        csr = got["5/0"]["L['y']"]
        assert csr.layout == torch.sparse_csr and list(csr.shape) == [3, 5]
        if mode == "random":  # left out of the plain dictionary, which torch.load reads
            assert "L['x']" not in plain["1/1"] and "L['x']" not in plain["2/0"]


def test_max_bytes_counts_a_subclass_storage_never_described(tmp_path: Path) -> None:
    # A subclass whose storage has no describe_storage record: the plain tensor that stands in
    # for it allocates everything it reaches (1 GiB here), which --max-bytes must count.
    sub = {
        "is_traceable_wrapper_subclass": True,
        "type": "<class 'somewhere.Else'>",
        "attrs": {},
        "storage": 99,
        "storage_offset": 1 << 28,
    }
    log = _damaged(tmp_path, {(15, 0): lambda d: d.update(sub)})
    res = run_cli(
        "inputs", log, "--compile-id", "5/0", "--emit", tmp_path / "x.pt", "--max-bytes", "64M"
    )
    assert res.exit_code == EXIT_REFUSED and "need 1.0 GiB of memory" in res.stderr, res.stderr
    assert not (tmp_path / "x.pt").exists()


def test_each_export_fakes_with_its_own_symbols(reports: dict[str, Report]) -> None:
    """The corpus's exports outside any compile each had a fake mode and a shape env: their
    fakes take the symbols each made (create_symbol after its describe records), not the
    first export's. L['x'] is dynamic in [2, 64] in the first, static in the second,
    s77 in [2, int_oo] (example 4) in the third, static in the last."""
    from torch import SymInt
    from torch._subclasses.fake_tensor import FakeTensor

    c = find_compile(reports["export"], "-/-")
    fakes = fake_rebuild(c).tensors

    def dims(name: str) -> list[Any]:
        t = fakes[name]
        assert isinstance(t, FakeTensor)
        env = t.fake_mode.shape_env
        return [
            d if isinstance(d, int) else (str(d), str(env.var_to_range[d.node.expr]))
            for d in t.shape
        ]

    assert dims("L['x']") == [("s77", "VR[2, 64]"), 3, 16, 16]
    assert dims("L['y']") == [("s17", "VR[2, 64]"), 5]
    assert dims("L['x'] [describer 2]") == [2, 3, 16, 16]
    assert dims("L['x'] [describer 3]") == [("s77", "VR[2, int_oo]"), 4]
    d0 = fakes["L['x'] [describer 3]"].shape[0]
    assert isinstance(d0, SymInt) and d0.node.hint == 4
    assert dims("L['x'] [describer 6]") == [5]
    # one compile's fake mode, as usual: one shape env for all its fakes
    one = fake_rebuild(find_compile(reports["export"], "0/0")).tensors
    modes = set()
    for t in one.values():
        assert isinstance(t, FakeTensor)
        modes.add(id(t.fake_mode))
    assert len(modes) == 1


def test_a_specialized_dim_fakes_as_its_value(reports: dict[str, Report]) -> None:
    """dynamic_shapes 4/0: dynamo made L['x'].size()[0] the symbol s77, then a guard refined
    its range to one value (symbolic_shape_specialization, 6), and the graph takes x as [6]:
    the fake is [6] too, not a symbol the graph does not expect."""
    c = find_compile(reports["dynamic_shapes"], "4/0")
    assert any(s.kind == "created" and s.source == "L['x'].size()[0]" for s in c.symbols)
    assert any(s.kind == "specialized" and s.value == "6" for s in c.symbols)
    sizes = next((g.meta or {})["sizes"] for g in c.graphs if g.kind == "dynamo_output_graph")
    assert sizes["l_x_"][0] == "6"
    x = fake_rebuild(c).tensors["L['x']"]
    assert x.shape[0] == 6 and isinstance(x.shape[0], int)


def test_inputs_logged_by_torch26_rebuild_as_the_program_made_them() -> None:
    """The 2.6 fixture's `(x @ v)` compile, rebuilt by this torch: x = randn(5, 4) with a
    dynamic batch dim, v = w[:, 1:5] a view of Parameter w = randn(4, 6) (make_fixtures.py)."""
    report = load(FIXTURES / "torch26.log")
    c = find_compile(report, "5/0")
    real = real_inputs(c, mode="random").tensors
    fake = fake_rebuild(c).tensors
    for got in (real, fake):
        x, v = got["L['x']"], got["L['v']"]
        assert [fake_dim(d) for d in x.shape] == [5, 4] and x.stride() == (4, 1)
        assert (x.requires_grad, x.is_leaf) == (False, True)
        assert tuple(v.shape) == (4, 4) and v.stride() == (6, 1)
        assert v.storage_offset() == 1 and v._base is not None
        assert (v.requires_grad, v.is_leaf) == (True, False)
        assert tuple(v._base.shape) == (4, 6) and isinstance(v._base, torch.nn.Parameter)
    assert not isinstance(fake["L['x']"].shape[0], int)  # the dim marked dynamic stays a symbol


def test_a_jagged_tensor_logged_by_torch24_keeps_its_min_and_max_seqlen() -> None:
    """torch 2.4 logs a jagged tensor's min/max seqlen in its ctx (`metadata_cache`), not as
    inner tensors: the rebuilt offsets fit them (the program's rows: 2, 3 and 6 of 11)."""
    from torch.nested._internal.nested_tensor import NestedTensor

    report = load(FIXTURES / "torch24.log")
    c = find_compile(report, "2/0")
    (t,) = [i.tensor for i in c.inputs if i.source == "L['n']"]
    assert "'metadata_cache': {'max_seqlen': 6, 'min_seqlen': 2}" in t.fields["ctx"]
    got = real_inputs(c)
    n = got.tensors["L['n']"]
    assert isinstance(n, NestedTensor)
    lengths = n.offsets().diff().tolist()
    assert tuple(n.values().shape) == (11, 5) and len(lengths) == 3 and sum(lengths) == 11
    assert (min(lengths), max(lengths)) == (2, 6)
    assert got.notes.get("L['n']", []) == [] and got.failed == {}


def test_a_torch_without_metatensordesc_says_it_cannot_fake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch 2.3 has no MetaTensorDesc: with it installed, every fake failed with `AttributeError:
    module ... has no attribute 'MetaTensorDesc'`. It says what is missing, and real tensors
    (which do not need it) are still made. (Checked by hand under torch 2.3.1; here the class is
    taken away from this torch.)"""
    import torch._subclasses.meta_utils as meta_utils

    c = find_compile(load(FIXTURES / "demo.log"), "0/0")
    monkeypatch.delattr(meta_utils, "MetaTensorDesc")
    got = fake_rebuild(c)
    assert not got.tensors and got.failed
    assert set(got.failed.values()) == {
        f"torch {torch.__version__} cannot fake a described tensor "
        "(no MetaTensorDesc: torch 2.4 or newer can)"
    }
    assert real_inputs(c, mode="meta").tensors.keys() == got.failed.keys()
