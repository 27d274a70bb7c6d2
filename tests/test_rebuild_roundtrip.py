"""Round trip: compile functions with known inputs under TORCH_TRACE, rebuild them from the log.

One torch subprocess writes the log and the metadata of its real inputs; every test here compares
the tensors rebuilt from the log (real, fake, emitted and loaded back) with those originals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import fake_dim

pytestmark = pytest.mark.slow  # a torch program writes the log
torch = pytest.importorskip("torch")

from tlview import real_inputs
from tlview.load import read as load
from tlview.model import Compile, Report
from tlview.rebuild import ZERO_NOTE, fake_rebuild, plan_compile
from tlview.tensors.emit import emit_file, load_inputs
from tlview.tensors.options import RebuildOptions

PROGRAM = r"""
import json, sys
import torch
import torch.nn as nn
from torch.testing._internal.two_tensor import TwoTensor
from mysub import MyTwo

out = {}
groups = {}


def meta(t):
    g = groups.setdefault(t.untyped_storage()._cdata, len(groups))
    d = {"size": [s if isinstance(s, int) else str(s) for s in t.shape], "dtype": str(t.dtype),
         "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
         "param": isinstance(t, nn.Parameter), "type": type(t).__name__}
    if t.layout == torch.strided and not t.is_nested:
        d.update(stride=list(t.stride()), offset=t.storage_offset(), storage=g,
                 view=t._is_view(), conj=t.is_conj(), neg=t.is_neg(),
                 storage_bytes=t.untyped_storage().nbytes())
    if t.is_nested:
        d.update(min_seqlen=t._get_min_seqlen(), max_seqlen=t._get_max_seqlen(),
                 values=list(t.values().shape))
    if t.grad is not None:
        d["grad"] = meta(t.grad)
    return d


def case(name, fn, args, **kw):
    groups.clear()
    out[name] = {"function": fn.__name__,
                 "inputs": {f"L['{k}']": meta(t) for k, t in args.items()}}
    torch.compile(fn, backend="eager", **kw)(**args)


def case_contiguous(x): return x + 1
case("contiguous", case_contiguous, {"x": torch.randn(3, 4)})

base = torch.randn(6, 8)
def case_views(t, s, o): return t.sum() + s.sum() + o.sum()
case("views", case_views, {"t": base.t(), "s": base[1:, ::2], "o": base.view(-1)[5:15]})

st = torch.randn(10)
not_a_view = torch.empty(0).set_(st.untyped_storage(), 2, (3,), (1,))
def case_shared(a, b, c): return a * 2 + b.sum() + c.sum()
case("shared", case_shared, {"a": st[:5], "b": st[5:], "c": not_a_view})

def case_channels_last(x): return x * 2
case("channels_last", case_channels_last,
     {"x": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)})

def mk(dt):
    if dt.is_floating_point and dt.itemsize == 1: return torch.randn(5).to(dt)
    if dt == torch.bool: return torch.rand(5) > 0.5
    if not dt.is_floating_point and not dt.is_complex: return torch.randint(0, 5, (5,), dtype=dt)
    return torch.randn(5, dtype=dt)
def case_dtypes(bf, h, f8a, f8b, c64, c128, b, i8, i16, i32, i64, u8, d):
    return (bf.float().sum() + h.float().sum() + c64.abs().sum() + c128.abs().sum() + b.sum()
            + i8.sum() + i16.sum() + i32.sum() + i64.sum() + u8.sum() + d.sum()
            + f8a.size(0) + f8b.size(0))
