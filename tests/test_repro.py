"""`tlview repro`: round trips through real torch runs, reasons for graphs that cannot run, and
hostile logs whose strings must stay strings.

Torch runs are batched to keep them few: one program writes every case's log, tlview writes the
repros in this process, and one child process runs them all and computes each case's eager
function on the same rebuilt inputs.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, corpus, every_launch, run_cli

pytestmark = pytest.mark.slow  # every repro is written, and some run, with torch
torch = pytest.importorskip("torch")

EXIT_USAGE, EXIT_REFUSED, EXIT_NEEDS_EXTRA, EXIT_NO_REPRO = 2, 4, 5, 6  # README "Exit status"

# The functions each case compiles; the check process reads them too, as the eager references.
CASES = r'''
import torch
from torch import nn
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils.checkpoint import checkpoint


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x))) * self.scale


def views(a, b, c):
    b.add_(1)
    return a.sum(0) + c.t().sum(1)


def dyn(x, y):
    return (x @ y).relu().reshape(-1) + x.size(0)


def broken(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos() + 1


def conded(p, x):
    return torch.cond(p, lambda t: t.sin(), lambda t: t.cos(), (x,))


def ckpt(x, w):
    return checkpoint(lambda a: (a @ w).relu(), x, use_reentrant=False).sum()


def sub(x, y):
    return (x * 2 + y).sin()


@torch.compiler.nested_compile_region
def block(x):
    return x.sin() * 2


def region(x):
    return block(x) + block(x + 1)


@torch.library.custom_op("tlviewtest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


def custom(x):
    return twice(x) + 1


class Pair(torch.Tensor):
    """A tensor subclass of the program: a fresh process cannot have it."""

    @staticmethod
    def __new__(cls, a, b):
        return torch.Tensor._make_wrapper_subclass(cls, a.shape, dtype=a.dtype, device=a.device)

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __tensor_flatten__(self):
        return ["a", "b"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, size, stride):
        return Pair(inner["a"], inner["b"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        from torch.utils._pytree import tree_map_only

        kwargs = kwargs or {}
        a = func(*tree_map_only(Pair, lambda t: t.a, args), **tree_map_only(Pair, lambda t: t.a, kwargs))
        b = func(*tree_map_only(Pair, lambda t: t.b, args), **tree_map_only(Pair, lambda t: t.b, kwargs))
        return Pair(a, b) if isinstance(a, torch.Tensor) else a


def paired(x):
    return x.sin() * 2
'''

PROGRAM = r"""
torch.manual_seed(0)
torch.compile(MLP(), backend="eager")(torch.randn(3, 8))
base = torch.randn(6, 6)
torch.compile(views, backend="eager")(base[1:], base[:2], base.t()[:3])
torch.compile(dyn, backend="eager", dynamic=True)(torch.randn(5, 3), torch.randn(3, 7))
torch.compile(broken, backend="eager")(torch.randn(4))
torch.compile(conded, backend="eager")(torch.tensor(True), torch.randn(3))
torch.compile(ckpt, backend="eager")(torch.randn(4, 4, requires_grad=True), torch.randn(4, 4))
torch.compile(sub, backend="eager")(TwoTensor(torch.randn(3, 4), torch.randn(3, 4)), torch.randn(3, 4))
torch.compile(region, backend="eager")(torch.randn(4, requires_grad=True))
torch.compile(custom, backend="eager")(torch.randn(3))
torch.compile(paired, backend="eager")(Pair(torch.randn(3), torch.randn(3)))
lin = nn.Linear(3, 3)
with torch._dynamo.compiled_autograd._enable(torch.compile(backend="eager")):
    torch.compile(lambda x: lin(x), backend="eager")(torch.randn(2, 3)).sum().backward()
