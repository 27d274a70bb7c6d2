"""Real models in the suite: logs of tiny transformers models built from configs (no weights;
tests/fixtures/make_fixtures.py hf_bert hf_gpt2_static hf_qwen2_moe hf_mixtral, with the
`test` extra's transformers). Each program saved the real inputs of its compiled frames
(<name>.inputs.json), which every graph's rebuilt inputs must equal; and every graph must
reproduce with default options or with the one flag its reason names. The logs are committed,
so these need torch only (transformers for hf_mixtral's op)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from helpers import FIXTURES, fake_dim, run_cli
from recorded import read, reader, renumbered, saved

pytestmark = pytest.mark.slow  # repros are written and run with torch
torch = pytest.importorskip("torch")

from tlview import load_inputs, real_inputs
from tlview.analyze.names import graphs
from tlview.index.annotations import tensor_type
from tlview.index.dims import arg_name
from tlview.load import read as load
from tlview.model import Compile
from tlview.rebuild import fake_rebuild

EXIT_NO_REPRO = 6

# Each model's log, the flags its repros need (the one a blocked graph's reason names), and the
# backend --check-accuracy compares eager with by default (the logged run's).
MODELS: dict[str, tuple[list[str], str]] = {
    "hf_bert": ([], "aot_eager"),
    "hf_gpt2_static": ([], "aot_eager"),
    "hf_qwen2_moe": ([], "inductor"),  # logged with inductor
    "hf_mixtral": (["--allow-import", "transformers"], "aot_eager"),
}
# The label a program recorded a compiled frame under, where it is not the frame's function:
# Qwen2-MoE's experts frame and its activation's (compiled twice: the first call of each size).
LABELS = {
    ("hf_qwen2_moe", "1/0_1"): "experts_forward",
    ("hf_qwen2_moe", "3/0"): "act",
    ("hf_qwen2_moe", "3/1"): "act",
}


class Runs:
    """`tlview repro LOG --all --run --check-accuracy FLAGS`, each run once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[tuple[str, ...], tuple[Result, Path]] = {}

    def __call__(self, log: str, *flags: str) -> tuple[Result, Path]:
        key = (log, *flags)
        if key not in self.done:
            out = self.root / f"{log}-{len(self.done)}"
            res = run_cli(
                "repro", FIXTURES / f"{log}.log", "--all", "-o", out, "--run", "--check-accuracy",
                *flags,
            )  # fmt: skip
            self.done[key] = (res, out)
        return self.done[key]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(tmp_path_factory.mktemp("models"))


def summary(out: Path) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = json.loads((out / "summary.json").read_text())["graphs"]
    return got


@pytest.mark.parametrize("log", MODELS)
def test_every_graph_reproduces_with_the_one_flag_its_reason_names(runs: Runs, log: str) -> None:
    """Every graph ran, each output is what the log annotates, and eager agrees with the
    logged run's backend within the tolerance; the terminal says so graph by graph."""
    flags, backend = MODELS[log]
    res, out = runs(log, *flags)
    assert res.exit_code == 0, res.stdout + res.stderr
    got = summary(out)
    assert got and {g["status"] for g in got} == {"ran"}, [(g["compile"], g["reason"]) for g in got]
    for g in got:
        assert g["verdicts"] and {v["verdict"] for v in g["verdicts"]} == {"reproduced"}, g
        assert g["accuracy_backend"] == backend
        assert {a["verdict"] for a in g["accuracy"]} == {"agrees"}, g
        for a in g["accuracy"]:
            assert a["max_difference"] is not None and a["max_difference"] <= a["tolerance"]
    n = len(got)
    assert f"{n} graph(s): {n} ran; {n}/{n} ran and match the logged shapes" in res.stdout
    assert f"accuracy: eager against {backend}, the graph handed to it\n" in res.stdout


