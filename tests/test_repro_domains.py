"""`tlview repro` on graphs that index with their integer inputs, call a third-party custom op,
and whose outputs are checked against the log and against eager (issue 37). The logs are
written by torch (tests/fixtures/make_fixtures.py: index_domains, third_party_op)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli

pytestmark = pytest.mark.slow  # repros are written and run with torch
torch = pytest.importorskip("torch")

EXIT_NO_REPRO = 6
THIRD_PARTY = FIXTURES / "thirdparty"


def test_integer_inputs_are_kept_in_the_domain_their_uses_index(tmp_path: Path) -> None:
    """index_domains.log 0/0_1: random integers 0 to 7 indexed past an 11-row and a 2-row
    embedding (the buffer through expand and gather), 3 classes, 9 cache slots after
    `arange(4) + counter`, and one_hot of 5; each input is kept in range, the script says
    where each domain came from, and every output is the log's."""
    out = tmp_path / "r"
    res = run_cli("repro", FIXTURES / "index_domains.log", "--all", "-o", out, "--run")
    assert res.exit_code == 0, res.stdout + res.stderr
    summary = json.loads((out / "summary.json").read_text())
    graphs = {g["compile"]: g for g in summary["graphs"]}
    assert {k: g["status"] for k, g in graphs.items()} == {"0/0_1": "ran", "1/0": "ran"}
    assert graphs["0/0_1"]["verdicts"] == [
        {"output": name, "verdict": "reproduced"} for name in ("view_3", "loss", "oh", "sel")
    ]
    assert "  output loss: reproduced" in res.stdout
    code = (out / "0-0_1" / "repro.py").read_text()
    for line in (
        "#   \"L['ids']\": 'values 0 to 10: it indexes an embedding of 11 rows "
        "(l_self_modules_tok_parameters_weight_) (graph line 22)'",
        "#   \"L['self']._buffers['type_ids']\": 'values 0 to 1: it indexes an embedding of 2 "
        "rows (l_self_modules_types_parameters_weight_) (graph line 23)'",
        '#   "L[\'pos\']": "values 0 to 7: it indexes gather of tt\'s dim 1, 8 long (graph line 19)"',
        "#   \"L['labels']\": 'values 0 to 2: it indexes cross_entropy targets of 3 classes "
        "(graph line 32)'",
        "#   \"L['route']\": 'values 0 to 4: it indexes one_hot of 5 classes (graph line 43)'",
    ):
        assert line in code
    assert (
        "L['counter'] is a 0-dim integer (a counter, such as a cache position) that reaches "
        "index_copy_ of l_self_buffers_cache_'s dim 0, 9 long (graph line 40) after adding up "
        "to 3: it starts at 0"
    ) in code
    from tlview import load_inputs

    inputs = load_inputs(out / "0-0_1" / "inputs.pt")["compiles"]["0/0_1"]
    tops = {"L['ids']": 11, "L['self']._buffers['type_ids']": 2, "L['labels']": 3}
    tops |= {"L['pos']": 8, "L['route']": 5}
    for source, top in tops.items():
        t = inputs[source]
        assert int(t.min()) >= 0 and int(t.max()) < top, source
    assert int(inputs["L['counter']"]) == 0


def test_zeros_mode_still_runs_the_index_graph(tmp_path: Path) -> None:
    """--mode zeros keeps every index in range too, and says where the domains came from."""
    out = tmp_path / "r"
    res = run_cli(
        "repro", FIXTURES / "index_domains.log", "--compile-id", "0/0_1", "-o", out, "--run",
        "--mode", "zeros",
    )  # fmt: skip
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "output sel: reproduced" in res.stdout