"""

# Runs in a child process: each repro as it is (and again compiled), and each case's eager
# function on the same rebuilt inputs, loaded afresh so in-place ops start from the same values.
CHECK = r'''
import json, re, runpy, sys
import torch
from torch.func import functional_call
from torch.testing._internal.two_tensor import TwoTensor


def state(inputs, prefix="L['self']"):
    """Module state from sources like L['self']._modules['l1']._parameters['weight']."""
    out = {}
    for src, t in inputs.items():
        if src.startswith(prefix + "."):
            rest = src[len(prefix):]
            out[".".join(re.findall(r"\['([^']*)'\]", rest))] = t
    return out


REFS = {
    "forward": lambda i: (functional_call(MLP(), state(i), (i["L['x']"],)),),
    "views": lambda i: (views(i["L['a']"], i["L['b']"], i["L['c']"]),),
    "dyn": lambda i: (dyn(i["L['x']"], i["L['y']"]),),
    "broken": lambda i: (i["L['x']"].sin(),),
    "resume": lambda i: (i["L['y']"].cos() + 1,),
    "conded": lambda i: (conded(i["L['p']"], i["L['x']"]),),
    "ckpt": lambda i: (ckpt(i["L['x']"], i["L['w']"]),),
    "sub": lambda i: (sub(i["L['x']"], i["L['y']"]),),
    "region": lambda i: (region(i["L['x']"]),),
}


def parts(t):
    return [t.a, t.b] if isinstance(t, TwoTensor) else [t]


def differ(got, want):
    if len(got) != len(want):
        return f"{len(got)} outputs, the function gives {len(want)}"
    for g, w in zip(got, want):
        for a, b in zip(parts(g), parts(w)):
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
            diff = (a.detach().double() - b.detach().double()).abs().max().item() if a.numel() else 0.0
            if diff > 1e-5:
                return f"values differ by {diff}"
        if type(g) is not type(w):
            return f"{type(g).__name__} vs {type(w).__name__}"
    return None


results = {}
for spec in json.loads(sys.argv[1]):
    ns = runpy.run_path(spec["dir"] + "/repro.py", run_name="repro_check")
    res = {"aliased": None}
    for backend in spec["backends"]:
        got = ns["run"](backend)
        case = spec["case"]
        if case in REFS:
            want = REFS[case](ns["load_inputs"]())
            res[str(backend)] = {"problems": got["problems"], "differ": differ(got["outputs"], want)}
        else:
            res[str(backend)] = {"problems": got["problems"], "differ": None}
        torch._dynamo.reset()
    inputs = ns["load_inputs"]()
    if "L['a']" in inputs and "L['b']" in inputs:
        ptr = lambda s: inputs[s].untyped_storage().data_ptr()
        res["aliased"] = ptr("L['a']") == ptr("L['b']")
    results[spec["dir"]] = res
print("RESULTS " + json.dumps(results))
'''


def _python(code: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    script = cwd / "script.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of PROGRAM, written by torch under TORCH_TRACE."""
    tmp = tmp_path_factory.mktemp("trace")
    trace = tmp / "trace"
    _python(CASES + PROGRAM, cwd=tmp, env={"TORCH_TRACE": str(trace)})
    logs = list(trace.glob("*.log"))
    assert len(logs) == 1, logs
    return logs[0]


def _functions(log: Path) -> dict[str, str]:
    """Compile id -> the function dynamo compiled there."""
    from tlview.load import read as load

    return {c.key: c.function or "" for c in load(log, jobs=1).attempts}


