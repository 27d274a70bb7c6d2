"""Time: every path stays linear in what a log holds. Every scan of a log's text is one pass:
each text here made a search start again inside a match (a regex searched from every character
of a line, or a loop read every later line), timed at N and 4N (tests/growth.py); reading,
reporting and rebuilding many inputs, frames and stacks count the lines of tlview's own code
they run, which must grow linearly."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crafted import (
    graph,
    interned,
    metrics,
    record,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from growth import assert_linear

import tlview
from tlview.analyze.breaks import trace_frames as _trace_frames
from tlview.analyze.diff import _guard
from tlview.analyze.provenance import _kernel_lines
from tlview.model import Compile
from tlview.replay.plan import world_of
from tlview.replay.planned import Plan


def kernel_defs(n: int) -> str:
    """Kernel definitions never closed (`name = async_compile.triton(...)` with no `'''`)."""
    return "".join(f"k{i} = async_compile.triton('k{i}', '''\n    x = 1\n" for i in range(n))


def frames_on_one_line(n: int) -> str:
    """`File "f.py", line 1, in g` again and again on one line: no frame ends it."""
    return 'File "/a.py", line 1, in f ' * n


def a_long_path(n: int) -> str:
    """A guard's first line holding one path of N folders that names no `file:line in`."""
    return "___check_obj_id(L['x'], 1)  # " + "a/" * n


def calls_on_one_line(n: int) -> str:
    """Collective calls on one line, each opening a list that never closes."""
    return "x = " + "torch.ops._c10d_functional.all_gather_into_tensor([a, " * n + "\n"


def plan_of(text: str) -> Plan:
    p = Plan("0/0", Compile(log="a.log", id=None, pid=None), "a.log", None, None)
    world_of(p, text)
    return p


CASES: dict[str, tuple[Callable[[int], str], Callable[[str], object], int]] = {
    "provenance's kernel definitions": (kernel_defs, lambda t: _kernel_lines(t, {"k0"}), 3000),
    "kernel stack trace frames": (frames_on_one_line, _trace_frames, 4000),
    "diff's guard location": (a_long_path, _guard, 20_000),
    "repro's collective calls": (calls_on_one_line, plan_of, 4000),
}


@pytest.mark.slow  # each path at N and 4N, best of three
@pytest.mark.parametrize("what", sorted(CASES))
def test_text_scans_are_linear(what: str) -> None:
    build, run, n = CASES[what]
    assert_linear(build, run, n, what)


def test_scans_still_read_what_torch_writes() -> None:
    """The anchored and split scans find what torch writes: frames at line starts, a guard's
    file as its last folder, a collective's group size and name, a kernel's closing quotes."""
    trace = '  File "/w/m.py", line 7, in forward\n    y = x + 1\n  File "/w/n.py", line 9, in g\n    z\n'
    got = _trace_frames(trace)
    assert [(f.file, f.line, f.name, f.loc) for f in got] == [
        ("/w/m.py", 7, "forward", "y = x + 1"),
        ("/w/n.py", 9, "g", "z"),
    ]
    assert (
        _guard("tensor 'x' changed  # new/b/n03.py:33 in f")
        == "tensor 'x' changed  # n03.py:33 in f"
    )
    text = (
        "ag = torch.ops._c10d_functional.all_gather_into_tensor(x, 4, '0');  "
        "rs = torch.ops._c10d_functional.reduce_scatter_tensor([a, b], 'sum', 4, '3')\n"
    )
    p = plan_of(text)
    assert p.world == 4 and p.groups == ["0", "3"]
    code = "k0 = async_compile.triton('k0', '''\n    x = 1\n''', device_str='cuda')\nk0(1)\n"
    assert 1 in _kernel_lines(code, {"k0"})["k0"] and 3 in _kernel_lines(code, {"k0"})["k0"]