def test_bert_keeps_its_labels_token_types_and_positions_in_range(runs: Runs) -> None:
    """hf_bert.log: BertForSequenceClassification (3 labels, 2 token types, 16 positions) with
    labels: the token-type buffer reaches a 2-row embedding through expand and gather, which
    its position-id buffer indexes; the labels are cross_entropy targets."""
    _, out = runs("hf_bert")
    assert [v["output"] for v in summary(out)[0]["verdicts"]] == ["loss", "logits"]
    code = (out / "0-0" / "repro.py").read_text()
    emb = "L['self']._modules['bert']._modules['embeddings']"
    for line in (
        "#   \"L['kwargs']['labels']\": 'values 0 to 2: it indexes cross_entropy targets of 3 "
        "classes (graph line 139)'",
        f"#   \"{emb}._buffers['token_type_ids']\": 'values 0 to 1: it indexes an embedding of 2 "
        "rows (l_self_modules_bert_modules_embeddings_modules_token_type_embeddings_parameters"
        "_weight_) (graph line 49)'",
        f'#   "{emb}._buffers[\'position_ids\']": "values 0 to 15: it indexes gather of '
        "buffered_token_type_ids's dim 1, 16 long (graph line 40)\"",
        "#   \"L['kwargs']['input_ids']\": 'values 0 to 49: it indexes an embedding of 50 rows",
    ):
        assert line in code
    inputs = load_inputs(out / "0-0" / "inputs.pt")["compiles"]["0/0"]
    for source, top in (
        ("L['kwargs']['labels']", 3),
        (f"{emb}._buffers['token_type_ids']", 2),
        (f"{emb}._buffers['position_ids']", 16),
    ):
        t = inputs[source]
        assert int(t.min()) >= 0 and int(t.max()) < top, source


def test_gpt2_static_cache_counter_starts_where_the_log_says(runs: Runs) -> None:
    """hf_gpt2_static.log: generate's compiled prefill of 6 tokens into a static cache of 9
    slots that held 3 already: `arange(6) + counter` indexes index_copy_, so the counter must
    stay below 4; the log recorded its value (3, as a symbol of its .item()), where it starts."""
    _, out = runs("hf_gpt2_static")
    code = (out / "0-0" / "repro.py").read_text()
    counter = "L['kwargs']['cache'].layers[0].cumulative_length"
    said = (
        f"{counter} is a 0-dim integer (a counter, such as a cache position) that reaches "
        "index_copy_ of l_kwargs_cache_layers_0_keys's dim 2, 9 long (graph line 78) after "
        "adding up to 5: it starts at 3, the value the log recorded (s77)"
    )
    assert said in code  # a note of the script's, and of summary.json's
    assert said in summary(out)[0]["notes"]
    assert (
        "#   \"L['kwargs']['position_ids']\": 'values 0 to 15: it indexes an embedding of 16 rows"
    ) in code
    inputs = load_inputs(out / "0-0" / "inputs.pt")["compiles"]["0/0"]
    assert inputs[counter].dim() == 0 and int(inputs[counter]) == 3
    assert summary(out)[0]["verdicts"] == [{"output": "logits", "verdict": "reproduced"}]


def test_qwen2_moe_router_indices_stay_below_one_hots_classes(runs: Runs) -> None:
    """hf_qwen2_moe.log: the experts' frame takes the router's top_k_index, which feeds
    one_hot(num_classes=5); the graph break at nonzero and the activation compiled twice
    (the second time with a dynamic stride) reproduce too. Inductor compiled them: eager is
    compared with inductor, and each output's largest difference is reported as found."""
    res, out = runs("hf_qwen2_moe")
    got = {g["compile"]: g for g in summary(out)}
    assert list(got) == ["1/0_1", "3/0", "3/1"]
    assert [v["output"] for v in got["1/0_1"]["verdicts"]] == [
        "greater",
        "final_hidden_states",
        "expert_mask_1",
    ]
    code = (out / "1-0_1" / "repro.py").read_text()
    assert (
        "#   \"L['top_k_index']\": 'values 0 to 4: it indexes one_hot of 5 classes (graph line 10)'"
    ) in code
    assert "ACCURACY_BACKEND = 'inductor'  # the logged run's backend" in code
    assert "1/0_1  ran\n" in res.stdout
    for g in got.values():
        for a in g["accuracy"]:
            line = (
                f"accuracy {a['output']}: agrees (largest difference {a['max_difference']}, "
                f"tolerance {a['tolerance']})"
            )
            assert line in res.stdout
    assert "'s42': inputs[\"L['input']\"].stride(0)," in (out / "3-1" / "repro.py").read_text()


def test_qwen2_moe_agrees_under_aot_eager_exactly(runs: Runs) -> None:
    """The same graphs, eager against aot_eager: the same ops run, so the outputs are equal."""
    res, out = runs("hf_qwen2_moe", "--backend", "aot_eager")
    assert res.exit_code == 0, res.stdout + res.stderr
    for g in summary(out):
        assert g["status"] == "ran" and g["accuracy_backend"] == "aot_eager"
        assert {(a["verdict"], a["max_difference"]) for a in g["accuracy"]} == {("agrees", 0.0)}


