"""Turn a PATH (file, .gz, directory or URL) into a Report: find the logs, read them, reduce."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .divergence import Facts, find_in
from .errors import EXIT_NO_TRACE, TlviewError
from .index import Keep
from .jobs import Read, connect, default_jobs, find, find_on, is_url, read_dask, read_local
from .model import Report
from .parse import no_logs


def load(
    path: str | Path,
    keep: Keep | None = None,
    progress: Any = None,
    jobs: int | None = None,
    scheduler: str | None = None,
) -> Report:
    """Read every log PATH names; fail with one line when none of them holds a record.

    `progress`: True for a bar on stderr when the read is long, or a started `progress.Bar`.
    `jobs`: processes reading a directory's logs (default: the cores); `scheduler`: the address
    of a Dask scheduler whose workers read the logs instead.
    """
    text = str(path)
    shown = text if is_url(text) else str(Path(text))
    made: list[Any] = [] if progress is None or isinstance(progress, bool) else [progress]
    client = connect(scheduler) if scheduler else None
    try:
        found = find_on(client, text) if client is not None else find(text)
        if found.directory and not found.sources:
            raise TlviewError(no_logs(shown, found.notes), EXIT_NO_TRACE)
        if not found.directory:
            # One log: no ranks to compare, so nothing to hash for it.
            keep = dataclasses.replace(keep, ranks=False) if keep else Keep(ranks=False)
        start_bar = _bar_starter(progress, [s.size for s in found.sources], made)
        if client is not None:
            reads = read_dask(client, found.sources, keep, start_bar)
        else:
            reads = read_local(found.sources, keep, jobs or default_jobs(), start_bar)
    finally:
        for bar in made:
            bar.close()
        if client is not None:
            client.close()
    report = reduce(shown, reads, found.notes, found.directory)
    if not found.directory and len(report.ranks) > 1:
        report.graphs_compared = False
        report.notes.append(
            f"{len(report.ranks)} ranks in one file: their compiles, inputs, caches, recompiles "
            "and graph breaks are compared, not their graphs (a directory of one log per rank "
            "compares those too)"
        )
    return report


def _bar_starter(progress: Any, sizes: list[int], made: list[Any]) -> Any:
    """What starts the bar once the readers are up, or None when no bar is wanted."""
    if not progress:
        return None
    if progress is not True:
        return lambda: progress  # a bar the caller started
    from .progress import MIN_BYTES, MIN_LOGS, Bar

    total = sum(sizes)
    if total < MIN_BYTES and len(sizes) < MIN_LOGS:
        return None

    def start() -> Bar:
        made.append(Bar(total, len(sizes)))
        return made[-1]

    return start


def reduce(path: str, reads: list[Read], notes: list[str], directory: bool) -> Report:
    """One report from the reads of a PATH's logs, in file order, with the ranks compared."""
    report = Report(path=path, notes=list(notes))
    facts: list[Facts] = []
    for r in reads:
        if r.error is not None:
            raise TlviewError(*r.error)
        if r.skipped is not None:
            if not directory:
                raise TlviewError(f"{path}: {r.skipped}", EXIT_NO_TRACE)
            report.notes.append(f"skipped {r.source.name}: {r.skipped}")
            continue
        report.logs.extend(r.logs)
        facts.extend(r.facts)
    if not report.logs:
        raise TlviewError(f"{path}: no TORCH_TRACE record in any log", EXIT_NO_TRACE)
    report.divergence = find_in(facts)
    return report
