"""How many cores this process may use, whether a forked copy can work beside it, and what to
do here while it does."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import NamedTuple


class Meanwhile(NamedTuple):
    """Work for this process while forked copies still read a large log, and about how long it
    takes (ns): work needed after reading anyway (importing the page's renderer, or torch). Its
    part of the log is made about that much shorter; read in one process, it is not run."""

    job: Callable[[], object]
    ns: float


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def spare_core() -> bool:
    """A second core and fork, not turned off (TLVIEW_NO_SPLIT), not in a pool worker (the pool
    already keeps the cores busy), and one thread: a fork copies no other (a Dask client's
    threads stay after it ran). Also asked before writing a report in two (runtime/halves.py)."""
    if cores() < 2 or not hasattr(os, "fork") or os.environ.get("TLVIEW_NO_SPLIT"):
        return False
    if threading.active_count() != 1:
        return False
    mp = sys.modules.get("multiprocessing")  # never imported: not a pool worker either
    return mp is None or not mp.current_process().daemon