@pytest.fixture(scope="module")
def made(traced: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`tlview repro --all` over the log: the summary, keyed by the function each graph is from."""
    out = tmp_path_factory.mktemp("repros")
    res = run_cli("repro", traced, "--all", "-o", out)
    summary = json.loads((out / "summary.json").read_text())
    names = _functions(traced)
    by_case: dict[str, Any] = {}
    for g in summary["graphs"]:
        name = names[g["compile_id"]]
        name = "resume" if name.startswith("torch_dynamo_resume_in_broken") else name
        name = "compiled_autograd" if g["compile_id"].startswith("!") else name
        assert name not in by_case, name
        g["path"] = str(out / g["dir"]) if g["dir"] else None
        by_case[name] = g
    return {"out": out, "result": res, "summary": summary, "cases": by_case}


ROUND_TRIP = ("forward", "views", "dyn", "broken", "resume", "conded", "ckpt", "sub", "region")


@pytest.fixture(scope="module")
def checked(made: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each round-trip repro run as it is and compiled with aot_eager (the MLP with inductor
    too), next to its eager function on the same inputs."""
    specs = []
    for case in ROUND_TRIP:
        g = made["cases"][case]
        backends: list[str | None] = [None, "aot_eager"] + (
            ["inductor"] if case == "forward" else []
        )
        if case == "region":  # dynamo refuses to trace invoke_subgraph written out: as it is
            backends = [None]
        specs.append({"dir": g["path"], "case": case, "backends": backends})
    tmp = tmp_path_factory.mktemp("check")
    out = _python(CASES + CHECK, json.dumps(specs), cwd=tmp)
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULTS "))
    got = json.loads(line[len("RESULTS ") :])
    return {case: got[made["cases"][case]["path"]] for case in ROUND_TRIP}


def test_all_writes_a_repro_per_graph_and_a_summary(made: dict[str, Any]) -> None:
    s = made["summary"]
    assert s["format"] == "tlview.repro/1"
    assert s["torch_version"].startswith("2.")
    statuses = {case: g["status"] for case, g in made["cases"].items()}
    assert statuses == {
        **dict.fromkeys(ROUND_TRIP, "written"),
        "<lambda>": "written",
        "custom": "blocked",
        "paired": "blocked",
        "compiled_autograd": "skipped",
    }
    for case in ROUND_TRIP:
        d = Path(made["cases"][case]["path"])
        assert (d / "repro.py").is_file() and (d / "inputs.pt").is_file()
    # The compiled-autograd graph gets a reason and no files.
    ca = [g for g in s["graphs"] if g["compile_id"].startswith("!")]
    assert len(ca) == 1 and ca[0]["status"] == "skipped" and ca[0]["dir"] is None
    assert ca[0]["reason"].startswith("compiled-autograd internals: the graph calls torch__dynamo_")
    assert made["result"].exit_code == EXIT_NO_REPRO
    assert "3 of 13 graph(s) gave no repro that runs here" in made["result"].stderr
    assert "13 graph(s): 10 written, 2 blocked, 1 skipped" in made["result"].stdout


@pytest.mark.parametrize("case", ROUND_TRIP)
def test_round_trip_matches_the_eager_function(checked: dict[str, Any], case: str) -> None:
    res = checked[case]
    for backend in ("None", "aot_eager") if case != "region" else ("None",):
        assert res[backend] == {"problems": [], "differ": None}, (case, backend, res)


def test_round_trip_inductor(checked: dict[str, Any]) -> None:
    assert checked["forward"]["inductor"] == {"problems": [], "differ": None}


def test_aliased_inputs_stay_aliased(checked: dict[str, Any]) -> None:
    assert checked["views"]["aliased"] is True


def test_script_binds_placeholders_symbols_and_bodies(made: dict[str, Any]) -> None:
    dyn = (Path(made["cases"]["dyn"]["path"]) / "repro.py").read_text()
    # Symbolic placeholders take their value from the rebuilt input sizes.
    assert (
        '"s77": inputs["L[\'x\']"].size(0),' in dyn or "'s77': inputs[\"L['x']\"].size(0)," in dyn
    )
    assert re.search(r"sym\['s77'\],  # s77", dyn)
    assert re.search(
        r"\('add', torch\.float32, \(sym\['s77'\] \* sym\['s94'\],\), \(1,\), 'cpu'\)", dyn
    )
    assert "DYNAMIC = True" in dyn
    cond = (Path(made["cases"]["conded"]["path"]) / "repro.py").read_text()
    assert "mod.cond_true_0 = body(BODIES['cond_true_0'], 1, 1)" in cond
    # invoke_subgraph reads its body's outputs off the graph: a tuple of 1, as printed
    region = (Path(made["cases"]["region"]["path"]) / "repro.py").read_text()
    assert "mod.subgraph_0 = body(BODIES['subgraph_0'], 1, 1)" in region
    assert "del GraphModule.cond_false_0" in cond
    # torch 2.9's higher-order ops use symbolic_shapes without importing it: a script with
    # bodies imports it; one without does not pay for sympy.
    imported = "\nimport torch.fx.experimental.symbolic_shapes  # noqa"
    assert imported in cond and imported in region
    mlp = (Path(made["cases"]["forward"]["path"]) / "repro.py").read_text()
    assert imported not in mlp
    assert (
        "inputs[\"L['self']._modules['l1']._parameters['weight']\"],  # L_self_modules_l1_parameters_weight_"
        in mlp
    )
    assert "('mul', torch.float32, (3, 4), (4, 1), 'cpu')," in mlp
    assert f"COMPILE_ID = {made['cases']['forward']['compile_id']!r}" in mlp
    assert "LOG_TORCH_VERSION = '2." in mlp


def test_reasons_for_what_a_fresh_process_lacks(made: dict[str, Any]) -> None:
    custom = made["cases"]["custom"]
    assert custom["status"] == "blocked"
    assert "custom op tlviewtest::twice" in custom["reason"]
    paired = made["cases"]["paired"]
    assert paired["status"] == "blocked"
    assert paired["reason"].startswith("input L['x'] is a Pair, a tensor subclass")


def test_one_graph_with_run(traced: Path, made: dict[str, Any]) -> None:
    cid = made["cases"]["views"]["compile_id"]
    res = run_cli("repro", traced, "--compile-id", cid, "--run")
    assert res.exit_code == 0, res.output
    assert "--run executes code taken from the log" in res.stderr
    assert f"graph {cid} ran as it is: Tensor float32[6]" in res.stdout
    assert "outputs match the shapes and dtypes in the log" in res.stdout
    # Said before it runs.
    assert res.output.index("executes code taken from the log") < res.output.index("ran as it is")


def test_one_graph_errors(traced: Path, made: dict[str, Any], tmp_path: Path) -> None:
    res = run_cli("repro", traced, "--compile-id", "99/0", "-o", tmp_path / "x")
    assert res.exit_code == EXIT_USAGE
    assert res.stderr.startswith("tlview: ") and "no compile '99/0'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = run_cli("repro", traced, "--compile-id", made["cases"]["views"]["compile_id"])
    assert res.exit_code == EXIT_USAGE and "give -o DIR" in res.stderr
    res = run_cli("repro", traced, "--all", "--compile-id", "0/0", "-o", tmp_path)
    assert res.exit_code == EXIT_USAGE
    cid = made["cases"]["custom"]["compile_id"]
    res = run_cli("repro", traced, "--compile-id", cid, "-o", tmp_path / "c")
    assert res.exit_code == EXIT_NO_REPRO
    assert (
        "the repro will not run here: the graph calls the custom op tlviewtest::twice" in res.stderr
    )
    assert (tmp_path / "c" / "repro.py").is_file()  # written, to edit
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "repro.py").write_text("mine\n")
    cid = made["cases"]["views"]["compile_id"]
    res = run_cli("repro", traced, "--compile-id", cid, "-o", busy)
    assert res.exit_code == EXIT_REFUSED and "not written by tlview" in res.stderr
    assert (busy / "repro.py").read_text() == "mine\n"


