"""Growth checks: the same path at N and 4N units of one dimension of a log, timed in process,
best of three, so start-up hides nothing and a noisy machine moves both figures alike (issue 33).

A linear path costs about 4x at 4N and a quadratic one 16x; a check fails past `LIMIT`. No
absolute time is asserted anywhere. How to add one: docs/performance.md#growth-checks.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

LIMIT = 6.0  # 4N over N: linear is about 4, quadratic 16
RUNS = 3  # best of

T = TypeVar("T")


def best(run: Callable[[], object], runs: int = RUNS) -> float:
    """The least wall time of RUNS calls of RUN: the figure that noise only ever adds to."""
    times = []
    for _ in range(runs):
        gc.collect()
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


def ratio(build: Callable[[int], T], run: Callable[[T], object], n: int) -> float:
    """How much longer RUN takes on BUILD(4N) than on BUILD(N); the build itself is not timed."""
    small, large = build(n), build(4 * n)
    run(small)  # warm caches and lazy imports outside the figures
    return best(lambda: run(large)) / best(lambda: run(small))


def assert_linear(
    build: Callable[[int], T], run: Callable[[T], object], n: int, what: str = ""
) -> None:
    """Fail when RUN over BUILD(4N) costs more than LIMIT times RUN over BUILD(N)."""
    r = ratio(build, run, n)
    if r > LIMIT:  # once more: a second core's burst can land on the large runs alone
        r = min(r, ratio(build, run, n))
    assert r <= LIMIT, f"{what or 'path'}: 4N/N = {r:.1f} (over {LIMIT}: grows faster than linear)"
