"""Turn a PATH (file, .gz, directory or URL) into a Report: find the logs, read them, reduce."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tlview.analyze.launches import one_launch
from tlview.errors import EXIT_NO_TRACE, EXIT_USAGE, TlviewError
from tlview.index.keep import Keep
from tlview.index.log import read_log
from tlview.logs.files import Opener, no_logs, open_log, skipped_notes
from tlview.logs.sources import Found, Source, find, is_url, url_opener
from tlview.model import LogIndex, Report
from tlview.parse import sniff
from tlview.runtime.cores import Meanwhile
from tlview.runtime.output import reading
from tlview.runtime.pool import connect, default_jobs, map_dask, map_local, on_worker
from tlview.runtime.store import CompileList, SpillFile

if TYPE_CHECKING:
    from distributed import Client

    from tlview.analyze.divergence import Fingerprint
    from tlview.logs.progress import BarLike


def read(
    path: str | Path,
    keep: Keep | None = None,
    progress: bool | BarLike | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
    launch: int | None = None,
    meanwhile: Meanwhile | None = None,
) -> Report:
    """Read every log PATH names; fail with one line when none of them holds a record.

    `progress`: True for a bar on stderr when the read is long, or a started `progress.Bar`.
    `jobs`: processes reading a directory's logs (default: the cores); `scheduler`: the address
    of a Dask scheduler whose workers read the logs instead. A folder that holds the logs of
    several launches (programs run into one TORCH_TRACE folder) is refused unless `launch`
    picks one (1 for the first to start). `meanwhile`: work for this process while forked
    copies read the rest of one large log (runtime/cores.py).
    """
    text = str(path)
    shown = text if is_url(text) else str(Path(text))
    made: list[BarLike] = [] if progress is None or isinstance(progress, bool) else [progress]
    client = connect(scheduler) if scheduler else None
    try:
        found = _found(text, shown, client)
        keep = _keep_for(keep, found)
        start_bar = _bar_starter(progress, [s.size for s in found.sources], made)
        one = len(found.sources) == 1 and client is None  # read here: its copies fork from here
        job = partial(read_one, keep=keep, meanwhile=meanwhile if one else None)
        reads = _map(job, found, client, jobs, start_bar)
    finally:
        for bar in made:
            bar.close()
        if client is not None:
            client.close()
    report = reduce(shown, reads, found.notes, found.directory, launch)
    report.keep = keep
    if not found.directory and len(report.ranks) > 1:
        report.graphs_compared = False
        report.notes.append(
            f"{len(report.ranks)} ranks in one file: their compiles, inputs, caches, recompiles "
            "and graph breaks are compared, not their graphs (a directory of one log per rank "
            "compares those too)"
        )
    return report


def _map(
    job: Callable[[Source, Callable[[int], None] | None], Read],
    found: Found,
    client: Client | None,
    jobs: int | None,
    start_bar: Callable[[], BarLike] | None,
) -> list[Read]:
    """Each log's read: on the Dask cluster, or on this machine's cores (in this process, for
    one log), a directory's spilled once many compiles are held (Spiller)."""
    each = Spiller() if found.directory else None
    if client is not None:
        return map_dask(client, job, found.sources, _size, start_bar, each)
    return map_local(job, found.sources, jobs or default_jobs(), start_bar, each)


def _found(text: str, shown: str, client: Client | None) -> Found:
    """The logs PATH names, as this machine (or the cluster's workers) sees them."""
    if client is not None:  # the cluster, not this machine, must see the logs
        found = on_worker(client, find, text if is_url(text) else os.path.abspath(text))
    else:
        found = find(text)
    if found.directory and not found.sources:
        raise TlviewError(no_logs(shown, found.notes), EXIT_NO_TRACE)
    for s in found.sources:  # no output of this run may replace them
        if not is_url(s.path):
            reading(s.path)
    return found


def _keep_for(keep: Keep | None, found: Found) -> Keep | None:
    """What each log keeps: nothing to hash for ranks of one log; a share of the budget each."""
    if not found.directory:
        # One log: no ranks to compare, so nothing to hash for it.
        keep = dataclasses.replace(keep, ranks=False) if keep else Keep(ranks=False)
    if keep is not None and len(found.sources) > 1:
        # One budget of payload text for the job: each log keeps its share of it.
        share = keep.total_bytes // len(found.sources)
        keep = dataclasses.replace(keep, total_bytes=share, kept=[])
    return keep