# -- hostile and damaged logs -------------------------------------------------------------------
def _records(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, end) of each record with its TAB payload lines."""
    out, i = [], 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and lines[j].startswith("\t"):
            j += 1
        out.append((i, j))
        i = j
    return out


def _set_payload(lines: list[str], start: int, end: int, text: str) -> list[str]:
    """A record's payload replaced by TEXT, with its has_payload md5 recomputed."""
    md5 = hashlib.md5(text.encode()).hexdigest()
    head = re.sub(r'"has_payload": "[0-9a-f]+"', f'"has_payload": "{md5}"', lines[start])
    return [*lines[:start], head, *("\t" + ln for ln in text.split("\n")), *lines[end:]]


def _edit_graph(log: Path, frame: int, edit: Any, dest: Path, source_edit: Any = None) -> Path:
    """A copy of LOG with the graph of compile FRAME/0 (and the sources of that compile) edited."""
    lines = log.read_text().split("\n")
    for start, end in _records(lines):
        rec = lines[start]
        if f'"frame_id": {frame}, "frame_compile_id": 0' not in rec:
            continue
        if '{"dynamo_output_graph"' in rec:
            text = "\n".join(ln[1:] for ln in lines[start + 1 : end])
            lines = _set_payload(lines, start, end, edit(text))
            break
    if source_edit is not None:
        lines = [source_edit(ln) if '{"describe_source"' in ln else ln for ln in lines]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines))
    return dest


def _frame(made: dict[str, Any], case: str) -> int:
    return int(made["cases"][case]["compile_id"].split("/")[0])


HOSTILE = "L['x'];__import__('os').system('touch PWNED')#\n\"\"\"\u2028"


