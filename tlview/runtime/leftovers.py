"""Temp files a killed run left behind (SIGKILL, the OOM killer: no handler runs): each is
named with the process and host that made it, and a later run removes those whose process is
gone."""

from __future__ import annotations

import contextlib
import os
import re

# "<pid>@<host>~": the tag in a temp file's name, before the random part tempfile adds.
_TAG = re.compile(r"(\d{1,10})@([A-Za-z0-9._-]{1,64})~")
MAX_NAME = 200  # longer names go untagged: a file name has at most 255 bytes


def _host() -> str:
    """This machine's name as a tag holds it ("-" when it has none a tag can hold)."""
    host = os.uname().nodename if hasattr(os, "uname") else ""
    return host if _TAG.fullmatch(f"1@{host}~") else "-"


def tag() -> str:
    """This process's tag, for the prefix of a temp file or directory it makes."""
    return f"{os.getpid()}@{_host()}~"


def prefix(start: str) -> str:
    """`start` and this process's tag, unless the name would grow too long for one."""
    return start + tag() if len(start) <= MAX_NAME else start


def sweep(directory: str, start: str) -> int:
    """Remove what dead runs on this host left in `directory` under names beginning `start`:
    files, and directories with the files in them. Returns how many were removed."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    here = _host()
    removed = 0
    for e in entries:
        if not e.name.startswith(start):
            continue
        m = _TAG.match(e.name, len(start))
        if m is None or m.group(2) != here or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            if e.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if e.is_dir(follow_symlinks=False):
                for inner in os.scandir(e.path):
                    if inner.is_file(follow_symlinks=False):
                        os.unlink(inner.path)
                os.rmdir(e.path)
            elif e.is_file(follow_symlinks=False):
                os.unlink(e.path)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    """Whether a process of this pid runs here (a pid in use by another user's process counts)."""
    if pid == os.getpid() or os.name != "posix":  # Windows: os.kill(pid, 0) ends the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