def load(
    path: str | Path,
    keep: Keep | None = None,
    progress: bool | BarLike | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
) -> Report:
    """Deprecated (one release): `tlview.read`."""
    warnings.warn(
        "tlview.load.load is deprecated and goes in the next release: use tlview.read",
        DeprecationWarning,
        stacklevel=2,
    )
    return read(path, keep, progress, jobs, scheduler)


JOB_IN_MEMORY = 512  # compiles a job of many logs keeps in memory, over all its logs


class Spiller:
    """Called on each log's read as it comes back: once the job holds JOB_IN_MEMORY compiles
    in memory, each later log's go to one spill file, so memory stays flat in the ranks."""

    def __init__(self) -> None:
        self.kept = 0
        self.file: SpillFile | None = None

    def __call__(self, r: Read) -> Read:
        for log in r.logs:
            compiles = log.compiles
            if not isinstance(compiles, CompileList):
                continue
            n = compiles.in_memory
            if self.kept + n <= JOB_IN_MEMORY:
                self.kept += n
            elif n:
                self.file = self.file or SpillFile()
                compiles.spill(self.file)
        return r


def _bar_starter(
    progress: bool | BarLike | None, sizes: list[int], made: list[BarLike]
) -> Callable[[], BarLike] | None:
    """What starts the bar once the readers are up, or None when no bar is wanted."""
    if not progress:
        return None
    if progress is not True:
        return lambda: progress  # a bar the caller started
    from tlview.logs.progress import MIN_BYTES, MIN_LOGS, Bar

    total = sum(sizes)
    if total < MIN_BYTES and len(sizes) < MIN_LOGS:
        return None

    def start() -> Bar:
        bar = Bar(total, len(sizes))
        made.append(bar)
        return bar

    return start


def reduce(
    path: str, reads: list[Read], notes: list[str], directory: bool, launch: int | None = None
) -> Report:
    """One report from the reads of a PATH's logs, in file order, with the ranks compared: of
    a folder, its one launch (or launch LAUNCH: analyze/launches.py)."""
    report = Report(path=path, notes=list(notes))
    read = _logs_read(path, reads, directory, report.notes)
    read = _launch(path, read, directory, launch, report.notes)
    report.logs = [lg for lg, _ in read]
    name_processes(report.logs)
    report.notes += same_rank_notes(report.logs)
    for lg, f in read:
        if f is not None:
            f.name = lg.process
    per_log = [f for _, f in read if f is not None]
    if len(per_log) > 1:  # ranks to compare: the analysis imported only then
        from tlview.analyze.divergence import find_in

        report.divergence = find_in(per_log)
    return report


Pair = tuple[LogIndex, "Fingerprint | None"]


def _launch(
    path: str, read: list[Pair], directory: bool, launch: int | None, notes: list[str]
) -> list[Pair]:
    """Of a folder's logs, those of its one launch, or of launch LAUNCH (noted in NOTES)."""
    if not directory:
        if launch not in (None, 1):
            raise TlviewError(f"{path}: --launch {launch}: a file is one launch", EXIT_USAGE)
        return read
    kept, note = one_launch(path, [lg for lg, _ in read], launch)
    notes += [note] if note else []
    return [read[k] for k in kept]


def _logs_read(path: str, reads: list[Read], directory: bool, notes: list[str]) -> list[Pair]:
    """Each log read, with its fingerprint (None: not hashed); a folder's skipped files noted in
    NOTES (in one note when there are many); the first failure raised; no log at all an error."""
    read: list[Pair] = []
    skipped: list[tuple[str, str]] = []
    for r in reads:
        if r.error is not None:
            raise TlviewError(*r.error)
        if r.skipped is not None:
            if not directory:
                raise TlviewError(f"{path}: {r.skipped}", EXIT_NO_TRACE)
            skipped.append((r.source.name, r.skipped))
            continue
        fps: list[Fingerprint | None] = list(r.fingerprints) or [None] * len(r.logs)
        read += zip(r.logs, fps, strict=True)
    notes += skipped_notes(skipped)
    if not read:
        raise TlviewError(f"{path}: no TORCH_TRACE record in any log", EXIT_NO_TRACE)
    return read


