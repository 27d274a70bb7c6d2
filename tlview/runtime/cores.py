"""Whether a second core can read beside this process, and what to do here while it reads."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

# Work for this process to do while its copy still reads, and about how long it takes (ns).
_MEANWHILE: ContextVar[tuple[Callable[[], object], float] | None] = ContextVar(
    "tlview_split_meanwhile", default=None
)


@contextlib.contextmanager
def meanwhile(job: Callable[[], object], ns: float) -> Iterator[None]:
    """A log read inside in two parts runs `job` here once this process has read its part, while
    its copy still reads: this part is made about `ns` (what the job takes) shorter, down to an
    eighth of the log for a long job. For work that is needed after reading anyway (importing
    the page's renderer, or torch); unsplit, it is not run.
    """
    token = _MEANWHILE.set((job, ns))
    try:
        yield
    finally:
        _MEANWHILE.reset(token)


def spare_core() -> bool:
    """A second core and fork, not turned off (TLVIEW_NO_SPLIT), not in a pool worker (the pool
    already keeps the cores busy), and one thread: a fork copies no other (a Dask client's
    threads stay after it ran). Also asked before writing a report in two (runtime/halves.py)."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "fork") or os.environ.get("TLVIEW_NO_SPLIT"):
        return False
    if threading.active_count() != 1:
        return False
    mp = sys.modules.get("multiprocessing")  # never imported: not a pool worker either
    return mp is None or not mp.current_process().daemon
