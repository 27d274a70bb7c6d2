"""Running repros: each in a child Python process, one for all and a new one after a crash or
a repro that runs past its timeout; what they print streamed, and only its tail kept."""

from __future__ import annotations

import codecs
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from tlview.inert import clean
from tlview.replay import DEFAULT_TIMEOUT

WARNING = (
    "tlview: --run executes code taken from the log: the graph in {script} runs in a new "
    "Python process, with whatever it calls. Run only logs you trust."
)
TAIL_BYTES = 64 * 1024  # of each of the child's streams, what is kept for the reason and tail
TAIL_LINES = 20  # lines of a dead or stopped child's output its result keeps
_CHUNK = 64 * 1024
_POLL = 0.2  # seconds between looks at the child's results


class Tail:
    """The last TAIL_BYTES of a stream, however much passes through."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        self.total += len(chunk)
        while self.size - len(self.chunks[0]) >= self.limit:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        return b"".join(self.chunks)[-self.limit :].decode("utf-8", "replace")

    def lines(self, n: int = TAIL_LINES) -> list[str]:
        """The last N non-empty lines, made inert."""
        return [clean(ln) for ln in self.text().splitlines() if ln.strip()][-n:]


def run_scripts(
    dirs: list[Path], echo: bool = False, timeout: float | None = DEFAULT_TIMEOUT
) -> dict[Path, dict[str, Any]]:
    """Run each repro in a child Python process (one for all; a new one after a crash or a
    repro that ran past TIMEOUT seconds, which is stopped with the processes it started).

    With ECHO, what the repros print is streamed here as it comes; torch's own warnings on
    stderr are not. Of each stream only the tail is kept: a dead or stopped repro's result
    says its last line (`reason`) and has the last lines of both (`tail`).
    """
    results: dict[Path, dict[str, Any]] = {}
    todo = list(dirs)
    with tempfile.TemporaryDirectory(prefix="tlview-repro-") as tmp:
        while todo:
            out = Path(tmp) / f"results-{len(results)}.jsonl"
            cmd = [sys.executable, "-m", "tlview.replay.child", str(out), *map(str, todo)]
            code, timed_out, stdout, stderr = _run_child(cmd, out, echo, timeout)
            done = _read_results(out)
            for d in todo:
                if str(d) in done:
                    results[d] = done[str(d)]
            todo = [d for d in todo if d not in results]
            if todo:  # the process died running the first of these, or was stopped
                results[todo.pop(0)] = _lost(code, timed_out, timeout, stdout, stderr)
    return results


def _lost(
    code: int, timed_out: bool, timeout: float | None, stdout: Tail, stderr: Tail
) -> dict[str, Any]:
    """The result of the repro whose process died or was stopped before it reported."""
    last = (stderr.lines(1) or [""])[-1][:300]
    if timed_out:
        why = f"it ran past the timeout of {timeout:g} s (--timeout) and was stopped"
    else:
        why = f"the Python process running it died (exit status {code})"
    return {
        "status": "failed",
        "reason": why + (f": {last}" if last else ""),
        "tail": stdout.lines() + stderr.lines(),
    }


def _run_child(
    cmd: list[str], out: Path, echo: bool, timeout: float | None
) -> tuple[int, bool, Tail, Tail]:
    """Run CMD, its output pumped (and echoed) as it comes; stop its process group when no
    repro has reported for TIMEOUT seconds. Its exit status, whether it was stopped, its tails."""
    stdout, stderr = Tail(), Tail()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: a gloo world's ranks are stopped with it
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, stdout, echo), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, stderr, False), daemon=True),
    ]
    for t in pumps:
        t.start()
    timed_out = False
    try:
        seen, since = -1, time.monotonic()
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(_POLL)
            size = _size(out)
            if size != seen:  # a repro reported: the next one's time starts
                seen, since = size, time.monotonic()
            elif timeout is not None and time.monotonic() - since > timeout:
                timed_out = True
                break
    finally:  # stopped, interrupted or done: nothing of it is left running
        _stop(proc)
        for t in pumps:
            t.join(5)
    return proc.returncode, timed_out, stdout, stderr


def _pump(stream: IO[bytes], tail: Tail, echo: bool) -> None:
    """Read a stream of the child to its end: the tail kept, and with ECHO, printed inert."""
    decode = codecs.getincrementaldecoder("utf-8")("replace")
    with contextlib.suppress(OSError, ValueError):
        while chunk := os.read(stream.fileno(), _CHUNK):
            tail.add(chunk)
            try:
                if echo:  # what the graph prints holds text from the log
                    sys.stdout.write(clean(decode.decode(chunk)))
                    sys.stdout.flush()
            except (OSError, ValueError):  # our reader went away: the child is read on
                echo = False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child's process group (itself and what it started), unless it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _read_results(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get("dir"), str):
                    out[rec["dir"]] = rec
    return out