def name_processes(logs: list[LogIndex]) -> None:
    """Name each log's process in file order: `rank1`, and `rank1#2` for a second log that
    claims rank 1 (a copy, a restarted job, two runs into one folder): never merged."""
    seen: dict[int, int] = {}
    for log in logs:
        if log.rank is not None:
            n = seen[log.rank] = seen.get(log.rank, 0) + 1
            log.process = _process_name(log.rank, n)


def _process_name(rank: int, n: int) -> str:
    from tlview.analyze.names import process_name

    return process_name(rank, n)


def same_rank_notes(logs: list[LogIndex]) -> list[str]:
    """One note per rank that several logs claim: they are kept apart, and how they differ."""
    by_rank: dict[int, list[LogIndex]] = {}
    for log in logs:
        if log.rank is not None:
            by_rank.setdefault(log.rank, []).append(log)
    notes = []
    for rank, same in sorted(by_rank.items()):
        if len(same) < 2:
            continue
        files = ", ".join(f"{lg.process}: {lg.name} (pid {lg.pid})" for lg in same[:6])
        more = f" and {len(same) - 6} more" if len(same) > 6 else ""
        facts: dict[str, set[int | str | None]] = {
            "pids": {lg.pid for lg in same},
            "start times": {lg.first_time for lg in same},
            "torch builds": {lg.torch_version for lg in same},
        }
        differ = [what for what, vs in facts.items() if len(vs) > 1]
        if differ:
            how = f"they are different processes (their {_and(differ)} differ)"
        else:
            how = "the same pid, start time and torch build: one process's log, copied"
        notes.append(
            f"{len(same)} logs claim rank {rank}: {how}; each is compared as a process of its "
            f"own, never added up ({files}{more})"
        )
    return notes


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


@dataclass(slots=True)
class Read:
    """What reading one log gave: its processes' indexes and fingerprints, or why it holds none."""

    source: Source
    logs: list[LogIndex] = field(default_factory=list)
    fingerprints: list[Fingerprint] = field(default_factory=list)  # one per log, for divergence
    skipped: str | None = None  # why the file holds no TORCH_TRACE record
    error: tuple[str, int] | None = None  # a failure's one-line message and exit status


# -- reading one log: a pure function, run wherever the map puts it (runtime/pool.py) ----------
def read_one(
    src: Source,
    progress: Callable[[int], None] | None = None,
    *,
    keep: Keep | None = None,
    meanwhile: Meanwhile | None = None,
) -> Read:
    """Read one log (local path or URL) into its processes' indexes and their fingerprints."""
    opener: Opener = url_opener(src.path) if is_url(src.path) else open_log
    where = Path(src.path)
    try:
        why = sniff(where, opener)
        if why:
            return Read(src, skipped=why)
        logs = read_log(
            where,
            keep.fresh() if keep else None,
            src.name,
            progress=progress,
            opener=opener,
            meanwhile=meanwhile,
        )
    except TlviewError as e:
        return Read(src, error=(e.message, e.exit_code))
    if is_url(src.path):
        _from_url(logs, src)
    if not any(log.records for log in logs):
        return Read(src, skipped=_no_records(logs[0]))
    return Read(src, logs, _fingerprints(logs, keep))


def _fingerprints(logs: list[LogIndex], keep: Keep | None) -> list[Fingerprint]:
    """Facts for comparing ranks: a directory's logs, or the ranks that one file holds (`cat
    rank*.log`), whose graphs were not hashed for it (masking them costs more than reading)."""
    hashed = keep is None or keep.ranks
    if not hashed and len({log.rank for log in logs if log.rank is not None}) < 2:
        return []
    from tlview.analyze.divergence import fingerprint

    return [fingerprint(log, graphs=hashed) for log in logs]


def _from_url(logs: list[LogIndex], src: Source) -> None:
    """Logs read from a URL are named by it, and sized as its listing says."""
    for lg in logs:
        lg.path = src.path
    logs[0].size = logs[0].size or src.size


def _no_records(head: LogIndex) -> str:
    """Why a log is skipped: no record in it, and its first bad line."""
    bad = head.bad_lines
    first = f"; line {bad[0].line}: {bad[0].reason}" if bad else ""
    return f"no TORCH_TRACE record in {head.lines} line(s){first}"


def _size(src: Source) -> int:
    return src.size
