"""index/: a log's records become compiles with statuses, inputs, alias groups and recompiles."""

from __future__ import annotations

from conftest import FIXTURES

from tlview.index.dims import fx_name
from tlview.index.log import read_log


def test_demo_compiles_statuses_and_attempts() -> None:
    (log,) = read_log(FIXTURES / "demo.log")
    got = [(c.key, c.status) for c in log.compiles]
    assert got == [
        ("-/-", "outside"),
        ("0/0", "restarted"),
        ("0/0_1", "graph_break"),
        ("0/1", "restarted"),
        ("0/1_1", "graph_break"),
        ("1/0", "ok"),
        ("1/1", "ok"),
        ("2/0", "ok"),
    ]
    assert log.records == 309 and log.bad_count == 0


def test_inputs_keep_every_source_size_stride_and_storage() -> None:
    (log,) = read_log(FIXTURES / "demo.log")
    c = next(c for c in log.compiles if c.key == "0/1_1")
    x = next(i for i in c.inputs if i.source == "L['x']")
    assert (x.tensor.size, x.tensor.stride, x.tensor.dtype) == ([6, 16], [16, 1], "torch.float32")
    weight = next(i for i in c.inputs if i.source.endswith("_parameters['weight']"))
    assert weight.tensor.flag("is_parameter") and weight.tensor.size == [32, 16]


def test_views_of_one_storage_share_an_alias_group() -> None:
    (log,) = read_log(FIXTURES / "demo.log")
    c = next(c for c in log.compiles if c.key == "2/0")
    keys = [i.storage_key for i in c.inputs]
    assert len(keys) == 3 and len(set(keys)) < 3  # the views' base and a view share a storage


def test_a_recompile_says_which_guard_failed_and_what_changed() -> None:
    (log,) = read_log(FIXTURES / "demo.log")
    c = next(c for c in log.compiles if c.key == "0/1_1")
    assert c.recompile is not None and c.recompile.previous == "0/0_1"
    assert c.recompile.reasons == ["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6"]
    assert [(x.source, x.field, x.before, x.after) for x in c.recompile.input_changes][:1] == [
        ("L['x']", "size[0]", 4, 6)
    ]


def test_fx_names_follow_dynamo() -> None:
    assert fx_name("L['self']._modules['l1']._parameters['weight']") == (
        "l_self_modules_l1_parameters_weight_"
    )
    assert fx_name("L['hiddenStates']") == "l_hidden_states_"