def _python_lines(fn: Any) -> int:
    """Lines of tlview's own code executed while FN runs (each pass of a loop is a line event;
    torch's code, whose work is per tensor, is not counted)."""

    count = [0]
    package = os.path.dirname(tlview.__file__)  # the tlview imported, wherever it is

    def lines(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
        return lines

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return lines if frame.f_code.co_filename.startswith(package) else None

    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count[0]


def _many_inputs(tmp: Path, n: int) -> Path:
    parts = [interned("/m.py"), start()]
    for i in range(n):
        parts += [storage(i, 4), tensor(i, [1], [1], i), source(i, f"L['x{i}']")]
    return write_log(tmp, f"many{n}.log", *parts, metrics())


def _grows_linearly(measure: Any, n: int) -> None:
    """Twice the inputs, records or frames, then four times: the work added the second time is
    about twice the work added the first (a linear step: 2, a quadratic one: 4), whatever it
    costs to start."""
    a, b, c = measure(n), measure(2 * n), measure(4 * n)
    assert (c - b) < 2.6 * (b - a), (a, b, c)


@pytest.mark.slow  # over a second
def test_reading_and_reporting_stay_linear(tmp_path: Path) -> None:
    """The index, the JSON and the -v text reports over many inputs, many frames in one stack,
    and many compiles' stacks (-v prints every frame)."""
    from tlview.load import read as load
    from tlview.render import REPORT_FORMATS, Options
    from tlview.runtime.output import Output

    def reported(log: Path) -> int:
        def go() -> None:
            rep = load(log, jobs=1)
            for fmt, v in (("json", 0), ("text", 1)):
                REPORT_FORMATS[fmt].renderer()(rep, Output(os.devnull, True), Options(verbosity=v))

        return _python_lines(go)

    def frames(n: int) -> int:
        stack = [{"line": i, "name": f"f{i}", "filename": 0} for i in range(n)]
        one = record("dynamo_start", {"stack": stack})
        return reported(write_log(tmp_path, f"frames{n}.log", interned("/m.py"), one))

    def stacks(n: int) -> int:
        stack = [{"line": i, "name": "f", "filename": 0} for i in range(20)]
        starts = [record("dynamo_start", {"stack": stack}, (k, 0)) for k in range(n)]
        return reported(write_log(tmp_path, f"stacks{n}.log", interned("/m.py"), *starts))

    _grows_linearly(lambda n: reported(_many_inputs(tmp_path, n)), 300)
    _grows_linearly(frames, 500)
    _grows_linearly(stacks, 50)


@pytest.mark.slow
def test_rebuilding_many_inputs_stays_linear(tmp_path: Path) -> None:
    """`inputs --emit` (meta and random) and `repro` over many one-element inputs: each tensor
    is checked once, not against every other (`emit._meta_losses` was)."""
    pytest.importorskip("torch")
    from tlview.load import read as load
    from tlview.tensors.emit import emit_file
    from tlview.tensors.options import RebuildOptions

    def emit(mode: str) -> Any:
        def measure(n: int) -> int:
            rep = load(_many_inputs(tmp_path, n), jobs=1)
            out = str(tmp_path / f"{mode}{n}.pt")
            return _python_lines(
                lambda: emit_file(rep, rep.attempts, out, RebuildOptions(mode=mode))  # type: ignore[arg-type]
            )

        return measure

    def repro(n: int) -> int:
        from tlview.replay.make import ReproOptions, graph_keep, make_one

        parts = [interned("/m.py"), start()]
        for i in range(n):
            parts += [storage(i, 4), tensor(i, [1], [1], i), source(i, f"L['x{i}']")]
        params = [(f"L_x{i}_", "f32[1][1]cpu") for i in range(n)]
        log = write_log(tmp_path, f"graph{n}.log", *parts, graph(params), metrics())
        rep = load(log, keep=graph_keep(), jobs=1)
        out = tmp_path / f"repro{n}"
        return _python_lines(lambda: make_one(rep, "0/0", out, ReproOptions()))

    emit("meta")(20)  # torch's first use (imports, caches) outside the counts
    repro(10)
    for mode in ("meta", "random"):
        _grows_linearly(emit(mode), 150)
    _grows_linearly(repro, 100)