def test_a_third_party_op_needs_allow_import_and_runs_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """third_party_op.log calls tlview_testops::double, which the package registers when
    imported: where no module of that name is importable, the reason says where the graph calls
    it and what to pass; once it is, the flag names it; with it, the repro imports it and runs;
    without it again, in this process that now has the op, the reason still names it."""
    res = run_cli("repro", FIXTURES / "third_party_op.log", "--compile-id", "0/0", "-o", tmp_path)
    assert res.exit_code == EXIT_NO_REPRO
    assert (
        "the repro will not run here: the graph calls the custom op tlview_testops::double, "
        "which the program registered at run time; the graph calls it from "
    ) in res.stderr
    assert (
        "the program's own code, and no module here is named 'tlview_testops': pass "
        "--allow-import with the module that defines the op"
    ) in res.stderr
    monkeypatch.syspath_prepend(str(THIRD_PARTY))
    res = run_cli("repro", FIXTURES / "third_party_op.log", "--compile-id", "0/0", "-o", tmp_path)
    assert res.exit_code == EXIT_NO_REPRO
    assert (
        "the repro will not run here: the graph calls the custom op tlview_testops::double, "
        "which the program registered at run time: pass --allow-import tlview_testops"
    ) in res.stderr
    monkeypatch.setenv("PYTHONPATH", str(THIRD_PARTY))
    out = tmp_path / "ok"
    res = run_cli(
        "repro", FIXTURES / "third_party_op.log", "--compile-id", "0/0", "-o", out, "--run",
        "--allow-import", "tlview_testops",
    )  # fmt: skip
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "output add: reproduced" in res.stdout
    assert (
        "\nimport tlview_testops  # noqa: E402, F401 - --allow-import"
        in (out / "repro.py").read_text()
    )
    # This process has the op now, a fresh one does not: without the flag it is still blocked.
    res = run_cli(
        "repro", FIXTURES / "third_party_op.log", "--compile-id", "0/0", "-o", tmp_path / "again"
    )
    assert res.exit_code == EXIT_NO_REPRO
    assert "pass --allow-import tlview_testops to import the package" in res.stderr


def test_allow_import_refuses_what_is_not_a_module_name(tmp_path: Path) -> None:
    res = run_cli(
        "repro", FIXTURES / "third_party_op.log", "--compile-id", "0/0", "-o", tmp_path,
        "--allow-import", "os; rm",
    )  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr.strip() == "tlview: --allow-import 'os; rm': not a module name"