def test_hostile_strings_stay_strings(
    traced: Path, made: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(made, "broken")
    name = re.sub(r"[^a-zA-Z0-9]+", "_", HOSTILE)
    # A source name, the log's file name and its torch version, all hostile; the graph's
    # placeholder renamed to match the source as dynamo would have named it.
    bad_name = "ev'il\"\n# coding: rot13\n.log"
    log = _edit_graph(
        traced,
        frame,
        lambda t: t.replace("L_x_", name),
        tmp_path / "logs" / bad_name,
        source_edit=lambda ln: (
            ln.replace('"source": "L[\'x\']"', '"source": ' + json.dumps(HOSTILE))
            if f'"frame_id": {frame},' in ln
            else ln
        ),
    )
    lines = log.read_text().split("\n")
    for start, end in _records(lines):
        if '"name": "torch_version"' in lines[start]:
            lines = _set_payload(
                lines, start, end, json.dumps({"pytorch_version": '2.13"""\nimport os #'})
            )
            break
    log.write_text("\n".join(lines))
    # tlview never makes code of log text: exec/eval never see it, compile only parses it.
    seen: list[str] = []
    real_compile, real_exec, real_eval = builtins.compile, builtins.exec, builtins.eval

    def spy(real: Any, what: str) -> Any:
        def wrapped(source: Any, *args: Any, **kwargs: Any) -> Any:
            text = source if isinstance(source, str) else ""
            flags = args[2] if len(args) > 2 else kwargs.get("flags", 0)
            if "PWNED" in text and not (what == "compile" and flags & ast.PyCF_ONLY_AST):
                seen.append(what)
            return real(source, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(builtins, "compile", spy(real_compile, "compile"))
    monkeypatch.setattr(builtins, "exec", spy(real_exec, "exec"))
    monkeypatch.setattr(builtins, "eval", spy(real_eval, "eval"))
    out = tmp_path / "out"
    res = run_cli("repro", log.parent, "--compile-id", f"{frame}/0", "-o", out)
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    assert seen == []
    script = (out / "repro.py").read_text()
    tree = ast.parse(script)
    strings = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    assert HOSTILE in strings and '2.13"""\nimport os #' in strings
    assert any(v.endswith(bad_name) for v in strings)  # LOG, the path
    # Nothing but the template's own top-level statements: no injected import or call.
    top = [type(n).__name__ for n in tree.body]
    assert "import os" not in script.replace("import os #", "")
    assert top.count("ClassDef") == 1 and "Expr" not in top[1:-1]
    assert not any(
        line.lstrip().startswith("#") and "coding" in line for line in script.splitlines()[:2]
    )
    # Run it: the hostile source is only a dict key, nothing is executed from it.
    proc = subprocess.run(
        [sys.executable, str(out / "repro.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "outputs match the shapes and dtypes in the log" in proc.stdout
    assert not (tmp_path / "PWNED").exists()


def test_graph_code_that_is_not_graph_code_is_refused(
    traced: Path, made: dict[str, Any], tmp_path: Path
) -> None:
    frame = _frame(made, "broken")
    log = _edit_graph(traced, frame, lambda t: "import os\n" + t, tmp_path / "logs" / "imports.log")
    cid = made["cases"]["broken"]["compile_id"]
    res = run_cli("repro", log, "--compile-id", cid, "-o", tmp_path / "o")
    assert res.exit_code == EXIT_NO_REPRO
    assert "the graph code is not one class" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_missing_body_of_a_higher_order_op(
    traced: Path, made: dict[str, Any], tmp_path: Path
) -> None:
    frame = _frame(made, "conded")

    def drop_true_branch(text: str) -> str:
        head, _, rest = text.partition("\n    class cond_true_0(torch.nn.Module):")
        return (
            head
            + "\n    class cond_false_0(torch.nn.Module):"
            + rest.partition("\n    class cond_false_0(torch.nn.Module):")[2]
        )

    log = _edit_graph(traced, frame, drop_true_branch, tmp_path / "logs" / "nobody.log")
    res = run_cli("repro", log, "--compile-id", f"{frame}/0", "-o", tmp_path / "o")
    assert res.exit_code == EXIT_NO_REPRO
    assert "the graph reads self.cond_true_0, which is not in the log" in res.stderr


# -- the shared corpus --------------------------------------------------------------------------
def test_corpus_dynamic_shapes_all_run(tmp_path: Path) -> None:
    res = run_cli("repro", corpus("dynamic_shapes"), "--all", "-o", tmp_path, "--run")
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"] == {"ran": 12}
    by_id = {g["compile_id"]: g for g in summary["graphs"]}
    # Output shapes follow from the logged input sizes: 1/0 returns reshape [3*s77], s77 = 10.
    assert by_id["1/0"]["outputs"] == ["Tensor float32[30]"]
    assert by_id["4/0"]["outputs"] == ["Tensor float32[6, 2]"]
    assert by_id["6/0"]["notes"] == [
        "the original compile failed after capturing this graph: ConstraintViolationError"
    ]
    assert "12 graph(s): 12 ran; 12/12 ran and match the logged shapes" in res.stdout


def test_corpus_graph_code_parses_everywhere() -> None:
    from tlview.analyze.names import graphs
    from tlview.replay import graphcode
    from tlview.replay import make as repro
    from tlview.replay.plan import graph_of

    seen = 0
    for folder in sorted({p.parent for p in corpus().rglob("*.log")}):
        rep = every_launch(folder, keep=repro.graph_keep(), jobs=1)  # a folder of several runs
        for _ref, c in graphs(rep):
            g = graph_of(c)
            assert g is not None and g.text is not None
            code = graphcode.parse(g.text)
            sizes = (g.meta or {}).get("sizes", {})
            # Every tensor placeholder is in the graph's sizes under its node name.
            for p in code.params:
                if p.tensor is not None and p.tensor.wrapper is None:
                    assert p.name.lower() in sizes, (folder, c.key, p.name)
            seen += 1
    assert seen == 99


def test_mode_zeros(traced: Path, made: dict[str, Any], tmp_path: Path) -> None:
    import tlview

    cid = made["cases"]["views"]["compile_id"]
    res = run_cli("repro", traced, "--compile-id", cid, "-o", tmp_path, "--mode", "zeros")
    assert res.exit_code == 0, res.output
    inputs = tlview.load_inputs(tmp_path / "inputs.pt")["compiles"][cid]
    assert set(inputs) == {"L['a']", "L['b']", "L['c']"}
    assert all(not t.any() for t in inputs.values())
    assert "and zero values." in (tmp_path / "repro.py").read_text()


def test_each_run_of_a_process_that_reset_dynamo_has_its_repro(tmp_path: Path) -> None:
    # reset.log: f, then (after torch._dynamo.reset()) g, then f again, all logged as 0/0.
    res = run_cli("repro", FIXTURES / "reset.log", "--all", "-o", tmp_path)
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["0/0", "written", "0/0@2", "written", "0/0@3", "written"] + [
        "3",
        "graph(s):",
        "3",
        "written",
    ]
    code = {d: (tmp_path / d / "repro.py").read_text() for d in ("0-0", "0-0-run2", "0-0-run3")}
    assert "x.sin() + 1" in code["0-0"] and "x.cos() * 2" in code["0-0-run2"]
    assert "x.sin() + 1" in code["0-0-run3"] and '"f32[4, 4][4, 1]cpu"' in code["0-0-run3"]


def test_compiles_without_a_graph_give_no_repro(tmp_path: Path) -> None:
    """A compile that is there but has no graph (it failed; records outside any compile) gives
    no repro (6), as --all says of a graph it skips; so does --all on a log with no graph."""
    log = corpus("compile_error", "dedicated_log_torch_trace_4oku3kw2.log")
    res = run_cli("repro", log, "--compile-id", "3/0", "-o", tmp_path / "a")
    assert res.exit_code == EXIT_NO_REPRO
    assert "no graph for compile '3/0' (status failed, no dynamo_output_graph record)" in res.stderr
    res = run_cli("repro", log, "--compile-id", "-/-", "-o", tmp_path / "b")
    assert res.exit_code == EXIT_NO_REPRO and "no graph outside any compile" in res.stderr
    export = corpus("tlparse-tests", "export.log")
    res = run_cli("repro", export, "--all", "-o", tmp_path / "c")
    assert res.exit_code == EXIT_NO_REPRO
    assert res.stderr.strip().endswith(
        "no dynamo_output_graph record in the log: no graph to repro"
    )


def test_graph_numbers_and_log_names_of_a_restarted_compile(tmp_path: Path) -> None:
    """demo.log's 0/1 restarted: `0/1` is the graph of 0/1_1, `0/1#2` is no graph (it has
    one); `demo.log:1/0` names 1/0 of the only log, as `report` takes it."""
    demo = FIXTURES / "demo.log"
    res = run_cli("repro", demo, "--compile-id", "0/1", "-o", tmp_path / "a")
    assert res.exit_code == 0
    assert "compile 0/1 was restarted; its graph is in attempt 0/1_1" in res.stderr
    res = run_cli("repro", demo, "--compile-id", "0/1#2", "-o", tmp_path / "b")
    assert res.exit_code == EXIT_USAGE and "no graph '0/1#2'" in res.stderr
    assert not (tmp_path / "b").exists()
    res = run_cli("repro", demo, "--compile-id", "demo.log:1/0", "-o", tmp_path / "c")
    assert res.exit_code == 0 and (tmp_path / "c" / "repro.py").is_file()


def test_a_graph_of_ops_torch_registers_on_import_runs(tmp_path: Path) -> None:
    """prims.fma (a compiled optimizer step calls it) exists only once inductor's prims are
    imported: the script imports them, and runs; the op is not the program's own custom op."""
    log = FIXTURES / "prims.log"
    out = tmp_path / "fma"
    res = run_cli("repro", log, "--compile-id", "0/0", "-o", out)
    assert res.exit_code == 0, res.output
    script = (out / "repro.py").read_text()
    assert "= torch.ops.prims.fma(l_a_, l_b_, l_c_)" in script
    assert "\nimport torch._inductor.inductor_prims  # noqa" in script
    assert "custom op" not in script
    ran = subprocess.run(
        [sys.executable, str(out / "repro.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr


def test_a_list_input_described_item_by_item_is_passed_as_a_list(tmp_path: Path) -> None:
    """torch 2.6's compiled-autograd graph takes the backward's tensors as one list input
    (`L_inputs_ : list`), which the log describes item by item (`L['inputs'][0]`, ...): the
    script passes them as a list, and runs. The second backward's graph also reads the .grad
    of the first, an item no describe_source names: skipped, saying which items."""
    log = FIXTURES / "torch26.log"
    res = run_cli("repro", log, "--all", "--run", "-o", tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    by_id = {g["compile_id"]: g for g in summary["graphs"]}
    first, second = by_id["6/0"], by_id["7/0"]
    script = (tmp_path / first["dir"] / "repro.py").read_text()
    assert "def forward(self, L_inputs_ : list):" in script
    items = ", ".join(f"inputs[\"L['inputs'][{i}]\"]" for i in range(4))
    assert f"[{items}],  # L_inputs_" in script
    assert first["status"] == "ran" and first["reason"] is None
    assert second["status"] == "skipped"
    assert second["reason"] == (
        "input L_inputs_ (list): the graph reads its items 3, 5, which no describe_source names"
    )
    assert res.exit_code == EXIT_NO_REPRO  # one graph gave no repro that ran


def _one(tmp_path: Path, log: str, compile_id: str, *extra: str) -> tuple[Any, str]:
    """`tlview repro` of one graph of a fixture log: the result and the script it wrote."""
    res = run_cli("repro", FIXTURES / log, "--compile-id", compile_id, "-o", tmp_path, *extra)
    return res, (tmp_path / "repro.py").read_text()


def test_a_graph_annotated_with_a_bare_subclass_runs(tmp_path: Path) -> None:
    """torch 2.4 annotates a subclass input with the bare class (`L_x_ :
    torch.testing._internal.two_tensor.TwoTensor`), which Python would evaluate when the
    script defines the graph: the script keeps annotations as text, and runs."""
    res, script = _one(tmp_path, "torch24.log", "1/0", "--run")
    assert res.exit_code == 0, res.output
    assert "L_x_ : torch.testing._internal.two_tensor.TwoTensor" in script
    assert "\nfrom __future__ import annotations\n" in script
    assert "# torch:      the log does not say which torch wrote it;" in script


def test_a_subclass_input_annotated_as_a_plain_tensor_is_blocked(tmp_path: Path) -> None:
    """torch 2.6 (and 2.9) annotate an input of the program's own tensor subclass as a plain
    tensor (`L_x_: "f32[3][1]cpu"`): the log's describe_tensor says it is a Pair, which tlview
    does not rebuild, so the repro is blocked rather than run on a plain stand-in."""
    res, script = _one(tmp_path, "torch26.log", "9/0")
    assert res.exit_code == EXIT_NO_REPRO
    assert 'def forward(self, L_x_: "f32[3][1]cpu"):' in script
    assert (
        "input L['x'] is a Pair, a tensor subclass tlview did not rebuild (a plain Tensor "
        "stands in, so the graph would not do what it did)"
    ) in res.stderr


def test_a_compiled_optimizer_step_runs_with_grad_off(tmp_path: Path) -> None:
    """A compiled SGD step reads the parameters as attributes (`self.self___param_groups_0__
    params___0`, dynamo's name for L['self'].param_groups[0]['params'][0]) and updates them in
    place, which torch allows on leaves that require grad only with grad off: the script binds
    them and runs the graph (and compiles it, for a backend) under torch.no_grad(), saying
    why."""
    res, script = _one(tmp_path, "optim.log", "1/0", "--run")
    assert res.exit_code == 0, res.output
    assert "= self.self___param_groups_0__params___0" in script
    assert "p.add_(buf, alpha = -0.1)" in script
    assert '    """The grad mode torch ran the graph in: off (see NOTES)."""\n' in script
    assert "    return torch.no_grad()\n" in script
    assert (  # the weight and the bias: every leaf the step changes is named
        "the graph changes L['self'].param_groups[0]['params'][0] and "
        "L['self'].param_groups[0]['params'][1] in place, leaves that require grad: torch ran "
        "it with grad off (an optimizer step does), and so does run()"
    ) in script
    assert "outputs match the shapes and dtypes in the log" in res.stdout


def test_a_subclass_annotation_with_what_it_prints_after_its_tensor() -> None:
    """DTensor prints its placements after its tensor: `DTensor(f32[8, 4][4, 1]cpu, S(0))`."""
    from tlview.replay.graphcode import tensor_type

    t = tensor_type("DTensor(f32[8, 4][4, 1]cpu, S(0))")
    assert t is not None and (t.wrapper, t.dtype, t.size, t.stride, t.device) == (
        "DTensor",
        "f32",
        [8, 4],
        [4, 1],
        "cpu",
    )
    assert tensor_type("f32[8][1]cpu)") is None  # a closing parenthesis with no wrapper


def test_a_float_made_a_tensor_is_bound_to_its_placeholder(tmp_path: Path) -> None:
    """dynamic.log 1/0: `dynamic=True` makes the float `scale` a 0-dim float64 input, described
    as `___as_tensor(L['scale'])` while the graph's placeholder is `L_scale_`: the repro passes
    the described tensor (it said the log did not describe the input, and made one up)."""
    out = tmp_path / "r"
    res = run_cli("repro", FIXTURES / "dynamic.log", "--compile-id", "1/0", "-o", out)
    assert res.exit_code == 0, res.stderr
    code = (out / "repro.py").read_text()
    assert """inputs["___as_tensor(L['scale'])"],  # L_scale_""" in code
    assert "does not describe" not in code + res.stdout + res.stderr
    ran = subprocess.run(
        [sys.executable, str(out / "repro.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert "outputs match the shapes and dtypes in the log" in ran.stdout


def test_ids_looked_up_in_a_small_embedding_stay_within_its_rows(tmp_path: Path) -> None:
    """embedding.log: token ids index an embedding of 2 rows (BERT's token types); random
    integers run from 0 to 7, so the repro failed with an IndexError unless told --mode zeros."""
    out = tmp_path / "r"
    res = run_cli("repro", FIXTURES / "embedding.log", "--compile-id", "0/0", "-o", out, "--run")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "outputs match the shapes and dtypes in the log" in res.stdout
    code = (out / "repro.py").read_text()
    assert (
        "L['ids'] indexes an embedding of 2 rows (l_self_modules_types_parameters_weight_) "
        "(graph line 8): its random values are taken modulo 2" in code
    )
    from tlview import load_inputs

    (inputs,) = load_inputs(next(out.glob("*.pt")))["compiles"].values()
    ids = inputs["L['ids']"]
    assert (ids.shape, ids.dtype) == (torch.Size([1, 3]), torch.int64)
    assert int(ids.min()) >= 0 and int(ids.max()) < 2


NO_TORCH = r"""
import sys
sys.modules["torch"] = None  # as if torch were not installed
from tlview.cli import run
sys.argv = ["tlview", *sys.argv[1:]]
run()
"""


def test_repro_without_torch_is_exit_5(tmp_path: Path) -> None:
    # As the README's table says of every command that needs torch; before reading the log.
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH, "repro", str(FIXTURES / "demo.log"), "--compile-id",
         "2/0", "-o", str(tmp_path / "r")],
        capture_output=True, text=True, cwd=ROOT,
     timeout=300,)  # fmt: skip
    assert proc.returncode == EXIT_NEEDS_EXTRA
    assert proc.stderr == (
        "tlview: writing a repro needs torch 2.4.1 to 2.15: pip install 'torch>=2.4.1,<2.16'\n"
    )
    assert not (tmp_path / "r").exists()


def test_repro_into_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("mine\n")
    for out, said in (
        (f, f"tlview: {f}: is a file, not a directory: -o names the directory"),
        (
            f / "sub",
            f"tlview: {f}: is a file, not a directory, so {f / 'sub'} cannot be made in it",
        ),
    ):
        for how in (("--compile-id", "2/0"), ("--all",)):
            res = run_cli("repro", FIXTURES / "demo.log", *how, "-o", out)
            assert res.exit_code == EXIT_REFUSED, res.output
            assert res.stderr.startswith(said) and len(res.stderr.splitlines()) == 1
    assert f.read_text() == "mine\n"


def test_notes_of_a_repro_that_ran_are_said_once(tmp_path: Path) -> None:
    # demo's 0/0 was restarted: the note that its graph is in 0/0_1, printed by the repro as it
    # runs, is not printed again by tlview.
    res = run_cli("repro", FIXTURES / "demo.log", "--compile-id", "0/0", "-o", tmp_path, "--run")
    assert res.exit_code == 0, res.output
    note = "compile 0/0 was restarted; its graph is in attempt 0/0_1"
    assert res.output.count(note) == 1
    assert f"note: {note}" in res.stdout
    # Without --run, tlview says it.
    res = run_cli("repro", FIXTURES / "demo.log", "--compile-id", "0/0", "-o", tmp_path, "--force")
    assert res.exit_code == 0, res.output
    assert res.stderr.count(f"tlview: note: {note}") == 1


def test_repro_of_views_prints_no_torch_warning(tmp_path: Path) -> None:
    # Asking a rebuilt view for its .grad made torch warn on stderr, naming tlview's source line.
    proc = subprocess.run(
        [sys.executable, "-m", "tlview", "repro", str(FIXTURES / "demo.log"), "--all"]
        + ["-o", str(tmp_path / "r")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wrote" in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-2000:]
