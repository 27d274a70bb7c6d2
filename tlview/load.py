"""Turn a PATH (file, .gz or directory) into a Report: which files are logs, read each one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import EXIT_NO_TRACE, TlviewError
from .index import Keep, read_log
from .model import LogIndex, Report
from .parse import discover, sniff


def read_path(
    path: Path, keep: Keep | None = None, progress: Callable[[int], None] | None = None
) -> list[LogIndex] | str:
    """The logs in one file, or the reason it holds none."""
    why = sniff(path)
    if why:
        return why
    logs = read_log(path, keep, progress=progress)
    if not any(log.records for log in logs):
        head = logs[0]
        first = (
            f"; line {head.bad_lines[0].line}: {head.bad_lines[0].reason}" if head.bad_lines else ""
        )
        return f"no TORCH_TRACE record in {head.lines} line(s){first}"
    return logs


def load(path: str | Path, keep: Keep | None = None, progress: Any = None) -> Report:
    """Read every log PATH names; fail with one line when none of them holds a record."""
    try:
        report = _load(Path(path), keep, progress)
    finally:
        if progress is not None:
            progress.close()
    return report


def _load(p: Path, keep: Keep | None, progress: Any) -> Report:
    files, notes = discover(p)
    report = Report(path=str(p), notes=notes)
    if p.is_dir() and not files:
        raise TlviewError(f"{p}: no *.log or *.log.gz file in this directory", EXIT_NO_TRACE)
    for f in files:
        got = read_path(f, keep.fresh() if keep else None, progress)
        if isinstance(got, str):
            if not p.is_dir():
                raise TlviewError(f"{f}: {got}", EXIT_NO_TRACE)
            report.notes.append(f"skipped {f.name}: {got}")
            continue
        report.logs.extend(got)
    if not report.logs:
        raise TlviewError(f"{p}: no TORCH_TRACE record in any log", EXIT_NO_TRACE)
    return report
