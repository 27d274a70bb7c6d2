"""One small program run under TORCH_TRACE in a few variants, once per test session.

`base` twice (two identical runs), `break` (one new graph break), `dtype` (one input dtype
changed). Every variant also drives a second function past `recompile_limit`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = r"""
import sys
import torch

mode = sys.argv[1]
torch._dynamo.config.recompile_limit = 2


@torch.compile(backend="eager")
def f(x, w):
    y = x * w
    y = y + 1
    if mode == "break":
        torch._dynamo.graph_break()
    return (y * 2).sum()


@torch.compile(backend="eager")
def g(a):
    return a + 1


w = torch.ones(4)
dtype = torch.float64 if mode == "dtype" else torch.float32
for n in (3, 5):
    f(torch.ones(n, 4, dtype=dtype), w)
for dt in (torch.float32, torch.int32, torch.int64):
    g(torch.ones(2, dtype=dt))
"""
BREAK_LINE = 14  # the line of torch._dynamo.graph_break() in PROGRAM
VARIANTS = ("base", "base2", "break", "dtype")


def run(tmp: Path, variant: str) -> Path:
    """Run the program in VARIANT (base2 is base again); return its trace directory."""
    prog = tmp / "prog.py"
    if not prog.exists():
        prog.write_text(PROGRAM)
    trace = tmp / f"trace_{variant}"
    env = dict(os.environ, TORCH_TRACE=str(trace))
    mode = "base" if variant == "base2" else variant
    done = subprocess.run(
        [sys.executable, str(prog), mode],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(trace.glob("*.log")), f"no log written in {trace}"
    return trace


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The trace directory of each variant, run one after another (times stay comparable)."""
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("runs")
    return {v: run(tmp, v) for v in VARIANTS}
