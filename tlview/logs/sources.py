"""What a PATH names: local files, a directory of logs, stdin, or an fsspec URL, with sizes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

from tlview.errors import EXIT_NEEDS_EXTRA, EXIT_NO_TRACE, EXIT_USAGE, TlviewError
from tlview.logs.files import _GZIP_MAGIC, Gunzip, Opener, directory_notes, discover

LOG_SUFFIXES = (".log", ".log.gz")


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str) -> bool:
    """`s3://...`, `file://...`: a path fsspec opens, not the local file system."""
    return bool(_URL.match(path))


class Source(NamedTuple):
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


# -- finding the logs --------------------------------------------------------------------------
STDIN = "/dev/stdin"


def find(path: str) -> Found:
    """The logs PATH names: a file, a directory of logs, or the same as an fsspec URL."""
    if is_url(path):
        return _find_url(path)
    if not path:  # Path("") is ".": an empty argument names no log, not the current directory
        raise TlviewError("an empty PATH names no log: give a file, a directory or -", EXIT_USAGE)
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
            f"{url}: reading URLs needs fsspec: pip install 'fsspec>=2023.1'", EXIT_NEEDS_EXTRA
        ) from None
    try:
        fs, path = url_to_fs(url)
        return fs, str(path)
    except (ImportError, ValueError) as e:  # no file system for the protocol, or a bad URL
        raise TlviewError(f"{url}: {e}", EXIT_NEEDS_EXTRA) from None
    except Exception as e:  # a file system that fails as it is made (`zip://` of no zip)
        raise TlviewError(f"{url}: cannot open: {type(e).__name__}: {e}", EXIT_NO_TRACE) from None


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


def url_opener(url: str) -> Opener:
    def open_url(_: Path) -> IO[bytes]:
        fs, path = _fs(url)
        try:
            raw = fs.open(path, "rb")
            head = raw.read(2)
            raw.seek(0)
        except Exception as e:  # each file system raises its own errors
            raise TlviewError(f"{url}: cannot open: {e}", EXIT_NO_TRACE) from None
        if head == _GZIP_MAGIC:
            return Gunzip(raw)  # type: ignore[return-value]
        return cast(IO[bytes], raw)

    return open_url
