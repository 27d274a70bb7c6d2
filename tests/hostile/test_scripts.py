"""Repro scripts: what `tlview repro` writes from a log, and what it lets run. Every string from
a log is a Python literal and the graph's code gets the same escapes, so `cat repro.py` obeys
nothing and the code reads as it runs; without `--run` nothing of the log runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crafted import (
    OBEYED,
    arg_name,
    graph,
    interned,
    metrics,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from damage import (
    EXIT_OK,
    assert_clean_exit,
    run,
)
from planted import Hostile, check_inert, planted, watch


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    yield from planted(tmp_path, monkeypatch)


@pytest.mark.slow
def test_repro_scripts_hold_no_control_or_bidi_character(tmp_path: Path) -> None:
    """Graph code whose comment holds OSC 52, clear-screen and bidi overrides, and a string
    holding ESC: repro.py holds them as escapes, the comment reads as it runs, and it runs."""
    pytest.importorskip("torch")
    body = (
        "# File: m.py:3 \x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J x = 1 \u202e } \u2066 // tail\n"
        "s = 'a\x1bb'"
    )
    g = graph([("L_x_", "f32[4, 4][4, 1]cpu")], body=body)
    parts = [start(), storage(0, 64), tensor(0, [4, 4], [4, 1], 0), source(0, "L['x']"), g]
    log = write_log(tmp_path, "bidi.log", interned("/m.py"), *parts, metrics())
    out = tmp_path / "r"
    res = run("repro", str(log), "--compile-id", "0/0", "-o", str(out), "--run")
    assert_clean_exit(res, EXIT_OK, "repro --run")
    text = (out / "repro.py").read_text()
    assert not OBEYED.search(text.replace("\t", ""))
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in text and "\\u202e" in text
    assert "s = 'a\\x1bb'" in text


@pytest.mark.slow
def test_repro_writes_but_runs_nothing_from_the_log(evil: Hostile, tmp_path: Path) -> None:
    """`tlview repro` (without --run) writes scripts from the log and runs none of it."""
    pytest.importorskip("torch")
    import tlview.replay.make  # noqa: F401  (torch imported before watching)

    with watch() as events:
        res = run("repro", str(evil.log), "--all", "-o", str(tmp_path / "repros"))
    assert res.exit_code in (0, 6), res.stderr  # 6: some graph gave no repro (README)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    check_inert(evil, events)


# -- the op check: what a graph may call ----------------------------------------------------------
def graph_text(line: str) -> str:
    """A graph module's code as fx prints it, with LINE among its statements."""
    return (
        "class GraphModule(torch.nn.Module):\n"
        '    def forward(self, L_x_: "f32[4][1]cpu"):\n'
        "        relu = torch.nn.functional.relu(L_x_);  L_x_ = None\n"
        f"        {line}\n"
        "        return (relu,)\n"
    )


NOT_FX = {
    'c = __import__("os").system("touch marker")': "a call of \"__import__('os').system\"",
    "c = eval('1')": "the builtin eval",
    "c = exec('x = 1')": "the builtin exec",
    "c = open('/etc/passwd')": "the builtin open",
    "c = getattr(torch, 'os')": "the builtin getattr",
    "c = compile('1', 'f', 'eval')": "the builtin compile",
    "c = globals()": "the builtin globals",
    "c = max(['1'], key=eval)": "the builtin eval",
    "c = relu.__class__": "the attribute __class__",
    "c = torch.tensor(1).data": "an attribute of a call's result (data)",
    "c = [print][0]('x')": "a call of '[print][0]'",
    "c = torch.ops.load_library('/tmp/evil.so')": "torch.ops.load_library",
}


@pytest.mark.parametrize("line", sorted(NOT_FX))
def test_code_fx_never_prints_is_no_graph(line: str) -> None:
    """A call of a call's result, a builtin fx never names (called or passed on), a dunder
    attribute: no graph fx printed, so no repro (before: `__import__("os").system(...)` passed,
    and `repro --run` ran it)."""
    from tlview.replay import graphcode as gc

    with pytest.raises(gc.GraphCodeError, match="which fx never prints") as e:
        gc.parse(graph_text(line))
    assert NOT_FX[line] in str(e.value)


def test_what_fx_prints_still_reads() -> None:
    from tlview.replay import graphcode as gc

    for line in ("c = slice(None, None, 2)", "c = len(relu)", "c = torch.float32",
                 "c = relu.view(4)", "c = max(relu.size(0), 2)", "c = device(type='cpu')",
                 "c = torch.ops.aten.add.Tensor(relu, 1)"):  # fmt: skip
        code = gc.parse(graph_text(line))
        assert "torch.nn.functional.relu" in code.torch_names, line


