"""Hostile logs, third round (issue 34): every scan of a log's text is one pass. Each text here
made a search start again inside a match (a regex searched from every character of a line, or
a loop read every later line): each is timed at N and 4N (tests/growth.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from growth import assert_linear

from tlview.analyze.diff import _guard
from tlview.analyze.provenance import _kernel_lines
from tlview.analyze.summary import _trace_frames
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
