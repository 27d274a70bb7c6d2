"""`--format perfetto`: every chromium_event record of the logs, as one Chrome trace."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, corpus, run_cli
from test_html import DEMO, real_paths

from tlview import __version__
from tlview.load import read as load
from tlview.parse import Reader
from tlview.render import perfetto


def trace_of(path: Path) -> dict:
    out = io.BytesIO()
    perfetto.stream(load(path), out)
    return json.loads(out.getvalue())


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.log")) if path.is_dir() else [path]


def logged_events(path: Path) -> tuple[list[tuple[int, dict]], int]:
    """(process id, event) of each chromium_event record, read straight from the files, and
    the number of records whose payload is not an event."""
    out, bad = [], 0
    for f in _files(path):
        for rec in Reader(f):
            if rec.kind == "chromium_event":
                try:
                    out.append((rec.pid, orjson.loads(rec.payload or b"")))
                except orjson.JSONDecodeError:
                    bad += 1
    return out, bad


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("path", real_paths(), ids=lambda p: p.name)
def test_every_event_of_every_log(path: Path) -> None:
    trace = trace_of(path)
    assert trace["otherData"]["generator"] == f"tlview {__version__}"
    events = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    logged, bad = logged_events(path)
    assert len(events) == len(logged)
    assert trace["tlviewSkippedEvents"] == bad
    names = {
        e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"
    }
    files = {(f.name, rec.pid) for f in _files(path) for rec in Reader(f)}
    given: dict[tuple[str, int], int] = {}
    for got, (pid, ev) in zip(events, logged, strict=True):
        # as logged, in a process named by its log and the process id of the log prefix
        assert got == dict(ev, pid=got["pid"])
        (log,) = [f for f, p in files if p == pid and f"{f} (pid {pid})" in names[got["pid"]]]
        assert given.setdefault((log, pid), got["pid"]) == got["pid"]
    assert len(set(given.values())) == len(given) == len(names)  # one process each, none shared


def compile_trace(path: Path, ref: str) -> dict:
    """`tlview report PATH --format perfetto --compile-id REF`, parsed."""
    result = run_cli("report", path, "--format", "perfetto", "--compile-id", ref)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_compile_id_keeps_that_compiles_events() -> None:
    path = corpus("mlp_aot_eager")
    log = next(path.glob("*.log"))
    by_id: dict[str, list[dict]] = {}
    for rec in Reader(log):
        if rec.kind == "chromium_event":
            key = "-/-" if rec.compile_id is None else str(rec.compile_id)
            by_id.setdefault(key, []).append(dict(orjson.loads(rec.payload or b""), pid=rec.pid))
    assert len(by_id) >= 5  # compiles, restarts, recompiles
    for key, logged in by_id.items():
        trace = compile_trace(log, key)
        assert trace["otherData"]["compiles"] == [key]
        assert [e for e in trace["traceEvents"] if e["ph"] != "M"] == logged, key


def test_compile_id_tells_runs_apart() -> None:
    """torch._dynamo.reset() started the ids over: 0/0, 0/0@2 and 0/0@3 are three compiles."""
    log = FIXTURES / "reset.log"
    logged = [r for r in Reader(log) if r.kind == "chromium_event"]
    assert {str(r.compile_id) for r in logged} == {"0/0"}
    runs = []
    for ref in ("0/0", "0/0@2", "0/0@3"):
        trace = compile_trace(log, ref)
        assert trace["otherData"]["compiles"] == [ref]
        runs.append([e for e in trace["traceEvents"] if e["ph"] != "M"])
    assert all(runs) and sum(map(len, runs)) == len(logged)
    for a, b in zip(runs, runs[1:], strict=False):  # each run's events, then the next run's
        assert max(e["ts"] for e in a) <= min(e["ts"] for e in b)


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_ranks_with_one_pid_are_two_processes() -> None:
    """Ranks 0 and 2 of tlparse's 4-rank job logged the same pid (separate containers): each
    rank is a process of its own in the trace, named by its rank."""
    path = corpus("tlparse-tests", "multi_rank_logs")
    trace = trace_of(path)
    names = {
        e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"
    }
    ranks = sorted(n.split(" · ")[0] for n in names.values())
    assert ranks == ["rank 0", "rank 1", "rank 2", "rank 3"]
    same = [p for p, n in names.items() if n.endswith("(pid 1543231)")]
    assert len(same) == 2 and 1543231 in same
    by_rank = Counter(
        names[e["pid"]].split(" · ")[0] for e in trace["traceEvents"] if e["ph"] != "M"
    )
    logged = Counter(
        f"rank {f.name.rsplit('_', 1)[1][0]}"
        for f in _files(path)
        for rec in Reader(f)
        if rec.kind == "chromium_event"
    )
    assert by_rank == logged


def test_ranks_are_named_processes() -> None:
    trace = trace_of(corpus("multirank_gloo"))
    names = sorted(e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name")
    assert [n.split(" · ")[0] for n in names] == ["rank 0", "rank 1"]
    phs = Counter(e["ph"] for e in trace["traceEvents"] if e["ph"] != "M")
    assert phs == Counter(ev["ph"] for _, ev in logged_events(corpus("multirank_gloo"))[0])
    assert phs["B"] == phs["E"] and phs["i"] == 4


def test_truncated_log_keeps_unbalanced_begins() -> None:
    path = corpus("truncated_log")
    trace = trace_of(path)
    phs = Counter(e["ph"] for e in trace["traceEvents"])
    logged = Counter(ev["ph"] for _, ev in logged_events(path)[0])
    assert phs["B"] == logged["B"] > phs["E"] == logged["E"]


def test_unreadable_event_payloads_are_counted(tmp_path: Path) -> None:
    """Damage torch never writes: a chromium_event whose payload is not JSON (md5 kept valid)."""
    lines = DEMO.read_bytes().split(b"\n")
    k = next(i for i, ln in enumerate(lines) if b'{"chromium_event"' in ln)
    head = lines[k]
    bad = b"not json"
    md5 = hashlib.md5(bad, usedforsecurity=False).hexdigest().encode()
    j = head.index(b'"has_payload": "') + len(b'"has_payload": "')
    lines[k] = head[:j] + md5 + head[j + 32 :]
    lines[k + 1] = b"\t" + bad
    log = tmp_path / "damaged.log"
    log.write_bytes(b"\n".join(lines))
    trace = trace_of(log)
    assert trace["tlviewSkippedEvents"] == 1
    events = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    assert len(events) == len(logged_events(DEMO)[0]) - 1


def test_cli_writes_the_trace(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    for _ in range(2):  # the second run replaces its own file without --force
        r = run_cli("report", DEMO, "--format", "perfetto", "-o", out)
        assert r.exit_code == 0, r.output
    trace = json.loads(out.read_text())
    assert len([e for e in trace["traceEvents"] if e["ph"] != "M"]) == len(logged_events(DEMO)[0])


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_a_log_from_a_pipe_gives_every_event(tmp_path: Path) -> None:
    """The trace reads the log a second time; a pipe (`zcat LOG | tlview report -`) is read
    once, into a file, so its events are not lost to an empty second read."""
    code = "import sys; from tlview.cli import run; sys.exit(run())"
    want = len(logged_events(DEMO)[0])
    for name, data in (("log", DEMO.read_bytes()), ("gzip", gzip.compress(DEMO.read_bytes()))):
        out = tmp_path / f"{name}.json"
        p = subprocess.run(
            [sys.executable, "-c", code, "report", "-", "--format", "perfetto", "-o", str(out)],
            input=data,  # a pipe: /dev/stdin cannot be read again
            capture_output=True,
            check=False,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        trace = json.loads(out.read_text())
        assert len([e for e in trace["traceEvents"] if e["ph"] != "M"]) == want, name
        assert trace["otherData"]["logs"] == ["stdin"]


def test_a_job_is_one_trace_of_its_processes_in_rank_order(tmp_path: Path) -> None:
    """The collectives job, plus a third log that claims rank 1 (another pid): one Perfetto
    process per log, ranks in order, and each compile's estimated kernels on a track of their
    own (inductor_runtime_and_tensor_meta: 10 ops)."""
    sys.path.insert(0, str(FIXTURES.parent.parent / "benchmarks"))
    import make_job

    job = tmp_path / "job"
    job.mkdir()
    logs = sorted((FIXTURES / "collectives").glob("*.log"))
    for log in logs:
        (job / log.name).write_bytes(log.read_bytes())
    units = make_job.set_pid(7)(make_job.read_units(logs[1]))
    make_job.write_units(job / "z_rank1_rerun.log", units)
    trace = trace_of(job)
    ev = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    order = {e["pid"]: e["args"]["sort_index"] for e in ev if e["name"] == "process_sort_index"}
    shown = [names[p].split(" · ")[0] for p in sorted(names, key=order.__getitem__)]
    assert shown == ["rank 0", "rank 1", "rank 1#2"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    assert sorted(tracks.values()) == ["estimated runtime: 0/0 (graph 1)"] * 3
    for pid, tid in tracks:
        slices = [e for e in ev if e.get("cat") == "estimated_runtime" and e["pid"] == pid]
        assert len(slices) == 10 and all(e["tid"] == tid and e["ph"] == "X" for e in slices)
        assert slices[2]["name"] == "torch.ops._c10d_functional.all_gather_into_tensor.default"
        assert slices[2]["args"]["type"] == "collective"
