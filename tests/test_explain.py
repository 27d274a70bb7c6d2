"""Why each recompile happened, on real logs: the failed guard and the input that changed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus, report_json, run_cli
from runs import traces  # noqa: F401  (session fixture: the program run under TORCH_TRACE)

from tlview.analyze.baseline import every_attempt
from tlview.analyze.changes import change_text
from tlview.index.recompiles import limit_text
from tlview.load import read as load
from tlview.model import Compile, CompileId, InputChange

# Dtype names in guard failures ("expected Half, actual BFloat16") as torch reprs them.
GUARD_DTYPES = {
    "Half": "torch.float16",
    "BFloat16": "torch.bfloat16",
    "Float": "torch.float32",
    "Double": "torch.float64",
    "Long": "torch.int64",
    "Int": "torch.int32",
    "Short": "torch.int16",
    "Char": "torch.int8",
    "Byte": "torch.uint8",
    "Bool": "torch.bool",
    "ComplexFloat": "torch.complex64",
    "ComplexDouble": "torch.complex128",
}
_SIZE = re.compile(r"tensor '(.+?)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
_DTYPE = re.compile(r"tensor '(.+?)' dtype mismatch\. expected (\w+), actual (\w+)")
_GRAD = re.compile(r"tensor '(.+?)' requires_grad mismatch\. expected requires_grad=(\d)")


def by_key(path: Path) -> dict[str, Compile]:
    return {c.key: c for c in load(path).attempts}


def source(name: str) -> str:
    """The dynamo source of a tensor named in a guard: x -> L['x'], args[0] -> L['args'][0]."""
    m = re.fullmatch(r"(\w+)(.*)", name)
    assert m, name
    return f"L['{m.group(1)}']{m.group(2)}"


def dtype(name: str) -> str:
    return GUARD_DTYPES.get(name, "torch." + name.lower())


def expected_change(reason: str) -> InputChange | None:
    """The input change a guard failure says happened, or None for other guards."""
    if m := _SIZE.search(reason):
        return InputChange(source(m[1]), f"size[{m[2]}]", int(m[3]), int(m[4]))
    if m := _DTYPE.search(reason):
        return InputChange(source(m[1]), "dtype", dtype(m[2]), dtype(m[3]))
    if m := _GRAD.search(reason):
        return InputChange(source(m[1]), "requires_grad", m[2] == "1", m[2] != "1")
    return None


@pytest.mark.parametrize("folder", ["mlp_aot_eager", "dynamic_shapes", "dtypes_zoo", "subclasses"])
def test_every_guard_failure_names_the_input_that_changed(folder: str) -> None:
    """The guard that failed against the previous compile names a source and field; we find it."""
    checked = 0
    for c in load(corpus(folder)).attempts:
        r = c.recompile
        if r is None:
            continue
        assert r.previous is not None and r.compared, c.key
        prev = str(CompileId.parse(r.previous).base)
        against_prev = [x for x in r.reasons if x.startswith(f"{prev}: ")]
        assert against_prev, (c.key, r.reasons)
        want = expected_change(against_prev[0])
        if want is not None:
            assert want in r.input_changes, (c.key, against_prev[0], r.input_changes)
            checked += 1
    assert checked >= 2


def test_mlp_recompile_goes_on_the_final_attempt() -> None:
    cs = by_key(corpus("mlp_aot_eager"))
    assert cs["0/1"].status == "restarted" and cs["0/1"].recompile is None
    assert cs["0/0_1"].recompile is None and cs["1/0"].recompile is None
    r = cs["0/1_1"].recompile
    assert r is not None
    assert r.previous == "0/0_1"  # the final attempt of the previous compile, whose guards failed
    # The artifact is on attempt 0, the metrics on attempt 1: one reason, said once.
    assert r.reasons == ["0/0: tensor 'x' size mismatch at index 0. expected 8, actual 12"]
    assert r.input_changes == [InputChange("L['x']", "size[0]", 8, 12)]
    assert not r.limit_hit
    r = cs["1/1"].recompile
    assert r is not None and r.previous == "1/0"
    assert r.input_changes == [InputChange("L['h']", "size[0]", 8, 12)]


def test_dynamic_shapes_dims_that_became_dynamic() -> None:
    cs = by_key(corpus("dynamic_shapes"))
    g = cs["1/1"].recompile
    assert g is not None
    # x was already dynamic in dim 0 (only its example value changes, no guard failing on
    # it); w changed size and became dynamic.
    assert g.input_changes == [
        InputChange("L['x']", "hint[0]", 10, 20),
        InputChange("L['w']", "size[0]", 3, 5),
        InputChange("L['w']", "dynamic[0]", 3, "s15"),
    ]
    h = cs["2/1"].recompile
    assert h is not None
    assert h.input_changes == [
        InputChange("L['a']", "size[0]", 1, 2),
        InputChange("L['a']", "dynamic[0]", 1, "s97"),
    ]
    # f was compiled dynamic: dim 0 of y and x changed, and stayed symbolic.
    f = cs["0/1"].recompile
    assert f is not None
    assert f.reasons[0].startswith("0/0: 2 <= y.size()[0] <= 4")
    assert f.input_changes == [
        InputChange("L['y']", "hint[0]", 3, 6),
        InputChange("L['x']", "hint[0]", 3, 6),
    ]
    assert change_text(g.input_changes[2]) == "L['w'] dim 0 became dynamic: 3 -> s15"
    assert change_text(f.input_changes[0]) == "L['y'] dim 0 (dynamic in both) example: 3 -> 6"


def test_dtypes_zoo_each_recompile_is_one_dtype_change() -> None:
    cs = by_key(corpus("dtypes_zoo"))
    chain = [cs[f"0/{i}"].recompile for i in range(1, 10)]
    got = [(r.input_changes[0].before, r.input_changes[0].after) for r in chain if r]
    assert got == [
        ("torch.float16", "torch.bfloat16"),
        ("torch.bfloat16", "torch.float64"),
        ("torch.float64", "torch.int64"),
        ("torch.int64", "torch.int32"),
        ("torch.int32", "torch.int16"),
        ("torch.int16", "torch.int8"),
        ("torch.int8", "torch.uint8"),
        ("torch.uint8", "torch.complex64"),
        ("torch.complex64", "torch.complex128"),
    ]
    assert all(r is not None and len(r.input_changes) == 1 for r in chain)
    f8 = cs["2/1"].recompile
    assert f8 is not None
    assert f8.input_changes == [
        InputChange("L['x']", "dtype", "torch.float8_e4m3fn", "torch.float8_e5m2")
    ]
    empty = cs["4/1"].recompile
    assert empty is not None
    assert empty.input_changes == [InputChange("L['y']", "size[0]", 2, 0)]


def test_subclass_type_layout_and_grad_changes() -> None:
    cs = by_key(corpus("subclasses"))
    r = cs["0/1"].recompile
    assert r is not None
    assert r.input_changes == [InputChange("L['x']", "requires_grad", False, True)]
    r = cs["2/1"].recompile
    assert r is not None
    got = {(x.source, x.field): (x.before, x.after) for x in r.input_changes}
    assert got[("L['fn']._parameters['weight']", "type")] == (
        None,
        "torch.testing._internal.two_tensor.TwoTensor",
    )
    assert got[("L['args'][0]", "layout")] == ("torch.jagged", "torch.strided")
    assert got[("L['args'][0]", "ndim")] == (3, 2)
    assert got[("L['args'][0]", "requires_grad")] == (True, False)


def test_json_recompile_record() -> None:
    result = run_cli("report", corpus("mlp_aot_eager"), "--format", "json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    cs = {c["key"]: c for c in every_attempt(data)}
    assert cs["0/0_1"]["recompile"] is None
    assert cs["0/1"]["recompile"] is None
    assert cs["0/1_1"]["recompile"] == {
        "previous": "0/0_1",
        "reasons": ["0/0: tensor 'x' size mismatch at index 0. expected 8, actual 12"],
        "input_changes": [{"source": "L['x']", "field": "size[0]", "before": 8, "after": 12}],
        "inputs_compared": True,
        "limit_hit": False,
        "limit": None,
        "retry": False,
    }


def test_terminal_recompiles_table_says_what_changed() -> None:
    result = run_cli("report", corpus("dtypes_zoo"))
    assert result.exit_code == 0, result.output
    section = result.stdout.split("Recompiles", 1)[1]
    assert "what changed" in section
    assert "L['x'] dtype: float16 -> bfloat16" in section
    assert "L['y'] size[0]: 2 -> 0" in section
    one = run_cli("report", corpus("mlp_aot_eager"), "--compile-id", "0/1_1")
    assert "changed since 0/0_1: L['x'] size[0]: 8 -> 12" in one.stdout


@pytest.mark.slow
def test_recompile_limit_hit_is_called_out(traces: dict[str, Path]) -> None:  # noqa: F811
    cs = by_key(traces["base"])
    # g is compiled for float32 and int32; int64 is one compile past recompile_limit=2.
    hit = cs["1/2"]
    assert hit.status == "failed" and limit_text(hit) == "recompile_limit (2)"
    # it logged no name and no stack: it is named as the frame's other compiles
    assert (hit.function, hit.file, hit.source_line) == (
        "g",
        cs["1/1"].file,
        cs["1/1"].source_line,
    ) and hit.file is not None
    r = hit.recompile
    assert r is not None and r.limit_hit and r.previous == "1/1"
    assert r.reasons == [
        "1/1: tensor 'a' dtype mismatch. expected Int, actual Long",
        "1/0: tensor 'a' dtype mismatch. expected Float, actual Long",
    ]
    assert not r.compared and r.input_changes == []  # dynamo gave up before tracing
    before = cs["1/1"].recompile
    assert before is not None and not before.limit_hit
    assert before.input_changes == [InputChange("L['a']", "dtype", "torch.float32", "torch.int32")]
    text = run_cli("report", traces["base"]).stdout
    assert "1/2: frame 1 (g) hit recompile_limit (2): dynamo stopped compiling it" in text
    data = json.loads(run_cli("report", traces["base"], "--format", "json").stdout)
    rec = {c["key"]: c for c in every_attempt(data)}["1/2"]["recompile"]
    assert rec["limit_hit"] is True and rec["limit"] == "recompile_limit (2)"
    assert rec["inputs_compared"] is False


def test_a_refused_recompile_names_its_failed_guard() -> None:
    """error_on_recompile: torch logs no recompile_reasons, only a RecompileError whose text
    names the failed guard; the Recompiles table says it, not "(no reason logged)"."""
    log = FIXTURES / "refused.log"
    data = report_json(log)
    (c,) = [c for c in every_attempt(data) if c["key"] == "0/1"]
    assert c["status"] == "failed" and c["fail_type"] == "RecompileError"
    assert c["recompile_reasons"] == []
    assert c["recompile"]["reasons"] == ["0/0: tensor 'x' rank mismatch. expected 1, actual 3"]
    text = run_cli("report", log).stdout
    table = text[text.index("Recompiles") : text.index("Failures")]
    assert "tensor 'x' rank mismatch" in table and "no reason logged" not in table
    row = next(ln for ln in table.splitlines() if ln.startswith("0/1 "))
    assert "| 0/0 " in row  # made at: the compile whose guard it was (no stack logged)


def test_reasons_of_attempts_are_kept_whole() -> None:
    """A guard that failed with 3 is not the one that failed with 32: each reason is kept
    unless the very same one came before (a restart's metrics repeat its first attempt's)."""
    from tlview.index.recompiles import _reasons

    base = CompileId(0, 1, 0, None, 0)
    first = Compile(base, "x.log", recompile_reasons=["0/0: L['x'].size()[0] == 32"])
    again = Compile(
        CompileId(0, 1, 1, None, 0),
        "x.log",
        recompile_reasons=["0/0: L['x'].size()[0] == 32", "0/0: L['x'].size()[0] == 3"],
    )
    assert _reasons([first, again]) == [
        "0/0: L['x'].size()[0] == 32",
        "0/0: L['x'].size()[0] == 3",
    ]


def test_a_jagged_inner_attribute_recompile_names_the_jagged_input() -> None:
    """jagged_recompile.log: the guard names `x._max_seqlen_tensor` (a tensor, now None), an
    inner tensor of the jagged input L['x']: the change is L['x']'s, not "no input changed"."""
    cs = by_key(FIXTURES / "jagged_recompile.log")
    r = cs["0/1"].recompile
    assert r is not None and r.compared
    assert "x._max_seqlen_tensor" in r.reasons[0]
    assert [change_text(x) for x in r.input_changes] == [
        "L['x'] _max_seqlen_tensor: a tensor -> None"
    ]
