"""A transient progress bar on stderr, by bytes read, for long reads on a terminal."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Protocol

    class BarLike(Protocol):
        """What `progress=` takes besides True, False and None: a started `Bar`, or anything
        told what one would be (bytes read, each log done, the end of the read)."""

        def __call__(self, n: int) -> None: ...

        def log_done(self) -> None: ...

        def close(self) -> None: ...


MIN_BYTES = 16 << 20  # smaller inputs read too fast for a bar to help
MIN_LOGS = 64  # a job of this many logs gets a bar however small they are
REFRESH_S = 0.1  # the bar is drawn again at most this often, as bytes are read


def total_bytes(path: str) -> int:
    p = Path(path)
    try:
        if p.is_dir():
            return sum(
                f.stat().st_size for f in p.iterdir() if f.name.endswith((".log", ".log.gz"))
            )
        return p.stat().st_size
    except OSError:
        return 0


class Bar:
    """Bytes-read progress (and logs done, for a job), shown only while reading; `close` removes it.

    Drawn by the reader as it reads, not by rich's refresh thread: a large log is read by this
    process and a forked copy, and no fork is made beside another thread (runtime/cores.py)."""

    def __init__(self, total: int, logs: int = 0) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.logs = logs
        self.done = 0
        self.progress = Progress(
            "reading",
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[logs]}"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            auto_refresh=False,
        )
        self.task = self.progress.add_task("read", total=total, logs=self._logs())
        self.progress.start()
        self.drawn = time.monotonic()

    def _logs(self) -> str:
        return f"{self.done}/{self.logs} logs" if self.logs > 1 else ""

    def __call__(self, n: int) -> None:
        self.progress.advance(self.task, n)
        self._draw()

    def log_done(self) -> None:
        self.done += 1
        self.progress.update(self.task, logs=self._logs())
        self._draw()

    def _draw(self) -> None:
        now = time.monotonic()
        if now - self.drawn >= REFRESH_S:
            self.drawn = now
            self.progress.refresh()

    def close(self) -> None:
        self.progress.stop()


def bar_for(path: str) -> Bar | None:
    """A progress bar for reading PATH, or None when the input is small."""
    total = total_bytes(path)
    return Bar(total) if total >= MIN_BYTES else None
