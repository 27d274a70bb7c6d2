"""Read the logs of a job in parallel: one pure read per log, mapped on a process pool or Dask."""

from __future__ import annotations

import gc
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import store
from .divergence import Facts, facts
from .errors import EXIT_NEEDS_TORCH, EXIT_NO_TRACE, TlviewError
from .index import Keep, read_log
from .model import LogIndex
from .parse import Gunzip, Opener, directory_notes, discover, open_log, sniff

# An optional dependency is missing: the same status as for torch.
EXIT_NEEDS_EXTRA = EXIT_NEEDS_TORCH
LOG_SUFFIXES = (".log", ".log.gz")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_GZIP_MAGIC = b"\x1f\x8b"


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def is_url(path: str) -> bool:
    """`s3://...`, `file://...`: a path fsspec opens, not the local file system."""
    return bool(_URL.match(path))


@dataclass(frozen=True, slots=True)
class Source:
    """One log to read: a local path or an fsspec URL, and its size in bytes."""

    path: str
    size: int = 0

    @property
    def name(self) -> str:
        return (
            self.path.rstrip("/").rsplit("/", 1)[-1] if is_url(self.path) else Path(self.path).name
        )


@dataclass(slots=True)
class Found:
    """The logs a PATH names, notes on what was left out, and whether PATH is a directory."""

    sources: list[Source]
    notes: list[str]
    directory: bool


@dataclass(slots=True)
class Read:
    """What reading one log gave: its processes' indexes and facts, or why it holds none."""

    source: Source
    logs: list[LogIndex] = field(default_factory=list)
    facts: list[Facts] = field(default_factory=list)  # one per log, for divergence
    skipped: str | None = None  # why the file holds no TORCH_TRACE record
    error: tuple[str, int] | None = None  # a failure's one-line message and exit status


# -- finding the logs --------------------------------------------------------------------------
STDIN = "/dev/stdin"


def find(path: str) -> Found:
    """The logs PATH names: a file, a directory of logs, or the same as an fsspec URL."""
    if is_url(path):
        return _find_url(path)
    # "-": the log comes on standard input (`zcat log.gz | tlview report -`).
    p = Path(STDIN if path == "-" and os.path.exists(STDIN) else path)
    files, notes = discover(p)
    return Found([Source(str(f), _size(f)) for f in files], notes, p.is_dir())


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _fs(url: str) -> tuple[Any, str]:
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise TlviewError(
            f"{url}: reading URLs needs fsspec: pip install 'tlview[dask]'", EXIT_NEEDS_EXTRA
        ) from None
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as e:  # no file system for the protocol, or a bad URL
        raise TlviewError(f"{url}: {e}", EXIT_NEEDS_EXTRA) from None


def _find_url(url: str) -> Found:
    fs, root = _fs(url)
    try:
        info = fs.info(root)
        if info.get("type") != "directory":
            return Found([Source(url, int(info.get("size") or 0))], [], False)
        entries = sorted(fs.ls(root, detail=True), key=lambda e: str(e["name"]))
    except FileNotFoundError:
        raise TlviewError(f"{url}: no such file or directory", EXIT_NO_TRACE) from None
    except Exception as e:  # each file system raises its own errors
        raise TlviewError(f"{url}: cannot list: {e}", EXIT_NO_TRACE) from None
    sources, skipped, subdirs = [], [], []
    for entry in entries:
        name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
        if entry.get("type") == "directory":
            subdirs.append(name)
        elif name.endswith(LOG_SUFFIXES):
            size = int(entry.get("size") or 0)
            sources.append(Source(fs.unstrip_protocol(entry["name"]), size))
        else:
            skipped.append(name)
    return Found(sources, directory_notes(skipped, subdirs), True)


# -- reading one log: a pure function, run wherever the map puts it ------------------------------
def read_one(
    src: Source, keep: Keep | None = None, progress: Callable[[int], None] | None = None
) -> Read:
    """Read one log (local path or URL) into its processes' indexes and their facts."""
    opener: Opener = _url_opener(src.path) if is_url(src.path) else open_log
    where = Path(src.path)
    try:
        why = sniff(where, opener)
        if why:
            return Read(src, skipped=why)
        logs = read_log(
            where, keep.fresh() if keep else None, src.name, progress=progress, opener=opener
        )
    except TlviewError as e:
        return Read(src, error=(e.message, e.exit_code))
    if is_url(src.path):
        for lg in logs:
            lg.path = src.path
        logs[0].size = logs[0].size or src.size
    if not any(log.records for log in logs):
        head = logs[0]
        first = (
            f"; line {head.bad_lines[0].line}: {head.bad_lines[0].reason}" if head.bad_lines else ""
        )
        return Read(src, skipped=f"no TORCH_TRACE record in {head.lines} line(s){first}")
    # Facts for comparing ranks: a directory's logs, or the ranks that one file holds (`cat
    # rank*.log`), whose graphs were not hashed for it (masking them costs more than reading).
    hashed = keep is None or keep.ranks
    if not hashed and len({log.rank for log in logs if log.rank is not None}) < 2:
        return Read(src, logs, [])
    return Read(src, logs, [facts(log, graphs=hashed) for log in logs])


