"""`tlview repro --check-accuracy` and the values the log holds (issue 46): graphs of
higher-order ops dynamo cannot trace again, an optimizer step whose work is all in place, a
graph with nothing to compare, an op of the program's own script, and inputs whose values the
log recorded. The logs are written by torch (tests/fixtures/make_fixtures.py: hop_accuracy,
adam_step, script_op, logged_scalars, dynamic)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from helpers import FIXTURES, run_cli

import tlview

pytestmark = pytest.mark.slow  # repros are written and run with torch
torch = pytest.importorskip("torch")

EXIT_NO_REPRO = 6
NOTHING = "nothing to compare: the graph returns nothing and changes no input in place"
NONE = {"outputs": 0, "changed_inputs": 0, "logged_values": 0}
EPS = "___as_tensor(L['self']._modules['ln'].eps)"
DROPOUT = "___as_tensor(L['self']._modules['attn'].dropout)"


def _all(log: str, out: Path, *extra: str) -> tuple[Result, dict[str, Any]]:
    """`tlview repro LOG --all -o OUT --run --check-accuracy EXTRA`: its result and summary."""
    res = run_cli("repro", FIXTURES / log, "--all", "-o", out, "--run", "--check-accuracy", *extra)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return res, summary


def _graphs(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["compile"]: g for g in summary["graphs"]}


@pytest.fixture(scope="module")
def hops(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, dict[str, Any]]:
    return _all("hop_accuracy.log", tmp_path_factory.mktemp("hops"))


def test_higher_order_op_graphs_agree_with_the_backend_handed_the_graph(
    hops: tuple[Result, dict[str, Any]],
) -> None:
    """FlexAttention (0/0), a nested_compile_region (1/0, invoke_subgraph) and an
    autograd.Function (2/0): torch.compile cannot trace their graphs again, the backend handed
    the graph module takes each, and each output agrees with eager."""
    res, summary = hops
    graphs = _graphs(summary)
    for key, output in (("0/0", "out_1"), ("1/0", "getitem_1"), ("2/0", "sum_1")):
        g = graphs[key]
        assert g["status"] == "ran", g
        assert (g["accuracy_backend"], g["accuracy_via"]) == ("aot_eager", "backend")
        assert [(a["output"], a["what"], a["verdict"]) for a in g["accuracy"]] == [
            (output, "output", "agrees")
        ]
        assert g["compared"] == {**NONE, "outputs": 1}
    assert "accuracy: eager against aot_eager, the graph handed to it" in res.stdout


def test_a_check_with_nothing_to_compare_is_not_agreement(
    hops: tuple[Result, dict[str, Any]],
) -> None:
    """3/0 asserts and returns nothing: --check-accuracy says it compared nothing, the graph
    is `unchecked` and the run exits 6; summary.json counts what was compared."""
    res, summary = hops
    g = _graphs(summary)["3/0"]
    assert (g["status"], g["reason"]) == ("unchecked", NOTHING)
    assert (g["accuracy"], g["compared"]) == ([], NONE)
    assert summary["counts"] == {"ran": 4, "unchecked": 1}
    assert summary["compared"] == {**NONE, "outputs": 4, "changed_inputs": 1}
    assert res.exit_code == EXIT_NO_REPRO
    assert f"3/0  unchecked  {NOTHING}" in res.stdout


def test_an_input_the_graph_writes_into_is_compared(hops: tuple[Result, dict[str, Any]]) -> None:
    """4/0 writes into its input (`l_cache_[0] = l_x_`, fx's setitem): the input is compared
    after the run, beside the output."""
    res, summary = hops
    g = _graphs(summary)["4/0"]
    assert g["status"] == "ran"
    assert [(a["output"], a["what"], a["verdict"]) for a in g["accuracy"]] == [
        ("sum_1", "output", "agrees"),
        ("L['cache']", "changed in place", "agrees"),
    ]
    assert "accuracy L['cache'] (changed in place): agrees (largest difference 0.0" in res.stdout


def test_dynamos_path_is_kept_as_an_option(tmp_path: Path) -> None:
    """--dynamo compiles through torch.compile, which cannot trace invoke_subgraph again: the
    repro fails, saying so; repro.py says which way it compiles."""
    log = FIXTURES / "hop_accuracy.log"
    res = run_cli("repro", log, "--compile-id", "1/0", "-o", tmp_path, "--run", "--check-accuracy")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "VIA = 'backend'" in (tmp_path / "repro.py").read_text()
    res = run_cli(
        "repro", log, "--compile-id", "1/0", "-o", tmp_path / "d", "--run", "--check-accuracy",
        "--dynamo",
    )  # fmt: skip
    assert res.exit_code == EXIT_NO_REPRO
    assert "compile 1/0: the repro failed: " in res.stderr
    assert "invoke_subgraph" in res.stderr
    assert "VIA = 'dynamo'" in (tmp_path / "d" / "repro.py").read_text()


def test_an_optimizer_step_compares_its_parameters_and_state(tmp_path: Path) -> None:
    """adam_step.log 1/0 returns nothing: its parameters and Adam's state (step, exp_avg,
    exp_avg_sq of each) change in place, and each is compared with eager's; the gradients are
    the rebuilt parameters' own `.grad`."""
    res, summary = _all("adam_step.log", tmp_path / "r")
    assert res.exit_code == 0, res.stdout + res.stderr
    g = _graphs(summary)["1/0"]
    assert g["status"] == "ran"
    assert {a["what"] for a in g["accuracy"]} == {"changed in place"}
    assert {a["verdict"] for a in g["accuracy"]} == {"agrees"}
    names = [a["output"] for a in g["accuracy"]]
    params = "L['self'].param_groups[0]['params']"
    assert f"{params}[0]" in names and f"{params}[1]" in names
    for state in ("step", "exp_avg", "exp_avg_sq"):
        assert f"L['self'].state[list(dict.keys(L['self'].state))[1]]['{state}']" in names
    assert g["compared"] == {**NONE, "changed_inputs": 8}
    assert f"accuracy {params}[0] (changed in place): agrees" in res.stdout
    script = (tmp_path / "r" / "1-0" / "repro.py").read_text()
    assert f'inputs["{params}[0]"].grad,  # L_self_param_groups_0_params_0_grad' in script
    assert "standin(" not in script