def test_check_accuracy_compares_eager_with_the_backend(tmp_path: Path) -> None:
    """--check-accuracy: each output's largest difference, eager against aot_eager."""
    out = tmp_path / "r"
    res = run_cli(
        "repro", FIXTURES / "index_domains.log", "--all", "-o", out, "--run", "--check-accuracy"
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    graph = json.loads((out / "summary.json").read_text())["graphs"][0]
    assert [(a["output"], a["verdict"], a["tolerance"]) for a in graph["accuracy"]] == [
        ("view_3", "agrees", 0.0),
        ("loss", "agrees", 1e-4),
        ("oh", "agrees", 0.0),
        ("sel", "agrees", 1e-4),
        ("L['self']._buffers['cache']", "agrees", 1e-4),  # index_copy_ wrote into it
    ]
    assert graph["accuracy"][-1]["what"] == "changed in place"
    assert "accuracy loss: agrees (largest difference 0.0, tolerance 0.0001)" in res.stdout


def test_check_accuracy_needs_run(tmp_path: Path) -> None:
    res = run_cli(
        "repro", FIXTURES / "index_domains.log", "--all", "-o", tmp_path, "--check-accuracy"
    )
    assert res.exit_code == 2
    assert "--check-accuracy needs --run" in res.stderr


def test_an_output_whose_stride_differs_from_the_log_is_not_reproduced(tmp_path: Path) -> None:
    """A repro edited so that an output comes back transposed: the log's annotation has the
    other stride, so the run says what differs for that output and exits 1."""
    res = run_cli("repro", FIXTURES / "index_domains.log", "--compile-id", "0/0_1", "-o", tmp_path)
    assert res.exit_code == 0, res.stderr
    script = tmp_path / "repro.py"
    text = script.read_text()
    ret = "return (view_3, loss, oh, sel)"
    assert ret in text
    script.write_text(text.replace(ret, "return (view_3, loss, oh, sel.t().contiguous().t())"))
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=300
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "output sel: stride [1, 4], the log has [4, 1]" in ran.stdout
    assert "output loss: reproduced" in ran.stdout


def test_check_accuracy_reports_the_outputs_inductor_draws_differently(tmp_path: Path) -> None:
    """rng.log draws torch.rand_like inside the graph: inductor draws its own numbers, so that
    output disagrees with eager (exit 6, named with its largest difference); the other agrees;
    under aot_eager both agree."""
    log = FIXTURES / "rng.log"
    res = run_cli("repro", log, "--compile-id", "0/0", "--run", "--check-accuracy")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "accuracy add: agrees (largest difference 0.0, tolerance 0.0001)" in res.stdout
    res = run_cli(
        "repro", log, "--compile-id", "0/0", "--run", "--check-accuracy", "--backend", "inductor"
    )
    assert res.exit_code == EXIT_NO_REPRO
    assert "accuracy mul: agrees (largest difference 0.0, tolerance 0.0001)" in res.stdout
    assert (
        "compile 0/0: the repro is inaccurate: outputs differ from eager beyond the tolerance: "
        "add (largest difference "
    ) in res.stderr
    assert "mul (" not in res.stderr


def test_inductor_may_lay_out_an_output_unlike_the_eager_graph(tmp_path: Path) -> None:
    """inductor_strides.log: eager's cat of an empty cache and a transposed projection is
    contiguous (the graph's annotation), inductor's is the transposed layout (the logged run
    printed (112, 8, 16, 1)). Run as it is, the graph reproduces the annotation exactly;
    compiled with inductor again, the other stride is said and the output still reproduces;
    a stride that differs when the graph runs as it is stays a mismatch (test above)."""
    log = FIXTURES / "inductor_strides.log"
    res = run_cli("repro", log, "--compile-id", "0/0", "-o", tmp_path / "a", "--run")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "output cat: reproduced\n" in res.stdout
    res = run_cli("repro", log, "--all", "-o", tmp_path / "b", "--run", "--backend", "inductor")
    assert res.exit_code == 0, res.stdout + res.stderr
    verdicts = json.loads((tmp_path / "b" / "summary.json").read_text())["graphs"][0]["verdicts"]
    assert verdicts == [
        {
            "output": "cat",
            "verdict": "reproduced (inductor's strides [112, 8, 16, 1]; "
            "the eager graph's [112, 56, 8, 1])",
        },
        {"output": "sum_1", "verdict": "reproduced"},
    ]


def test_jagged_inputs_with_nested_int_sizes_still_reproduce(tmp_path: Path) -> None:
    """The corpus's subclasses logs size jagged tensors with nested ints (j1), which are no
    number an index domain is read from: every graph still runs and reproduces."""
    from helpers import corpus

    out = tmp_path / "r"
    res = run_cli("repro", corpus("subclasses"), "--all", "-o", out, "--run")
    assert res.exit_code == 0, res.stdout + res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"ran": 6}
    assert all(v["verdict"] == "reproduced" for g in summary["graphs"] for v in g["verdicts"])


def test_check_accuracy_compares_eager_with_the_logged_backend(tmp_path: Path) -> None:
    """With no --backend, eager is compared with the backend the log shows: inductor for
    inductor_strides.log (it logged inductor's code), aot_eager for index_domains.log (it
    logged none), named in the terminal and in summary.json."""
    log = FIXTURES / "inductor_strides.log"
    res = run_cli("repro", log, "--all", "-o", tmp_path / "a", "--run", "--check-accuracy")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "accuracy: eager against inductor, the graph handed to it\n" in res.stdout
    graph = json.loads((tmp_path / "a" / "summary.json").read_text())["graphs"][0]
    assert graph["accuracy_backend"] == "inductor"
    assert [(a["output"], a["verdict"]) for a in graph["accuracy"]] == [
        ("cat", "agrees"),
        ("sum_1", "agrees"),
    ]
    script = (tmp_path / "a" / "0-0" / "repro.py").read_text()
    assert "ACCURACY_BACKEND = 'inductor'  # the logged run's backend" in script
    log = FIXTURES / "index_domains.log"
    res = run_cli("repro", log, "--all", "-o", tmp_path / "b", "--run", "--check-accuracy")
    assert res.exit_code == 0, res.stdout + res.stderr
    graph = json.loads((tmp_path / "b" / "summary.json").read_text())["graphs"][0]
    assert graph["accuracy_backend"] == "aot_eager"


def test_check_accuracy_help_names_the_default_backend() -> None:
    """`repro --help` says what the default is (it once said aot_eager after that changed)."""
    res = run_cli("repro", "--help")
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert "default the logged run's: inductor if it logged inductor's code, else aot_eager" in text
