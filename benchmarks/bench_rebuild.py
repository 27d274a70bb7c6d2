"""Time tlview's rebuild of a compile's inputs against torch doing the same from real tensors.

    python benchmarks/bench_rebuild.py                  # writes a log with ~600 inputs first
    python benchmarks/bench_rebuild.py --log LOG        # the largest compile of a real log
    python benchmarks/bench_rebuild.py --layers 500 --runs 7

Takes the compile with the most inputs and times, in this one process (best of --runs, runs
of tlview and of torch interleaved):
- fake: `tlview.rebuild.fake_inputs` (MetaTensorDescs from the log through MetaConverter, in a
  ShapeEnv, and with a plain `FakeTensorMode()`), against torch's own fakification of the same
  tensors, `FakeTensorMode().from_tensor(t)` for each (target: at most 2x);
- meta: `real_inputs(mode="meta")` against the same `from_tensor` (target: at most 2x);
- random: `real_inputs(mode="random")` against `torch.randn` over the same bytes, one call per
  storage (target: at most 1.5x).
The "original" tensors given to `from_tensor` are the random rebuild: the same metadata.

tlview plans a compile once (sizes, storages and checks from its records) and keeps the plans
for later rebuilds of it; torch's side starts from sizes or tensors already made. Each row gives
both tlview times: "again" (the plans kept from an earlier call, as the torch side has its
sizes) and "first" (the plans made inside the timed call, dropped untimed before each run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tlview.load import load
from tlview.rebuild import fake_inputs, forget_plans, plan_compile, real_inputs

PROGRAM = """
import sys, torch, torch.nn as nn
layers = int(sys.argv[1])
blocks = [nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256)) for _ in range(layers // 2)]
model = nn.Sequential(*blocks)
torch.compile(model, backend="eager")(torch.randn(32, 256))
"""


def make_log(layers: int, where: Path) -> Path:
    """A real log: an MLP of `layers` Linear+LayerNorm pairs compiled once (4 inputs per pair)."""
    env = {**os.environ, "TORCH_TRACE": str(where)}
    subprocess.run(
        [sys.executable, "-c", PROGRAM, str(layers)], env=env, check=True, capture_output=True
    )
    return next(where.glob("*.log"))


def trio(ours: Callable[[], Any], base: Callable[[], Any], runs: int) -> tuple[float, ...]:
    """Best times of tlview's first call (plans made), tlview again (plans kept), and torch.

    Their runs are interleaved so machine load hits all three alike: each round drops the kept
    plans (untimed), times a first call (which keeps its plans), a call again, then torch.
    What a run returns is dropped after its time is taken.
    """
    times: tuple[list[float], ...] = ([], [], [])
    for _ in range(runs):
        forget_plans()
        for fn, out in ((ours, times[0]), (ours, times[1]), (base, times[2])):
            t0 = time.perf_counter()
            kept = fn()
            out.append(time.perf_counter() - t0)
            del kept
    return tuple(min(t) for t in times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, help="a TORCH_TRACE log (default: generate one)")
    ap.add_argument("--layers", type=int, default=300, help="layers of the generated model")
    ap.add_argument("--runs", type=int, default=9, help="runs per measurement (best is kept)")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        log = args.log or make_log(args.layers, Path(tmp))
        report = load(log)
    c = max(report.attempts, key=lambda c: len(c.inputs))
    groups = plan_compile(c)
    nbytes = sum(sum(g.storages.values()) for g in groups)
    originals = real_inputs(c, seed=0).tensors
    tensors = list({id(t): t for t in originals.values()}.values())
    print(
        f"log {log.name if args.log else '(generated)'}: compile {c.key}, "
        f"{len(c.inputs)} inputs, {len(tensors)} tensors, {nbytes / 2**20:.1f} MiB"
    )

    def torch_fake() -> list[Any]:
        mode = FakeTensorMode()
        return [mode.from_tensor(t) for t in tensors]

    def torch_randn() -> list[Any]:
        return [torch.randn(n // 4) for g in groups for n in g.storages.values()]  # kept, as ours

    fake_what, randn_what = "FakeTensorMode().from_tensor", "torch.randn, same bytes"
    rows = [
        (
            "fake, ShapeEnv with the log's symbols",
            trio(lambda: fake_inputs(c), torch_fake, args.runs),
            2.0,
            fake_what,
        ),
        (
            "fake, plain FakeTensorMode()",
            trio(lambda: fake_inputs(c, fake_mode=FakeTensorMode()), torch_fake, args.runs),
            2.0,
            fake_what,
        ),
        ("meta", trio(lambda: real_inputs(c, mode="meta"), torch_fake, args.runs), 2.0, fake_what),
        (
            "random",
            trio(lambda: real_inputs(c, mode="random"), torch_randn, args.runs),
            1.5,
            randn_what,
        ),
    ]
    print(
        f"{'tlview':38} {'first':>7} {'again':>7}  {'torch':28} {'ms':>7}  "
        f"{'ratio first':>11} {'again':>6}  target"
    )
    for name, (first, again, base), target, what in rows:
        flags = " ".join("ok" if t / base <= target else "OVER" for t in (first, again))
        print(
            f"{name:38} {first * 1e3:7.1f} {again * 1e3:7.1f}  {what:28} {base * 1e3:7.1f}  "
            f"{first / base:11.2f} {again / base:6.2f}  <= {target} {flags}"
        )
    print(
        "ms: best of the runs; first: tlview's plans made in the call; again: the plans kept "
        "from an earlier call"
    )
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores, {args.threads} torch thread(s), "
        f"best of {args.runs}"
    )


if __name__ == "__main__":
    main()