def test_mixtral_experts_need_allow_import_transformers(runs: Runs, tmp_path: Path) -> None:
    """hf_mixtral.log: its experts call transformers::grouped_mm_fallback, which
    transformers.integrations.moe registers when imported. With --allow-import transformers,
    repro.py imports that module and the graph reproduces; without it, the graph is blocked,
    its reason naming the flag and the module that calls the op, also in a process that has
    the op already (the run with the flag imported it here): a repro runs in a fresh one."""
    _, out = runs("hf_mixtral", "--allow-import", "transformers")
    code = (out / "0-0" / "repro.py").read_text()
    assert "\nimport transformers.integrations.moe  # noqa: E402, F401 - --allow-import" in code
    assert summary(out)[0]["verdicts"] == [{"output": "logits", "verdict": "reproduced"}]
    assert torch.ops.transformers.grouped_mm_fallback is not None  # this process has it now
    res = run_cli("repro", FIXTURES / "hf_mixtral.log", "--all", "-o", tmp_path, "--run")
    assert res.exit_code == EXIT_NO_REPRO, res.stdout + res.stderr
    (g,) = summary(tmp_path)
    assert g["status"] == "blocked"
    assert g["reason"] == (
        "the graph calls the custom op transformers::grouped_mm_fallback, which the program "
        "registered at run time: pass --allow-import transformers to import the package that "
        "defines it (the graph calls it from transformers.integrations.moe), or import it at "
        "the top of repro.py"
    )
    assert "1 of 1 graph(s) gave no repro that ran" in res.stderr


def _record_of(log: str, c: Compile, tensors: dict[str, Any]) -> dict[str, Any]:
    """The recorded call a compile was made for: the first one of its frame's label whose
    tensors have the sizes of the rebuilt ones (a recompile was made for a later call)."""
    label = LABELS.get((log, c.key), c.function)
    for r in saved(log):
        have = r["inputs"]
        if r["function"] == label and all(
            s in have and have[s]["size"] == list(t.shape) for s, t in tensors.items()
        ):
            return dict(have)
    raise AssertionError(f"{log} {c.key}: no recorded call of {label} has these inputs")


@pytest.mark.parametrize("log", MODELS)
def test_every_graphs_inputs_are_the_real_ones(log: str) -> None:
    """Every input of every graph, rebuilt as a real tensor, has every field of the real one
    the program passed (size, stride, offset, dtype, device, layout, requires_grad, Parameter,
    base and storage sharing); as a fake, the real one's sizes and strides, in the symbols of
    the graph's placeholder annotations."""
    ns = reader()
    rep = load(FIXTURES / f"{log}.log")
    compiles = [c for _ref, c in graphs(rep)]
    assert compiles
    for c in compiles:
        real = real_inputs(c, seed=1)
        assert real.failed == {}, c.key
        order = list(real.tensors)
        want = renumbered(_record_of(log, c, real.tensors), order)
        assert read(ns, real.tensors, order) == want, c.key
        fake = fake_rebuild(c)
        assert fake.failed == {} and set(fake.tensors) == set(order), c.key
        for src, t in fake.tensors.items():
            w = want[src]
            assert [fake_dim(d) for d in t.shape] == w["size"], (c.key, src)
            assert [fake_dim(d) for d in t.stride()] == w["stride"], (c.key, src)
            assert fake_dim(t.storage_offset()) == w["storage_offset"], (c.key, src)
            assert str(t.dtype).removeprefix("torch.") == w["dtype"], (c.key, src)
            assert t.requires_grad == w["requires_grad"], (c.key, src)
        g = next(g for g in c.graphs if g.kind == "dynamo_output_graph")
        assert g.placeholders, c.key
        by_arg = {arg_name(src): t for src, t in fake.tensors.items()}
        annotated = 0
        for name, ann in g.placeholders.items():
            tt = tensor_type(ann)
            if tt is None:  # a size symbol (s42)
                continue
            t = by_arg[name]
            assert [str(d) for d in t.shape] == [str(d) for d in tt.size], (c.key, name)
            assert [str(d) for d in t.stride()] == [str(d) for d in tt.stride], (c.key, name)
            annotated += 1
        assert annotated == len(order), c.key  # every input is a placeholder of the graph