def read_remote(src: Source, keep: Keep | None = None) -> Read:
    """`read_one` on a Dask worker: spilled compiles travel as data, not as a local file name."""
    store.SEND_FILES = False
    store.RUN_DIR = False
    return read_one(src, keep)


def _url_opener(url: str) -> Opener:
    def open_url(_: Path) -> IO[bytes]:
        fs, path = _fs(url)
        try:
            raw = fs.open(path, "rb")
        except Exception as e:  # each file system raises its own errors
            raise TlviewError(f"{url}: cannot open: {e}", EXIT_NO_TRACE) from None
        head = raw.read(2)
        raw.seek(0)
        if head == _GZIP_MAGIC:
            return Gunzip(raw)  # type: ignore[return-value]
        return raw

    return open_url


# -- the map: in this process, on a local pool, or on a Dask cluster -----------------------------
Progress = Any  # a progress.Bar: called with bytes read, `log_done()` per log
# `start_bar`, where given, starts the bar: after the pool is up, so no thread runs at fork.


def read_local(
    sources: Sequence[Source],
    keep: Keep | None,
    jobs: int,
    start_bar: Callable[[], Progress] | None = None,
) -> list[Read]:
    """Read every log, on a pool of JOBS processes when there is more than one log to read."""
    workers = min(jobs, len(sources))
    if workers <= 1:
        return read_each(sources, keep, start_bar)
    return read_pool(sources, keep, workers, start_bar)


def read_each(
    sources: Sequence[Source], keep: Keep | None, start_bar: Callable[[], Progress] | None = None
) -> list[Read]:
    """Read the logs one after another in this process."""
    bar = start_bar() if start_bar else None
    out = []
    for s in sources:
        out.append(read_one(s, keep, bar))
        if bar is not None:
            bar.log_done()
    return out


def read_pool(
    sources: Sequence[Source],
    keep: Keep | None,
    workers: int,
    start_bar: Callable[[], Progress] | None = None,
) -> list[Read]:
    """Read the logs on a pool of WORKERS processes; results come back in file order."""
    import multiprocessing as mp

    # fork starts workers in milliseconds; the pool is made before any thread (the bar's).
    ctx = mp.get_context("fork" if sys.platform == "linux" else "spawn")
    queue = ctx.SimpleQueue() if start_bar else None
    results: list[Read | None] = [None] * len(sources)
    from .store import temp_dir

    temp_dir()  # forked workers spill into this process's temp directory, removed with it
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
            tasks = [(i, s, keep) for i, s in enumerate(sources)]
            for i, r in pool.imap_unordered(_pool_read, tasks):
                results[i] = r
                if bar is not None:
                    bar.log_done()
        finally:
            if drain is not None and queue is not None:
                queue.put(None)
                drain.join()
    return [r for r in results if r is not None]


_queue: Any = None  # in a pool worker: where it sends bytes read, for the parent's bar


def _init_worker(queue: Any) -> None:
    global _queue
    _queue = queue
    # The pool ends its workers with SIGTERM: they go quietly, not by tlview's own handler
    # (its temp files, theirs too, are removed by tlview).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _send(n: int) -> None:
    _queue.put(n)


def _pool_read(task: tuple[int, Source, Keep | None]) -> tuple[int, Read]:
    i, src, keep = task
    return i, read_one(src, keep, _send if _queue is not None else None)


def _drain(queue: Any, bar: Progress) -> None:
    while (n := queue.get()) is not None:
        bar(n)


def connect(address: str) -> Any:
    """A Dask client of the scheduler at ADDRESS; one line if Dask is missing or unreachable."""
    try:
        from distributed import Client
    except ImportError:
        raise TlviewError(
            "--scheduler needs Dask: pip install 'tlview[dask]'", EXIT_NEEDS_EXTRA
        ) from None
    try:
        return Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise TlviewError(
            f"{address}: cannot reach the Dask scheduler: {e}", EXIT_NO_TRACE
        ) from None


def find_on(client: Any, path: str) -> Found:
    """`find` run on a worker: the cluster, not this machine, must see the logs."""
    if not is_url(path):
        path = os.path.abspath(path)
    found: Found = client.submit(find, path, pure=False).result()
    return found


def read_dask(
    client: Any,
    sources: Sequence[Source],
    keep: Keep | None,
    start_bar: Callable[[], Progress] | None = None,
) -> list[Read]:
    """Read every log on the Dask cluster; workers open the files, this process gets summaries."""
    from distributed import as_completed

    futures = client.map(read_remote, list(sources), keep=keep, pure=False)
    where = {f.key: i for i, f in enumerate(futures)}
    results: list[Read | None] = [None] * len(sources)
    bar = start_bar() if start_bar else None
    for fut, r in as_completed(futures, loop=client.loop, with_results=True):
        results[where[fut.key]] = r
        if bar is not None:
            bar(r.source.size)
            bar.log_done()
    return [r for r in results if r is not None]