def test_an_op_the_programs_script_defined_says_where_the_graph_calls_it(tmp_path: Path) -> None:
    """script_op.log calls fid4::scale, which its own script defined: no module is named fid4,
    so the hint names the file and line the graph calls it from, and how to make it
    importable, not `--allow-import fid4`."""
    res = run_cli("repro", FIXTURES / "script_op.log", "--compile-id", "0/0", "-o", tmp_path)
    assert res.exit_code == EXIT_NO_REPRO
    text = " ".join(res.stderr.split())
    assert (
        "the graph calls the custom op fid4::scale, which the program registered at run time; "
        "the graph calls it from /tmp/"
    ) in text
    assert (
        "/script_op.py:17, the program's own code, and no module here is named 'fid4': pass "
        "--allow-import with the module that defines the op, its directory on PYTHONPATH (if "
        "script_op.py is the script that was run, which a repro cannot import, move the "
        "definition into a module of its own first), or define the op at the top of repro.py"
    ) in text
    assert "--allow-import fid4" not in text


def test_the_script_op_runs_once_its_definition_is_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Doing what the hint says: the op's definition moved from the script into a module of
    its own, on PYTHONPATH, and passed to --allow-import; the graph then runs and agrees."""
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "fid4_ops.py").write_text(
        "import torch\n\n\n"
        '@torch.library.custom_op("fid4::scale", mutates_args=())\n'
        "def scale(x: torch.Tensor, k: float) -> torch.Tensor:\n"
        "    return x * k\n\n\n"
        "@scale.register_fake\n"
        "def _(x, k):\n"
        "    return torch.empty_like(x)\n"
    )
    monkeypatch.syspath_prepend(str(ops))
    monkeypatch.setenv("PYTHONPATH", str(ops))
    res = run_cli(
        "repro", FIXTURES / "script_op.log", "--compile-id", "0/0", "-o", tmp_path / "r",
        "--run", "--check-accuracy", "--allow-import", "fid4_ops",
    )  # fmt: skip
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "output add: reproduced" in res.stdout
    assert "accuracy add: agrees (largest difference 0.0, tolerance 0.0001)" in res.stdout


def test_inputs_hold_the_values_the_log_recorded(tmp_path: Path) -> None:
    """logged_scalars.log 0/0_1: dynamo made LayerNorm's eps and the attention's dropout tensor
    inputs and logged their values; --emit writes them as logged (eps 1e-05, not a random
    number), with a note each, and says the others are random; the API gives them too."""
    out = tmp_path / "i.pt"
    log = FIXTURES / "logged_scalars.log"
    res = run_cli("inputs", log, "--compile-id", "0/0_1", "--emit", out)
    assert res.exit_code == 0, res.stderr
    assert "2 value(s) as the log recorded them, the rest random" in res.stderr
    data = tlview.load_inputs(out)
    got = data["compiles"]["0/0_1"]
    assert (got[EPS].item(), got[DROPOUT].item()) == (1e-05, 0.0)
    assert data["values"]["0/0_1"][EPS] == {
        "value": 1e-05,
        "symbol": "zf3",
        "source": "L['self']._modules['ln'].eps",
    }
    assert data["notes"]["0/0_1"][EPS] == [
        "its value is as logged: 1e-05 (zf3, the value the log recorded for "
        "L['self']._modules['ln'].eps)"
    ]
    x = got["L['x']"]
    assert x.std() > 0.1  # tensor data the log does not hold: random
    rebuilt = tlview.real_inputs(str(log), "0/0_1", mode="zeros")
    assert rebuilt.tensors[EPS].item() == 1e-05
    assert sorted(rebuilt.logged) == sorted([EPS, DROPOUT])
    assert not rebuilt.tensors["L['x']"].any()


def test_python_scalars_and_item_values_come_back_as_logged() -> None:
    """dynamic.log: g's float scale became `___as_tensor(L['scale'])` (2.5), h's int k a
    symbol (4 on its recompile, 2/1): the API gives both values, and fills the tensor."""
    log = str(FIXTURES / "dynamic.log")
    g = tlview.real_inputs(log, "1/0")
    assert g.tensors["___as_tensor(L['scale'])"].item() == 2.5
    assert g.logged["___as_tensor(L['scale'])"].value == 2.5
    h = tlview.real_inputs(log, "2/1")
    assert {k: (v.value, v.symbol) for k, v in h.logged.items()} == {"L['k']": (4, "s16")}


def test_repro_checks_the_values_the_log_holds(tmp_path: Path) -> None:
    """logged_scalars.log: 0/0 calls .item() on eps and dropout, annotated with their values;
    run as it is, each is checked and reproduced; the backend cannot take this graph of a
    restarted attempt (a data-dependent .item()), so it is compiled through torch.compile,
    saying why; 0/0_1 (after the restart) agrees with the graph handed to aot_eager."""
    res, summary = _all("logged_scalars.log", tmp_path / "r")
    assert res.exit_code == 0, res.stdout + res.stderr
    graphs = _graphs(summary)
    first = graphs["0/0"]
    assert first["values"] == [
        {
            "value": "item (graph line 14)",
            "verdict": "reproduced (value 1e-05, the graph's annotation)",
        },
        {
            "value": "item_1 (graph line 19)",
            "verdict": "reproduced (value 0.0, as the log recorded zf7 "
            "(L['self']._modules['attn'].dropout))",
        },
    ]
    assert first["compared"] == {**NONE, "outputs": 1, "logged_values": 2}
    assert first["accuracy_via"] == "dynamo"
    assert any(
        n.startswith("aot_eager could not take the graph handed to it (") for n in first["notes"]
    )
    assert graphs["0/0_1"]["accuracy_via"] == "backend"
    assert summary["compared"] == {"outputs": 2, "changed_inputs": 0, "logged_values": 2}
    script = (tmp_path / "r" / "0-0" / "repro.py").read_text()
    assert "but for 2 input(s) whose value the log recorded" in script
