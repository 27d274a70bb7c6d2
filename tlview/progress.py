"""A transient progress bar on stderr, by bytes read, for long reads on a terminal."""

from __future__ import annotations

from pathlib import Path

MIN_BYTES = 16 << 20  # smaller inputs read too fast for a bar to help
MIN_LOGS = 64  # a job of this many logs gets a bar however small they are


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
    """Bytes-read progress (and logs done, for a job), shown only while reading; `close` removes it."""

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
        )
        self.task = self.progress.add_task("read", total=total, logs=self._logs())
        self.progress.start()

    def _logs(self) -> str:
        return f"{self.done}/{self.logs} logs" if self.logs > 1 else ""

    def __call__(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def log_done(self) -> None:
        self.done += 1
        self.progress.update(self.task, logs=self._logs())

    def close(self) -> None:
        self.progress.stop()


def bar_for(path: str) -> Bar | None:
    """A progress bar for reading PATH, or None when the input is small."""
    total = total_bytes(path)
    return Bar(total) if total >= MIN_BYTES else None
