"""Run one job per log in parallel: in this process, on a pool of processes, or on Dask.

The jobs are pure functions of one item (a log to read) and a progress callback; which stage's
work they do is the caller's business, so this module imports none of the stages.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from tlview.errors import EXIT_NEEDS_EXTRA, EXIT_NO_TRACE, TlviewError
from tlview.runtime import store
from tlview.runtime.cores import cores

if TYPE_CHECKING:
    from multiprocessing.queues import SimpleQueue
    from typing import Protocol

    from distributed import Client

    class Progress(Protocol):
        """A read's progress bar (`logs.progress.Bar`): called with bytes read, `log_done()`
        per log."""

        def __call__(self, n: int) -> None: ...

        def log_done(self) -> None: ...


Item = TypeVar("Item")
R = TypeVar("R")
# One job: an item, and where to say how many bytes of it were read (None: nowhere).
Job = Callable[[Item, Callable[[int], None] | None], R]
# `start_bar`, where given, starts the bar: after the pool is up, so no thread runs at fork.


def default_jobs() -> int:
    """The cores this process may run on."""
    return cores()


# `each`, where given, is called here on each result as it comes back (in finish order), and
# what it returns is kept: the caller's chance to put a result on disk before the next arrives.
Each = Callable[[R], R] | None


def map_local(
    job: Job[Item, R],
    items: Sequence[Item],
    jobs: int,
    start_bar: Callable[[], Progress] | None = None,
    each: Each[R] = None,
) -> list[R]:
    """Every item's job, on a pool of JOBS processes when there is more than one item."""
    workers = min(jobs, len(items))
    if workers <= 1:
        return map_each(job, items, start_bar, each)
    return map_pool(job, items, workers, start_bar, each)


def map_each(
    job: Job[Item, R],
    items: Sequence[Item],
    start_bar: Callable[[], Progress] | None = None,
    each: Each[R] = None,
) -> list[R]:
    """The jobs one after another in this process."""
    bar = start_bar() if start_bar else None
    out = []
    for item in items:
        r = job(item, bar)
        out.append(each(r) if each is not None else r)
        if bar is not None:
            bar.log_done()
    return out


def map_pool(
    job: Job[Item, R],
    items: Sequence[Item],
    workers: int,
    start_bar: Callable[[], Progress] | None = None,
    each: Each[R] = None,
) -> list[R]:
    """The jobs on a pool of WORKERS processes; results come back in the items' order."""
    import multiprocessing as mp

    # fork starts workers in milliseconds; the pool is made before any thread (the bar's).
    ctx = mp.get_context("fork" if sys.platform == "linux" else "spawn")
    queue = ctx.SimpleQueue() if start_bar else None
    results: list[R | None] = [None] * len(items)
    store.temp_dir()  # forked workers spill into this process's temp directory, removed with it
    # Frozen, this process's objects are never scanned by a worker's collector, so forked
    # workers do not copy the pages they sit on.
    gc.freeze()
    try:
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(queue,))
    finally:
        gc.unfreeze()
    with pool:
        bar = drain = None
        if start_bar is not None and queue is not None:
            bar = start_bar()
            drain = threading.Thread(target=_drain, args=(queue, bar), daemon=True)
            drain.start()
        try:
            tasks = [(i, job, item) for i, item in enumerate(items)]
            for i, r in pool.imap_unordered(_pool_job, tasks):
                results[i] = each(r) if each is not None else r
                if bar is not None:
                    bar.log_done()
        finally:
            if drain is not None and queue is not None:
                queue.put(None)
                drain.join()
    return [r for r in results if r is not None]


_queue: SimpleQueue[int | None] | None = (
    None  # in a pool worker: where it sends bytes read, for the parent's bar
)


def _init_worker(queue: SimpleQueue[int | None] | None) -> None:
    global _queue
    _queue = queue
    # The pool ends its workers with SIGTERM: they go quietly, not by tlview's own handler
    # (its temp files, theirs too, are removed by tlview).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _send(n: int) -> None:
    _queue.put(n)  # type: ignore[union-attr]  # handed out only with a queue (_pool_job)


def _pool_job(task: tuple[int, Job[Item, R], Item]) -> tuple[int, R]:
    i, job, item = task
    return i, job(item, _send if _queue is not None else None)


def _drain(queue: SimpleQueue[int | None], bar: Progress) -> None:
    while (n := queue.get()) is not None:
        bar(n)


def connect(address: str) -> Client:
    """A Dask client of the scheduler at ADDRESS; one line if Dask is missing or unreachable."""
    try:
        from distributed import Client
    except ImportError:
        raise TlviewError(
            "--scheduler needs Dask: pip install 'dask[distributed]>=2024.1' 'fsspec>=2023.1'",
            EXIT_NEEDS_EXTRA,
        ) from None
    try:
        return Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise TlviewError(
            f"{address}: cannot reach the Dask scheduler: {e}", EXIT_NO_TRACE
        ) from None


def on_worker(client: Client, fn: Callable[[Item], R], arg: Item) -> R:
    """FN(ARG) run on a worker of the cluster: it, not this machine, must see the logs."""
    got: R = client.submit(fn, arg, pure=False).result()
    return got


def map_dask(
    client: Client,
    job: Job[Item, R],
    items: Sequence[Item],
    size: Callable[[Item], int],
    start_bar: Callable[[], Progress] | None = None,
    each: Each[R] = None,
) -> list[R]:
    """Every item's job on the Dask cluster; workers open the files, this process gets results."""
    from distributed import as_completed

    futures = client.map(_remote, list(items), job=job, pure=False)
    where = {f.key: i for i, f in enumerate(futures)}
    results: list[R | None] = [None] * len(items)
    bar = start_bar() if start_bar else None
    for fut, r in as_completed(futures, loop=client.loop, with_results=True):
        i = where[fut.key]
        results[i] = each(r) if each is not None else r
        if bar is not None:
            bar(size(items[i]))
            bar.log_done()
    return [r for r in results if r is not None]


def _remote(item: Item, job: Job[Item, R]) -> R:
    """A job on a Dask worker: spilled compiles travel as data, not as a local file name."""
    store.SEND_FILES = False
    store.RUN_DIR = False
    return job(item, None)
