"""The `chromium_event` records as one Chrome trace (JSON) for Perfetto, streamed from the logs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from tlview.analyze.names import Refs, picker
from tlview.dumps import dumps
from tlview.index.digests import RUNTIME_ESTIMATE
from tlview.model import Compile, CompileId, Report
from tlview.parse import Reader, Record
from tlview.render import Options, Split
from tlview.runtime.output import Output
from tlview.version import __version__

PID_STEP = 1 << 22  # above Linux's pid_max: a process of another log with a pid already taken
# A compile's place in its log: the records of its id, its process, and its lines.
Lines = tuple[CompileId | None, int | None, int, int]


def _spans(
    report: Report, only: Callable[[Compile], bool]
) -> tuple[dict[str, list[Lines]], list[str]]:
    """Where in each log the compiles `only` picks are, and their names: one pass (compiles
    can be on disk, read back one at a time)."""
    spans: dict[str, list[Lines]] = {}
    refs = []
    ref = Refs.of(report)
    for c in report.attempts:
        if only(c):
            cid = None if c.id is None else c.id.in_run(0)  # as a record names it
            spans.setdefault(c.log, []).append((cid, c.pid, c.first_log_line, c.last_log_line))
            refs.append(ref(c))
    return spans, sorted(refs)


class _Trace:
    """The trace being written: its events, one Perfetto process per log process."""

    def __init__(self, report: Report, out: IO[bytes], spans: dict[str, list[Lines]] | None):
        self.out = out
        self.spans = spans
        self.first = True
        self.skipped = 0
        self.taken: set[int] = set()  # trace pids given out, over every log
        self.labels = {
            (log.name, log.pid): _label(log.name, log.rank, log.pid, log.process)
            for log in report.logs
        }
        # A job's processes in rank order (a rank's second log after its first), then others.
        ranked = sorted(
            report.logs, key=lambda lg: (lg.rank is None, lg.rank or 0, len(lg.process))
        )
        self.order = {(log.name, log.pid): n for n, log in enumerate(ranked)}
        self.paths = list(dict.fromkeys((log.path, log.name) for log in report.logs))

    def put(self, item: dict[str, Any]) -> None:
        self.out.write((b"" if self.first else b",\n") + dumps(item))
        self.first = False

    def log(self, path: str, name: str) -> None:
        """Write one log's events as they pass."""
        seen: dict[int, int] = {}  # logged pid -> trace pid
        last_ts: dict[int, float] = {}  # trace pid -> the latest event's time
        tracks: dict[int, int] = {}  # trace pid -> estimated graphs given a track
        spans = None if self.spans is None else self.spans.get(name, [])
        for rec in Reader(Path(path), name):
            if spans is not None and not _within(rec, spans):
                continue
            if rec.kind == "artifact" and _is_estimate(rec):
                pid = seen.get(rec.pid)
                if pid is not None:  # else no event of this process yet: nothing to place it by
                    tracks[pid] = tracks.get(pid, 0) + 1
                    for slice_ in _estimated(rec, pid, tracks[pid], last_ts.get(pid, 0.0)):
                        self.put(slice_)
            elif rec.kind == "chromium_event":
                self.event(rec, path, name, seen, last_ts)

    def event(
        self, rec: Record, path: str, name: str, seen: dict[int, int], last_ts: dict[int, float]
    ) -> None:
        ev = _event(rec.payload)
        if ev is None:
            self.skipped += 1
            return
        pid = seen.get(rec.pid)
        if pid is None:
            pid = seen[rec.pid] = self.process(rec, path, name, len(seen) + 1)
        ev["pid"] = pid  # torch writes pid 0 in every process; the log prefix has the real one.
        if isinstance(ev.get("ts"), int | float):
            last_ts[pid] = max(last_ts.get(pid, 0.0), float(ev["ts"]))
        self.put(ev)

    def process(self, rec: Record, path: str, name: str, n: int) -> int:
        """A trace pid for a log's process, named and placed. Ranks in separate containers
        often log the same pid: each log's process keeps one of its own, above any real pid."""
        pid = rec.pid
        while pid in self.taken:
            pid += PID_STEP
        self.taken.add(pid)
        label = self.labels.get((name, rec.pid)) or _label(name, rec.rank, rec.pid)
        place = self.order.get((name, rec.pid), self.paths.index((path, name)))
        self.put({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
        self.put(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": pid,
                "args": {"sort_index": n + 1000 * place},
            }
        )
        return pid


def stream(report: Report, out: IO[bytes], only: Callable[[Compile], bool] | None = None) -> None:
    """Re-read each log and write its events as they pass; one Perfetto process per log process.
    With `only` (--compile-id), the events of the compiles it picks, and no others."""
    names = sorted({log.name for log in report.logs})
    head: dict[str, Any] = {"otherData": {"generator": f"tlview {__version__}", "logs": names}}
    spans = None
    if only is not None:
        spans, head["otherData"]["compiles"] = _spans(report, only)
    out.write(dumps(head)[:-1] + b',"displayTimeUnit":"ms","traceEvents":[')
    trace = _Trace(report, out, spans)
    for path, name in trace.paths:
        trace.log(path, name)
    out.write(b'\n],"tlviewSkippedEvents":' + str(trace.skipped).encode() + b"}\n")


def _within(rec: Record, spans: list[Lines]) -> bool:
    """Whether a record is one of these compiles': its id, its process, inside their lines (a
    process that started its ids over has the same id in several runs)."""
    cid = rec.compile_id
    return any(
        cid == c and pid in (rec.pid, -1, None) and first <= rec.line <= last
        for c, pid, first, last in spans
    )


def _event(payload: bytes | None) -> dict[str, Any] | None:
    """A trace event from a payload, or None when it is not one (cut short, not JSON)."""
    if not payload:
        return None
    try:
        ev = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(ev, dict) or not isinstance(ev.get("ph"), str):
        return None
    if not isinstance(ev.get("ts"), int | float) and ev["ph"] != "M":
        return None
    return ev


def _label(name: str, rank: int | None, pid: int | None, process: str = "") -> str:
    if process:  # `rank 3`, or `rank 3#2` for the second log that claims rank 3
        return f"rank {process.removeprefix('rank')} · {name} (pid {pid})"
    return f"rank {rank} · {name} (pid {pid})" if rank is not None else f"{name} (pid {pid})"


ESTIMATE_TID = 1 << 20  # tracks of estimated graphs, past any thread id torch writes


def _is_estimate(rec: Record) -> bool:
    body = rec.body
    return isinstance(body, dict) and body.get("name") == RUNTIME_ESTIMATE


def _estimated(rec: Record, pid: int, n: int, start: float) -> list[dict[str, Any]]:
    """A graph's kernels on a track of their own, each as long as inductor estimated, one after
    another from when the process compiled it: where a rank's time would go, by estimate."""
    try:
        v = orjson.loads(rec.payload or b"")
    except orjson.JSONDecodeError:
        return []
    ops = v.get("ops") if isinstance(v, dict) else None
    if not isinstance(ops, list):
        return []
    tid = ESTIMATE_TID + n
    cid = str(rec.compile_id) if rec.compile_id is not None else "-/-"
    out: list[dict[str, Any]] = [
        {
            "name": "thread_name",
            "ph": "M",
            "pid": pid,
            "tid": tid,
            "args": {"name": f"estimated runtime: {cid} (graph {n})"},
        }
    ]
    at = 0  # ns since START, summed as an int: finite whatever the log's estimates
    for op in ops:
        if not isinstance(op, dict):
            continue
        ns = _nanoseconds(op.get("estimated_runtime_ns"))
        out.append(
            {
                "name": str(op.get("name")),
                "cat": "estimated_runtime",
                "ph": "X",
                "ts": start + at / 1000,
                "dur": ns / 1000,
                "pid": pid,
                "tid": tid,
                "args": {"compile_id": cid, "type": op.get("type"), "estimated_runtime_ns": ns},
            }
        )
        at += ns
    return out


MAX_ESTIMATE_NS = 365 * 86_400 * 10**9  # a kernel estimated to run over a year: not an estimate


def _nanoseconds(v: Any) -> int:
    """A kernel's estimated runtime in whole ns: 0 for what is no time (negative, NaN, infinite,
    over a year, not a number), so that the trace's running sum stays an int of 64 bits."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return 0
    if not 0 <= v <= MAX_ESTIMATE_NS:  # NaN fails this too
        return 0
    return int(v)


def write(report: Report, out: Output, opts: Options, split: Split | None = None) -> None:
    """The report's trace events (the renderer of `--format perfetto`): the logs are read
    again, as they pass, so no split of the compiles applies."""
    with out.open() as f:
        stream(report, f, only=picker(opts.compile_id))