@pytest.mark.slow  # torch: each name resolved
def test_a_torch_name_outside_torch_is_written_never_run(tmp_path: Path) -> None:
    """`torch.os.system(...)`, `torch.load(...)`, `torch.hub.load(...)`: the repro is written
    with the reason (exit 6) and `--run` runs none of it; torch's own names pass."""
    pytest.importorskip("torch")
    marker = tmp_path / "marker"
    for line in (f"c = torch.os.system('touch {marker}')", f"c = torch.load('{marker}')",
                 f"c = torch.hub.load('{marker}', 'x')"):  # fmt: skip
        body = "\n".join(graph_text(line).splitlines()[2:4]).strip()
        parts = [start(), storage(0, 16), tensor(0, [4], [1], 0), source(0, "L['x']")]
        g = graph([("L_x_", "f32[4][1]cpu")], body=body.replace("        ", ""))
        log = write_log(tmp_path, "t.log", interned("/m.py"), *parts, g, metrics())
        out = tmp_path / "r"
        res = run("repro", str(log), "--compile-id", "0/0", "-o", str(out), "--run")
        assert res.exit_code == 6, res.output
        assert "not code fx prints, not run" in res.stderr, res.stderr
        assert (out / "repro.py").exists() and not marker.exists()
    import torch

    from tlview.replay.plan import _not_torch

    for name in ("torch.nn.functional.relu", "torch._C._nn.linear", "torch.Tensor.add",
                 "torch.distributed.tensor.placement_types.Replicate", "torch.float32",
                 "torch.contiguous_format", "torch.strided", "torch.channels_last"):  # fmt: skip
        assert _not_torch(torch, name) is None, name


@pytest.mark.slow  # every graph of the corpus and the fixtures
def test_every_graph_torch_wrote_passes_the_check() -> None:
    """The check refuses no graph torch wrote: every dynamo graph of the shared corpus and the
    fixtures that reads as graph code names only what fx prints and torch's own names."""
    import torch
    from helpers import CORPUS, FIXTURES

    import tlview
    from tlview.replay import graphcode as gc
    from tlview.replay.make import graph_keep
    from tlview.replay.plan import _not_torch

    seen = 0
    for log in sorted([*CORPUS.rglob("*.log"), *FIXTURES.rglob("*.log")]):
        for c in tlview.read(str(log), keep=graph_keep(), jobs=1).attempts:
            for g in c.graphs:
                try:
                    code = gc.parse(g.text or "")
                except gc.GraphCodeError as e:
                    assert "fx never prints" not in str(e), (log, c.key, str(e))
                    continue
                seen += 1
                for name in code.torch_names:
                    assert _not_torch(torch, name) is None, (log, c.key, name)
    assert seen > 100, seen


# -- strings of the log inside repro.py -----------------------------------------------------------
MARK = "tlview_script_mark"
# Sources, a dtype and a device that would end a string literal, a comment or a line of
# repro.py if written raw: each must stay one string of the script.
ODD = [
    f"L['{MARK}\\n'] + __import__('os').system('x') #",
    f'L["{MARK}"""\'\'\'"] ; {MARK}()',
    f"L['{MARK}\\\\'] \\N{{BULLET}} {{0}} %s",
    f"L['{MARK}\r\x1b[2J\u202e']",
]


@pytest.mark.slow  # torch: the repro is planned and written
def test_strings_of_the_log_stay_strings_in_repro(tmp_path: Path) -> None:
    """Hostile sources (quotes of every kind, line ends, backslashes, format fields, escapes),
    a dtype and a device the log gives: repro.py parses, and every one is a string constant of
    it (no name, call or comment of the script holds the marker)."""
    import ast

    pytest.importorskip("torch")
    parts = [interned(f"/{MARK}'\"\n.py"), start()]
    params = []
    for i, src in enumerate(ODD):
        parts += [storage(i, 16), tensor(i, [4], [1], i), source(i, src)]
        params.append((arg_name(src), "f32[4][1]cpu"))
    parts += [storage(9, 16), tensor(9, [4], [1], 9, dtype=f"torch.float32'); {MARK}('")]
    parts += [source(9, "L['y']"), graph(params), metrics()]
    log = write_log(tmp_path, "odd.log", *parts)
    out = tmp_path / "r"
    res = run("repro", str(log), "--compile-id", "0/0", "-o", str(out))
    assert res.exit_code in (0, 6), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    script = (out / "repro.py").read_text()
    tree = ast.parse(script)
    placeholders = {arg_name(src) for src in ODD}  # the graph's own names, as dynamo names them
    for node in ast.walk(tree):
        own = getattr(node, "id", None) or getattr(node, "arg", None)
        if isinstance(node, ast.Name | ast.arg) and own in placeholders:
            continue
        if isinstance(node, ast.Name | ast.Attribute | ast.arg | ast.alias):
            assert MARK not in ast.unparse(node), ast.unparse(node)
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert sum(isinstance(v, str) and v in ODD for v in strings) >= len(ODD)  # each whole
