"""index/: a log's records become compiles with statuses, inputs, alias groups and recompiles."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from helpers import FIXTURES

from tlview.index.core import is_torch_file
from tlview.index.dims import fx_name
from tlview.index.log import read_log
from tlview.model import StackFrame


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


# Files of frames in the tlparse project's logs and this machine's, and what a user runs at a
# prompt: True where the frame is torch's own code.
TORCH_FILES = {
    "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py": True,
    "/usr/lib/python3/dist-packages/torch/nn/modules/module.py": True,
    "C:\\Python311\\Lib\\site-packages\\torch\\_dynamo\\eval_frame.py": True,
    "/data/users/xmfan/a/pytorch/torch/_dynamo/convert_frame.py": True,  # a checkout
    "/data/users/xmfan/a/pytorch/torch/testing/_internal/common_utils.py": True,
    "/data/users/xmfan/a/pytorch/torch/_tensor.py": True,
    "/data/users/shangdiy/fbsource/buck-out/v2/gen/fbcode/b9ba6d289a870795/scripts/shangdiy/"
    "__aot__/aot#link-tree/torch/_inductor/compile_fx.py": True,
    "/mnt/xarfuse/uid-32109/976f795a-seed-nspid4026531836_cgpid101781736-ns-4026531841/"
    "torch/_dynamo/eval_frame.py": True,
    "/data/users/a/pytorch/torch/jit/_script.py": True,
    "/data/users/a/pytorch/torch/multiprocessing/spawn.py": True,
    "/data/users/a/pytorch/torch/overrides.py": True,
    "<eval_with_key>.10": True,  # fx's generated forward
    "<string>": True,  # inductor's and sympy's exec'd code
    "/data/users/xmfan/a/pytorch/test/dynamo/test_misc.py": False,  # torch's tests: the user's
    "/mnt/xarfuse/uid-32109/976f795a-seed-nspid4026531836_cgpid101781736-ns-4026531841/"
    "caffe2/test/inductor/test_codecache.py": False,
    "/home/xmfan/local/a/pytorch-env/lib/python3.11/unittest/case.py": False,
    "/work/main/.venv/lib/python3.11/site-packages/transformers/models/bert/modeling_bert.py": False,
    "/home/u/proj/torch_utils.py": False,
    "/home/u/proj/torch/model.py": False,  # a folder of the user's named torch
    "<stdin>": False,
    "<ipython-input-3-5f0e3c6c5e33>": False,
}


def test_torch_files_are_told_apart_by_one_rule() -> None:
    """Installs, checkouts, buck and xar bundles and generated code are torch's; tests in a
    checkout, other packages and code typed at a prompt are the user's. The index, the
    annotations and the page's stacks ask the same function."""
    from tlview.analyze import compiles, sites
    from tlview.index import core
    from tlview.render.html import fmt

    got = {path: core.is_torch_file(path) for path in TORCH_FILES}
    assert got == TORCH_FILES
    assert vars(sites)["is_torch_file"] is core.is_torch_file
    # The page dims torch's frames, as the terminal leaves them out: the one library rule of
    # analyze.compiles.is_library. Other installed packages are the user's to read through.
    assert compiles.is_library is vars(fmt)["is_library"]
    dimmed = {p: fmt.frame_view(StackFrame(p, 1, "f", None)).lib for p in TORCH_FILES}
    assert dimmed == TORCH_FILES
    assert dimmed["/home/u/proj/torch/model.py"] is False


def test_every_module_of_torch_is_torchs_in_a_checkout() -> None:
    """Each package and module torch ships with Python code in it, under a checkout's path, is
    torch's: a frame in any of them is never taken for the user's line."""
    spec = importlib.util.find_spec("torch")  # found, not imported
    assert spec is not None and spec.origin is not None
    root = Path(spec.origin).parent
    names = [p.name for p in root.iterdir() if p.is_dir() and any(p.rglob("*.py"))]
    names += [p.stem for p in root.glob("*.py")]
    assert {"_dynamo", "nn", "jit", "overrides"} <= set(names)
    missed = [n for n in names if not is_torch_file(f"/src/pytorch/torch/{n}/x.py")]
    missed = [n for n in missed if not is_torch_file(f"/src/pytorch/torch/{n}.py")]
    assert missed == []
