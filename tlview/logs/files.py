"""Opening a log (gzip by its magic number, not its name) and listing a directory's logs."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from tlview.errors import EXIT_NO_TRACE, TlviewError

_GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def file_size(f: IO[bytes]) -> int | None:
    """The size of an open regular file as it is now (None for a pipe, a device, a stream)."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def open_log(path: Path) -> IO[bytes]:
    """Open a log for reading bytes, decompressing gzip by its magic number, not its name."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise TlviewError(f"{path}: cannot open: {e.strerror or e}", EXIT_NO_TRACE) from None
    try:
        magic = f.peek(2)[:2]  # one open only: a pipe (`<(zcat ...)`) cannot be read twice
    except OSError:
        magic = b""
    if magic == _GZIP_MAGIC:
        return Gunzip(f)  # type: ignore[return-value]
    return f


class Gunzip(gzip.GzipFile):
    """A gzip stream that closes the file under it (local or remote)."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


# Opens a log's bytes, gunzipped: `open_log` for local files; `tlview.runtime.pool` passes one for URLs.
Opener = Callable[[Path], IO[bytes]]


def discover(path: Path) -> tuple[list[Path], list[str]]:
    """The log files a PATH names, and notes about what was left out and why."""
    if not path.exists():
        what = "no such file or directory"
        if path.is_symlink():
            what = "a symbolic link to nothing (its target is missing, or links back to it)"
        raise TlviewError(f"{path}: {what}", EXIT_NO_TRACE)
    if not path.is_dir():
        return [path], []
    logs, skipped, subdirs, odd = [], [], [], []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as e:
        raise TlviewError(
            f"{path}: cannot list directory: {e.strerror or e}", EXIT_NO_TRACE
        ) from None
    for entry in entries:
        try:
            if entry.is_dir():
                subdirs.append(entry.name)
            elif not entry.name.endswith((".log", ".log.gz")):
                skipped.append(entry.name)
            elif entry.is_file():
                logs.append(Path(entry.path))
            else:  # a FIFO (reading it would block), a socket, a link to nothing
                odd.append(f"{entry.name} (not a regular file)")
        except OSError as e:  # a link that links back to itself, a file gone meanwhile
            odd.append(f"{entry.name} ({e.strerror or e})")
    return logs, directory_notes(skipped, subdirs, odd)


def directory_notes(skipped: list[str], subdirs: list[str], odd: Sequence[str] = ()) -> list[str]:
    """What reading a directory left out, said once for local and remote directories."""
    notes = []
    if skipped:
        notes.append(
            f"ignored {len(skipped)} file(s) not named *.log or *.log.gz: {_names(skipped)}"
        )
    if odd:
        notes.append(f"could not read {len(odd)} *.log entr(ies): {_names(odd)}")
    if subdirs:
        notes.append(f"did not enter {len(subdirs)} subdirector(ies): {_names(subdirs)}")
    return notes


def skipped_notes(skipped: Sequence[tuple[str, str]]) -> list[str]:
    """One note per reason a directory's logs were skipped (`empty file`), naming the first
    few: a folder of thousands of empty logs is one line, not thousands."""
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped:
        by_reason.setdefault(why, []).append(name)
    return [
        f"skipped {names[0]}: {why}" if len(names) == 1
        else f"skipped {len(names):,} logs ({why}): {_names(names)}"
        for why, names in by_reason.items()
    ]  # fmt: skip


def no_logs(path: str, notes: Sequence[str]) -> str:
    """The error for a directory with no log: what it did hold says where the logs may be."""
    held = "; ".join(notes)
    return f"{path}: no *.log or *.log.gz file in this directory" + (f" ({held})" if held else "")


def _names(names: Sequence[str], n: int = 5) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")
