"""Growth checks: the same path at N and 4N units of one dimension of a log, timed in process,
best of three, so start-up hides nothing and a noisy machine moves both figures alike (issue 33).

A linear path costs about 4x at 4N and a quadratic one 16x; a check fails past `LIMIT`. No
absolute time is asserted anywhere. How to add one: docs/performance.md#growth-checks.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import TypeVar

LIMIT = 6.0  # 4N over N: linear is about 4, quadratic 16
RUNS = 3  # best of
FLOOR = 0.01  # seconds: a timing shorter than this is one scheduler blip from doubling

T = TypeVar("T")


def clock(run: Callable[[], object], reps: int) -> float:
    """The wall time of REPS calls of RUN with the collector off, as timeit does: a collection
    walks the whole test process's heap, so when one lands says nothing about RUN."""
    gc.collect()
    on = gc.isenabled()
    gc.disable()
    try:
        t = time.perf_counter()
        for _ in range(reps):
            run()
        return time.perf_counter() - t
    finally:
        if on:
            gc.enable()


def best(run: Callable[[], object], reps: int = 1, runs: int = RUNS) -> float:
    """The least wall time of RUNS timings of RUN: the figure that noise only ever adds to."""
    return min(clock(run, reps) for _ in range(runs))


def ratio(build: Callable[[int], T], run: Callable[[T], object], n: int) -> float:
    """How much longer RUN takes on BUILD(4N) than on BUILD(N); the build itself is not timed.
    A short RUN is repeated the same number of times at both sizes, so that N's timing lasts at
    least FLOOR."""
    small, large = build(n), build(4 * n)
    once = clock(lambda: run(small), 1)  # also warms caches and lazy imports
    reps = max(1, math.ceil(FLOOR / max(once, 1e-6)))
    return best(lambda: run(large), reps) / best(lambda: run(small), reps)


def assert_linear(
    build: Callable[[int], T], run: Callable[[T], object], n: int, what: str = ""
) -> None:
    """Fail when RUN over BUILD(4N) costs more than LIMIT times RUN over BUILD(N)."""
    r = ratio(build, run, n)
    if r > LIMIT:  # once more: a second core's burst can land on the large runs alone
        r = min(r, ratio(build, run, n))
    assert r <= LIMIT, f"{what or 'path'}: 4N/N = {r:.1f} (over {LIMIT}: grows faster than linear)"