case("dtypes", case_dtypes, {k: mk(dt) for k, dt in {
    "bf": torch.bfloat16, "h": torch.float16, "f8a": torch.float8_e4m3fn,
    "f8b": torch.float8_e5m2, "c64": torch.complex64, "c128": torch.complex128, "b": torch.bool,
    "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "u8": torch.uint8, "d": torch.float64}.items()})

f32 = torch.randn(4)
def case_two_dtypes(f, i): return f * 2 + i.size(0)
case("two_dtypes", case_two_dtypes, {"f": f32, "i": f32.view(torch.int32)})

z = torch.randn(4, 3)
z.untyped_storage().resize_(0)
def case_zero(e, z): return e + z.size(0)
case("zero", case_zero, {"e": torch.randn(0, 3), "z": z})

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("scale", torch.ones(3))
    def forward(self, x): return self.lin(x) * self.scale
m = M()
groups.clear()
xin = torch.randn(2, 4)
out["module"] = {"function": "forward", "inputs": {
    "L['self']._modules['lin']._parameters['weight']": meta(m.lin.weight),
    "L['self']._modules['lin']._parameters['bias']": meta(m.lin.bias),
    "L['self']._buffers['scale']": meta(m.scale),
    "L['x']": meta(xin)}}
torch.compile(m, backend="eager")(xin)

w = torch.randn(3, requires_grad=True)
p = nn.Parameter(torch.randn(3))
p.grad = torch.randn(3)
def case_grads(h, p): return h * p
case("grads", case_grads, {"h": w * 2, "p": p})

def case_bits(c, n): return c * 2 + n.sum()
case("bits", case_bits, {"c": torch.randn(3, dtype=torch.complex64).conj(),
                         "n": torch.randn(3, dtype=torch.complex64).conj().imag})

def case_two_tensor(t): return t * 2
case("two_tensor", case_two_tensor, {"t": TwoTensor(torch.randn(3, 4), torch.randn(3, 4))})

def case_my_two(t): return t * 2
case("my_two", case_my_two, {"t": MyTwo(torch.randn(2, 2), torch.randn(2, 2))})

nt = torch.nested.nested_tensor(
    [torch.randn(2, 8), torch.randn(5, 8), torch.randn(3, 8)], layout=torch.jagged)
def case_jagged(n): return n.sin()
case("jagged", case_jagged, {"n": nt})

def case_dynamic(x, y): return x.sum(0) + y
case("dynamic", case_dynamic, {"x": torch.randn(5, 7), "y": torch.randn(7)}, dynamic=True)

md = torch.randn(6, 3)
torch._dynamo.mark_dynamic(md, 0)
def case_mark_dynamic(x): return x * 2
case("mark_dynamic", case_mark_dynamic, {"x": md})

def case_restart(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1
case("restart", case_restart, {"x": torch.randn(4)})

mu = torch.randn(6, 3)
torch._dynamo.decorators.mark_unbacked(mu, 0)
def case_mark_unbacked(x): return x * 2
case("mark_unbacked", case_mark_unbacked, {"x": mu})

json.dump(out, open(sys.argv[1], "w"), indent=1)
"""

MYSUB = '''
from torch.testing._internal.two_tensor import TwoTensor


class MyTwo(TwoTensor):
    """A traceable wrapper subclass that lives outside torch."""

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return MyTwo(inner["a"], inner["b"], outer_size, outer_stride)
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, dict[str, Any], Path]:
    """The log and the originals' metadata of one program that compiles every case."""
    d = tmp_path_factory.mktemp("roundtrip")
    (d / "prog.py").write_text(PROGRAM)
    (d / "mysub.py").write_text(textwrap.dedent(MYSUB))
    env = {**os.environ, "TORCH_TRACE": str(d / "trace"), "PYTHONPATH": str(d)}
    proc = subprocess.run(
        [sys.executable, str(d / "prog.py"), str(d / "originals.json")],
        cwd=d,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load(d / "trace"), json.loads((d / "originals.json").read_text()), d


def compiles_of(rep: Report, function: str) -> list[Compile]:
    return [c for c in rep.attempts if c.function == function]


def only(rep: Report, function: str) -> Compile:
    got = compiles_of(rep, function)
    assert len(got) == 1, [c.key for c in got]
    return got[0]


def check(name: str, t: Any, want: dict[str, Any], fake: bool = False) -> None:
    """The rebuilt tensor has the original's metadata (sizes as logged hints for fakes)."""
    assert type(t).__name__ in (want["type"], "FakeTensor"), (name, type(t))
    assert [fake_dim(d) for d in t.shape] == _mask(want["size"]), name
    assert str(t.dtype) == want["dtype"], name
    assert t.requires_grad == want["requires_grad"], name
    assert t.is_leaf == want["is_leaf"], name
    assert isinstance(t, torch.nn.Parameter) == want["param"], name
    if "stride" in want and want["type"] in ("Tensor", "Parameter"):
        assert list(t.stride()) == want["stride"], name
        assert t.storage_offset() == want["offset"], name
        assert t._is_view() == want["view"], name
        assert t.is_conj() == want["conj"], name
        assert t.is_neg() == want["neg"], name
        if want["storage_bytes"] == 0:
            assert t.untyped_storage().nbytes() == 0, name
    grad = t.grad if t.is_leaf else None  # a non-leaf has no .grad (torch warns on access)
    if "grad" in want:
        assert grad is not None, name
        check(f"{name}.grad", grad, want["grad"], fake)
    else:
        assert grad is None, name


def _mask(size: list[Any]) -> list[Any]:
    """Nested ints (`j1`) get a fresh id in every process: compare them as `j`."""
    return ["j" if isinstance(d, str) and d.startswith("j") else d for d in size]


def check_sharing(tensors: dict[str, Any], want: dict[str, dict[str, Any]]) -> None:
    """Two inputs share a storage exactly when the originals did."""
    plain = [s for s, w in want.items() if "storage" in w and w["type"] in ("Tensor", "Parameter")]
    for a in plain:
        for b in plain:
            same = tensors[a].untyped_storage()._cdata == tensors[b].untyped_storage()._cdata
            assert same == (want[a]["storage"] == want[b]["storage"]), (a, b)


CASES = [
    "contiguous",
    "views",
    "shared",
    "channels_last",
    "dtypes",
    "two_dtypes",
    "zero",
    "module",
    "grads",
    "bits",
    "two_tensor",
    "jagged",
    "dynamic",
    "mark_dynamic",
    "mark_unbacked",
]


@pytest.mark.parametrize("case", CASES)
def test_real_matches_original(run: Any, case: str) -> None:
    rep, originals, _ = run
    want = originals[case]
    c = only(rep, want["function"])
    got = real_inputs(c, seed=1)
    assert got.failed == {}
    assert set(got.tensors) == set(want["inputs"])
    for src, w in want["inputs"].items():
        check(src, got.tensors[src], w)
    check_sharing(got.tensors, want["inputs"])
    if case == "zero":  # z's storage was freed: rebuilt so, and said (reading it would crash)
        assert got.notes.get("L['z']") == [ZERO_NOTE] and "L['e']" not in got.notes


@pytest.mark.parametrize("case", CASES)
def test_fake_matches_original(run: Any, case: str) -> None:
    from torch._subclasses.fake_tensor import FakeTensor

    rep, originals, _ = run
    want = originals[case]
    c = only(rep, want["function"])
    got = fake_rebuild(c)
    assert got.failed == {}
    assert set(got.tensors) == set(want["inputs"])
    for src, w in want["inputs"].items():
        t = got.tensors[src]
        if w["type"] in ("Tensor", "Parameter"):
            assert isinstance(t, FakeTensor), src
        if case in ("dynamic", "mark_dynamic", "mark_unbacked"):
            continue  # symbolic sizes: see test_fakes_carry_the_logged_symbols
        check(src, t, w, fake=True)
    check_sharing(got.tensors, want["inputs"])


def test_fakes_carry_the_logged_symbols(run: Any) -> None:
    rep, originals, _ = run
    # dynamic=True: every dim is a symbol, duck-sized dims share one, named as in the log.
    c = only(rep, originals["dynamic"]["function"])
    created = {s.source: s.symbol for s in c.symbols if s.kind == "created"}
    fakes = fake_rebuild(c).tensors
    x, y = fakes["L['x']"], fakes["L['y']"]
    assert [str(d) for d in x.shape] == [created["L['x'].size()[0]"], created["L['x'].size()[1]"]]
    assert str(y.shape[0]) == str(x.shape[1])  # duck sizing: 7 and 7 share a symbol
    sizes = next((g.meta or {})["sizes"] for g in c.graphs if g.kind == "dynamo_output_graph")
    assert [str(d) for d in x.shape] == [str(d) for d in sizes["l_x_"]]
    assert [str(d) for d in y.shape] == [str(d) for d in sizes["l_y_"]]
    from torch import SymInt

    d0, d1 = x.shape[0], x.shape[1]
    assert isinstance(d0, SymInt) and isinstance(d1, SymInt)
    assert d0.node.hint == 5 and d1.node.hint == 7
    # mark_dynamic: only dim 0 is a symbol, with the logged name; dim 1 stays 3.
    c = only(rep, originals["mark_dynamic"]["function"])
    sym = next(s.symbol for s in c.symbols if s.source == "L['x'].size()[0]")
    x = fake_rebuild(c).tensors["L['x']"]
    assert str(x.shape[0]) == sym and x.shape[1] == 3
    # mark_unbacked: the graph sizes say u0; the fake's dim 0 is a fresh unbacked symbol.
    c = only(rep, originals["mark_unbacked"]["function"])
    x = fake_rebuild(c).tensors["L['x']"]
    assert str(x.shape[0]) == "u0" and x.shape[1] == 3
    # the jagged tensor's ragged dim is a symbol over a nested int, as dynamo made it.
    c = only(rep, originals["jagged"]["function"])
    created = {s.source: s.symbol for s in c.symbols if s.kind == "created"}
    n = fake_rebuild(c).tensors["L['n']"]
    assert str(n.shape[1]) == created["L['n'].size()[1]"]


def test_views_keep_their_base(run: Any) -> None:
    rep, originals, _ = run
    got = real_inputs(only(rep, originals["views"]["function"])).tensors
    t, s, o = got["L['t']"], got["L['s']"], got["L['o']"]
    assert t._base is s._base is o._base
    base = t._base
    assert base is not None and tuple(base.shape) == (6, 8)
    # the values are the base's: a view reads what its base holds
    assert torch.equal(t, base.t())


def test_random_values_per_dtype_and_seed(run: Any) -> None:
    rep, originals, _ = run
    c = only(rep, originals["dtypes"]["function"])
    a, b = real_inputs(c, seed=3).tensors, real_inputs(c, seed=3).tensors
    other = real_inputs(c, seed=4).tensors
    for src in a:
        assert torch.equal(a[src].view(torch.uint8), b[src].view(torch.uint8)), src
    assert not torch.equal(a["L['d']"], other["L['d']"])
    ints = a["L['i64']"]
    assert int(ints.min()) >= 0 and int(ints.max()) < 8
    assert set(a["L['b']"].tolist()) <= {True, False}
    assert a["L['c64']"].imag.abs().sum() > 0
    f8 = a["L['f8a']"].float()
    assert torch.isfinite(f8).all() and f8.abs().sum() > 0
    zeros = real_inputs(c, mode="zeros").tensors
    assert all(not zeros[s].view(torch.uint8).any() for s in zeros)
    meta = real_inputs(c, mode="meta").tensors
    assert {t.device.type for t in meta.values()} == {"meta"}


def test_jagged_offsets_are_valid(run: Any) -> None:
    from torch.nested._internal.nested_tensor import NestedTensor

    rep, originals, _ = run
    want = originals["jagged"]["inputs"]["L['n']"]
    n = real_inputs(only(rep, originals["jagged"]["function"])).tensors["L['n']"]
    assert isinstance(n, NestedTensor)
    off = n.offsets().tolist()
    lens = [b - a for a, b in zip(off, off[1:], strict=False)]
    assert off[0] == 0 and off[-1] == want["values"][0] and len(lens) == 3
    assert min(lens) == want["min_seqlen"] and max(lens) == want["max_seqlen"]
    assert n._get_min_seqlen() == want["min_seqlen"]
    assert n._get_max_seqlen() == want["max_seqlen"]
    assert n._is_view() and n._base is not None  # a view of its values
    assert list(n._base.shape) == want["values"]
    assert list(n.values().shape) == want["values"]


def test_subclass_outside_torch_needs_allow_import(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep, originals, d = run
    c = only(rep, originals["my_two"]["function"])
    got = real_inputs(c)
    t = got.tensors["L['t']"]
    assert type(t) is torch.Tensor and list(t.shape) == [2, 2]
    assert "pass --allow-import mysub" in got.notes["L['t']"][0]
    assert "mysub" not in sys.modules
    fake = fake_rebuild(c)
    assert "pass --allow-import mysub" in fake.notes["L['t']"][0]
    monkeypatch.syspath_prepend(str(d))
    got = real_inputs(c, allow_import=["mysub"])
    assert type(got.tensors["L['t']"]).__name__ == "MyTwo" and got.notes == {}
    fake = fake_rebuild(c, allow_import=["mysub"])
    assert type(fake.tensors["L['t']"]).__name__ == "MyTwo" and fake.notes == {}


def test_restarted_compile_rebuilds_every_attempt(run: Any) -> None:
    rep, originals, _ = run
    attempts = compiles_of(rep, originals["restart"]["function"])
    assert sorted(c.key for c in attempts) == ["15/0", "15/0_1"]
    assert {c.status for c in attempts} == {"restarted", "graph_break"}
    for c in attempts:
        got = real_inputs(c)
        check("L['x']", got.tensors["L['x']"], originals["restart"]["inputs"]["L['x']"])
        assert list(fake_rebuild(c).tensors["L['x']"].shape) == [4]


def test_emit_and_load_round_trip(run: Any, tmp_path: Path) -> None:
    rep, originals, d = run
    chosen = [only(rep, originals[k]["function"]) for k in CASES]
    out = tmp_path / "example_inputs.pt"
    summary = emit_file(rep, chosen, str(out), RebuildOptions(seed=2))
    assert summary.endswith("0 failed")
    exact = load_inputs(out)
    assert exact["format"] == "tlview.inputs/1" and exact["torch_version"] == torch.__version__
    direct = {c.key: real_inputs(c, seed=2).tensors for c in chosen}
    for k, c in zip(CASES, chosen, strict=True):
        want = originals[k]["inputs"]
        got = exact["compiles"][c.key]
        assert set(got) == set(want), k
        for src, w in want.items():
            check(src, got[src], w)
            if w["type"] in ("Tensor", "Parameter"):  # the saved values are the rebuilt ones
                a, b = got[src].detach(), direct[c.key][src].detach()
                if a.untyped_storage().nbytes():
                    assert torch.equal(
                        a.resolve_conj().resolve_neg(), b.resolve_conj().resolve_neg()
                    )
        check_sharing(got, want)
    # weights_only: every plain and Parameter tensor, with sharing where torch.save keeps it
    plain = torch.load(out, weights_only=True)["compiles"]
    for k, c in zip(CASES, chosen, strict=True):
        for src, w in originals[k]["inputs"].items():
            if w["type"] not in ("Tensor", "Parameter"):
                assert src not in plain[c.key]
                continue
            t = plain[c.key][src]
            assert list(t.shape) == w["size"] and list(t.stride()) == w["stride"], (k, src)
            assert t.storage_offset() == w["offset"] and str(t.dtype) == w["dtype"]
            assert isinstance(t, torch.nn.Parameter) == w["param"]
    shared = plain[only(rep, "case_shared").key]
    assert len({t.untyped_storage()._cdata for t in shared.values()}) == 1


def test_meta_emit_loads_back_on_meta(run: Any, tmp_path: Path) -> None:
    """`--mode meta` then `load_inputs`: every tensor on meta, the freed storage too."""
    rep, originals, _ = run
    chosen = [only(rep, originals[k]["function"]) for k in ("zero", "shared", "views")]
    out = tmp_path / "meta_inputs.pt"
    emit_file(rep, chosen, str(out), RebuildOptions(mode="meta"))
    exact = load_inputs(out)
    assert exact["mode"] == "meta"
    for k, c in zip(("zero", "shared", "views"), chosen, strict=True):
        got = exact["compiles"][c.key]
        on = {src: t.device.type for src, t in got.items()}  # no tensor repr: a freed one crashes
        assert on == dict.fromkeys(originals[k]["inputs"], "meta"), k
        for src, w in originals[k]["inputs"].items():
            check(src, got[src], w)
        check_sharing(got, originals[k]["inputs"])
    z = exact["compiles"][chosen[0].key]["L['z']"]
    assert z.untyped_storage().nbytes() == 0 and list(z.shape) == [4, 3]
    # torch.load alone: a meta tensor comes back on a storage of its own at offset 0, and a
    # non-leaf as a leaf; each such tensor has a note saying so.
    grads = only(rep, originals["grads"]["function"])
    emit_file(rep, [*chosen, grads], str(out), RebuildOptions(mode="meta"), force=True)
    raw = torch.load(out, weights_only=True)
    views = chosen[2].key
    for src, w in originals["views"]["inputs"].items():
        said = " ".join(raw["notes"].get(views, {}).get(src, []))
        got = raw["compiles"][views][src]
        if w["offset"]:
            assert got.storage_offset() == 0 and f"storage offset 0, not {w['offset']}" in said
        assert "not the one it shares with" in said, src  # t, s and o share their base
    assert "not a leaf" in " ".join(raw["notes"][grads.key]["L['h']"])


def test_plans_need_no_torch_types(run: Any) -> None:
    """Plans hold plain data: what `--emit` writes beside the tensors for `load_inputs`."""
    rep, originals, _ = run
    for g in plan_compile(only(rep, originals["views"]["function"])):
        for p in g.tensors.values():
            json.dumps(p.as_dict())
