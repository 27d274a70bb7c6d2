"""A transient progress bar on stderr, by bytes read, for long reads on a terminal."""

from __future__ import annotations

from pathlib import Path

MIN_BYTES = 16 << 20  # smaller inputs read too fast for a bar to help


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
    """Bytes-read progress, shown only while reading; `close` always removes it."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self.progress = Progress(
            "reading",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.progress.add_task("read", total=total)
        self.progress.start()

    def __call__(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def close(self) -> None:
        self.progress.stop()


def bar_for(path: str) -> Bar | None:
    """A progress bar for reading PATH, or None when the input is small."""
    total = total_bytes(path)
    return Bar(total) if total >= MIN_BYTES else None
