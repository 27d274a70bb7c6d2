"""The paths a command is given: a directory's newest log (--latest), a pipe read twice."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tlview.commands.funnel import say
from tlview.errors import EXIT_NO_TRACE, EXIT_USAGE, TlviewError
from tlview.logs.files import discover, no_logs
from tlview.logs.sources import is_url


def newest(path: str) -> str:
    """The newest log of a directory (--latest): by modification time, then name."""
    if is_url(path) or not Path(path).is_dir():
        raise TlviewError(f"{path}: --latest needs a local directory of logs", EXIT_USAGE)
    logs, notes = discover(Path(path))
    when = {}
    for log in logs:
        with contextlib.suppress(OSError):  # gone since it was listed
            when[log] = (log.stat().st_mtime_ns, log.name)
    if not when:
        raise TlviewError(no_logs(path, notes), EXIT_NO_TRACE)
    found = max(when, key=lambda log: when[log])
    say(f"tlview: reading the newest log, {found}", err=True)
    return str(found)


@contextlib.contextmanager
def rereadable(path: str) -> Iterator[str]:
    """PATH, or a copy of it when it is a pipe (`-` from `cat`, `<(zcat ...)`), which a second
    read would find empty; the copy has the pipe's name, so the report names the same log."""
    real = "/dev/stdin" if path == "-" else path
    try:
        mode = os.stat(real).st_mode
    except OSError:  # the reader says what is wrong with it
        mode = stat.S_IFREG
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tlview-pipe-") as d:
        copy = os.path.join(d, os.path.basename(real) or "stdin")
        try:
            with open(real, "rb") as src, open(copy, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            raise TlviewError(f"{path}: cannot read: {e.strerror or e}", EXIT_NO_TRACE) from None
        yield copy
