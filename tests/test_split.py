"""A log read in parts by several processes gives exactly the report of one reader."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus, only_log, run_cli

import tlview.index.parts as split
import tlview.runtime.store as store
from tlview.analyze.baseline import every_attempt
from tlview.index import compiles, kinds
from tlview.index.keep import Keep
from tlview.index.log import read_log
from tlview.runtime.cores import Meanwhile


def _json(path: Path) -> dict:
    result = run_cli("report", path, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize(
    "log",
    [
        lambda: only_log("mlp_aot_eager"),
        lambda: only_log("views_aliasing"),
        lambda: only_log("dynamic_shapes"),
        lambda: only_log("transformer_inductor"),
        lambda: only_log("truncated_log"),
        lambda: corpus("tlparse-tests", "multi_rank_logs", "dedicated_log_torch_trace_rank_1.log"),
        lambda: corpus("tlparse-tests", "simple_corrupted_json.log"),
        lambda: FIXTURES / "reset.log",  # compile id 0/0 started in both halves
        lambda: FIXTURES / "reset_break.log",  # and after a restart
        lambda: FIXTURES / "aoti.log",  # a compile outside any compile id
        lambda: FIXTURES / "kernels.log",  # kernels of a forward, then of its backward
        lambda: only_log("export"),
    ],
)
def test_two_halves_equal_one_reader(
    log: Callable[[], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log()
    whole = _json(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    assert split.readers(path) == 2
    halves = _json(path)
    assert halves == whole


def test_ids_started_over_read_in_two_at_any_of_their_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 0/0 is started three times (torch._dynamo.reset()): whichever part holds each start and
    # each compilation_metrics, the log gives one reader's three compiles.
    path = FIXTURES / "reset.log"
    whole = _json(path)
    data = path.read_bytes()
    cuts = [
        at
        for kind in (b'{"dynamo_start"', b'{"compilation_metrics"')
        for i in re.finditer(re.escape(kind), data)
        for at in (data.rfind(b"\n", 0, i.start()) + 1, data.find(b"\nV", i.start()) + 1)
    ]
    assert len(cuts) == 12
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    read_on = split._read_on
    spans: list[tuple[int, int]] = []
    monkeypatch.setattr(
        split,
        "_read_on",
        lambda p, log, part, span: spans.append(span) or read_on(p, log, part, span),
    )
    for at in cuts:
        monkeypatch.setattr(split, "record_start", lambda path, x, at=at: at)
        assert _json(path) == whole, at
    # Each time, this process read on from the cut to the end (the copy's part was dropped).
    assert spans == [(at, len(data)) for at in cuts]
    assert [c["key"] for c in every_attempt(whole)] == ["-/-", "0/0", "0/0@2", "0/0@3"]


def test_metrics_written_twice_across_the_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Damage: a compile's compilation_metrics record written again at the end of the log, in
    # the second part: its metrics stay the first's, the copy is an event, as with one reader.
    data = (FIXTURES / "demo.log").read_bytes()
    at = data.index(b'{"compilation_metrics"')
    start, end = data.rfind(b"\n", 0, at) + 1, data.index(b"\n", at) + 1
    log = tmp_path / "twice.log"
    log.write_bytes(data + data[start:end])
    whole = _json(log)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    monkeypatch.setattr(split, "record_start", lambda path, x: end)
    assert _json(log) == whole
    last = data.count(b"\n") + 1
    (c,) = [c for c in every_attempt(whole) if any(e["log_line"] == last for e in c["events"])]
    assert c["metrics"] is not None and c["events"][-1]["kind"] == "compilation_metrics"


def test_work_meanwhile_runs_once_and_moves_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    # The page's imports run while the other readers read; the first part is shorter for them,
    # and the read is the same (a job that fails changes nothing either).
    path = only_log("transformer_inductor")
    whole = _everything(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    starts: list[int] = []
    record_start = split.record_start
    monkeypatch.setattr(
        split, "record_start", lambda p, at: starts.append(at) or record_start(p, at)
    )
    ran: list[int] = []
    assert _everything(path, Meanwhile(lambda: ran.append(1), 0.0)) == whole
    assert _everything(path, Meanwhile(lambda: ran.append(2), 400_000 * split.NS_PER_BYTE)) == whole
    assert _everything(path, Meanwhile(lambda: 1 / 0, 0.0)) == whole
    assert ran == [1, 2]
    size = path.stat().st_size
    assert starts[0] == size // 2 and starts[1] == (size - 400_000) // 2
    monkeypatch.setattr(split, "PARALLEL_MIN", 1 << 62)
    assert _everything(path, Meanwhile(lambda: ran.append(3), 0.0)) == whole
    assert ran == [1, 2]  # read in one process: nothing runs


def test_halves_with_spilled_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both halves spill to disk; the second half's spill file changes hands on the way back.
    path = only_log("dtypes_zoo")
    whole = _json(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    assert _json(path) == whole


def test_split_point_is_a_record_line() -> None:
    path = only_log("transformer_inductor")
    data = path.read_bytes()
    at = split.record_start(path, len(data) // 2)
    assert at is not None and data[at - 1 : at] == b"\n" and data[at : at + 1] not in (b"\t", b"\n")
    assert read_log(path)[0].records == 348


def test_split_point_is_the_nearest_record_line_from_anywhere() -> None:
    # Searched out from the point a window at a time on both sides: always a nearest record line,
    # also from inside a payload far longer than a window (inductor code) and at both ends.
    import bisect
    import re

    path = only_log("transformer_inductor")
    data = path.read_bytes()
    starts = [m.end() for m in re.finditer(rb"\n(?=[^\t\n\r])", data)]
    gap, a = max((b - a, a) for a, b in zip(starts, starts[1:], strict=False))
    assert gap > 2 * (64 << 10)  # a payload over more than two windows: points inside it too
    inside = range(a, a + gap, gap // 7)
    points = sorted(
        {0, 1, len(data) - 1, len(data), *inside, *range(0, len(data), len(data) // 97)}
    )
    for at in points:
        i = bisect.bisect_left(starts, at)
        near = min(abs(s - at) for s in starts[max(i - 1, 0) : i + 1])
        got = split.record_start(path, at)
        assert got is not None and got in starts and abs(got - at) == near, at


def test_names_interned_before_the_start_are_found_looking_back() -> None:
    path = only_log("transformer_inductor")
    data = path.read_bytes()
    at = split.record_start(path, len(data) // 2)
    assert at is not None
    # Every `str` record before the start, as the file defines them (a later one wins).
    table: dict[int, str] = {}
    pid = None
    for line in data[:at].split(b"\n"):
        if b'] {"str": [' in line and not line.startswith(b"\t"):
            name, idx = json.loads(line[line.index(b"] {") + 2 :])["str"]
            table[idx] = name
            pid = int(line.split()[2])
    assert len(table) > 3 and pid is not None
    earlier = split.Earlier(path, at)
    try:
        assert {i: earlier(pid, i) for i in table} == table
        assert earlier(pid, max(table) + 1000) is None
        assert earlier(pid + 1, min(table)) is None  # another process interned nothing
    finally:
        earlier.close()


def test_a_later_part_cuts_and_finds_compact_names_as_one_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer other than torch's json.dumps writes `{"str":[` (no spaces), and a name may be
    # 64 KB long: a later part looks it up as the first part interned it, and keeps it cut to
    # what one reader keeps (it kept all 64 KB, and named frames `<file 0>`, before).
    data = only_log("mlp_aot_eager").read_bytes()  # frames of one file in every part
    long = "/" + "d" * 65536 + "/model.py"
    script = b"/home/user/corpus/gen/mlp_aot_eager.py"
    assert data.count(b'] {"str": ["' + script + b'"') == 1
    data = data.replace(script, long.encode())
    path = tmp_path / "compact.log"
    path.write_bytes(data.replace(b'] {"str": [', b'] {"str":['))
    monkeypatch.setenv(split.READERS_ENV, "1")
    whole = _everything(path)
    files = {f.file for c in whole[1:] for f in c["stack"]}  # StackFrame, a NamedTuple
    assert kinds.cut_name(long) in files and len(max(files, key=len)) < 512
    monkeypatch.setenv(split.READERS_ENV, "3")
    assert _everything(path) == whole


def _everything(path: Path, meanwhile: Meanwhile | None = None) -> list:
    """Every field of every compile and log a read gives, line numbers included."""
    out: list[Any] = []
    for log in read_log(path, meanwhile=meanwhile):
        out.append((log.lines, log.records, log.bad_count, log.bad_lines, log.kinds))
        out.extend(dataclasses.asdict(c) for c in log.compiles)
    return out


@pytest.mark.parametrize("in_memory", [256, 2])
@pytest.mark.parametrize(
    "log",
    [
        lambda: only_log("dtypes_zoo"),
        lambda: only_log("transformer_inductor"),
        lambda: corpus("tlparse-tests", "simple_corrupted_json.log"),
    ],
)
def test_later_part_numbers_its_lines_as_the_whole_log(
    log: Callable[[], Path], in_memory: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second reader counts lines from its own start; once merged, every log line number
    # (compiles, payloads, events, graph breaks, described tensors, bad lines) is the file's.
    path = log()
    monkeypatch.setattr(compiles, "IN_MEMORY", in_memory)  # 2: the compiles come back from disk
    whole = _everything(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    assert split.readers(path) == 2
    read_here = []  # the parts this process read: the second one only if the reader failed
    read_part = split.read_part
    monkeypatch.setattr(
        split, "read_part", lambda *a, **k: read_here.append(a[3]) or read_part(*a, **k)
    )
    assert _everything(path) == whole
    assert len(read_here) == 1 and read_here[0][0] == 0


def test_a_failed_second_reader_is_read_here_with_the_same_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The forked reader fails: this process reads the second part itself, numbered as the file.
    path = corpus("tlparse-tests", "simple_corrupted_json.log")
    whole = _everything(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)

    def fails(*args: object) -> None:
        raise MemoryError("no memory in the copy")

    monkeypatch.setattr(split, "_later", fails)
    read_here = []
    read_part = split.read_part
    monkeypatch.setattr(
        split, "read_part", lambda *a, **k: read_here.append(a[3]) or read_part(*a, **k)
    )
    assert _everything(path) == whole
    assert len(read_here) == 2 and read_here[1][0] > 0


def test_no_fork_beside_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    path = only_log("dtypes_zoo")
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    assert split.readers(path) == 2
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert split.readers(path) == 1
    finally:
        stop.set()
        other.join()


def test_a_failed_second_reader_leaves_no_spill_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The copy spilled its compiles to disk and then failed to send them: its files go with it.
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(store, "_DIR", None)  # this run's temp directory: made in tmp_path
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    later = split._later

    def cannot_be_sent(*args: Any) -> split.Part:
        part = later(*args)
        assert list(tmp_path.glob("tlview-*/tlview-*.spill"))  # the copy made its own
        # Sending fails after the spill files were packed (and let go of deleting themselves).
        part.crlf = lambda: None  # type: ignore[assignment]
        return part

    monkeypatch.setattr(split, "_later", cannot_be_sent)
    logs = read_log(only_log("dtypes_zoo"))
    assert sum(len(log.compiles) for log in logs) > 4
    del logs
    import gc

    gc.collect()
    assert list(tmp_path.glob("tlview-*/*")) == []


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("copy_fails", [False, True])  # True: the second part is read here
@pytest.mark.parametrize("budget", [0, 20_000, 200_000, 2_000_000])
@pytest.mark.parametrize(
    "log",
    [
        lambda: only_log("transformer_inductor"),  # inductor code: payloads in both halves
        lambda: corpus("tlparse-tests", "simple_corrupted_json.log"),  # an md5 mismatch, damage
    ],
)
def test_the_page_keeps_the_texts_one_reader_keeps(
    log: Callable[[], Path], budget: int, copy_fails: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each reader keeps texts with the whole budget; the merge forgets those one reader would
    # not have kept, whether the budget runs out in the first half, the second, or never.
    from tlview.load import read as load
    from tlview.render.html import budget as kept
    from tlview.render.html import report as html

    path = log()
    if copy_fails:
        monkeypatch.setattr(split, "_later", lambda *a: 1 / 0)
    monkeypatch.setattr(kept, "READ_BYTES", budget)  # what each reader keeps
    monkeypatch.setattr(kept, "PAGE_PAYLOAD_BYTES", budget)
    monkeypatch.setattr(kept, "PAYLOAD_BYTES", 8_000)
    monkeypatch.setenv("TLVIEW_NO_SPLIT", "1")
    whole = html.render(load(path, kept.page_keep(False)))
    monkeypatch.delenv("TLVIEW_NO_SPLIT")
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    dropped: list[int] = []
    join = Keep.join

    def spied(self: Keep, later: Keep, lines: int) -> set[int]:
        got = join(self, later, lines)
        dropped.append(len(got))
        return got

    monkeypatch.setattr(Keep, "join", spied)
    halves = html.render(load(path, kept.page_keep(False)))
    assert halves == whole
    # The smallest budget runs out while the second half is read: texts were forgotten.
    assert (sum(dropped) > 0) == (budget == 20_000)


def test_a_progress_bar_leaves_the_log_read_in_two(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a terminal a bar is shown while reading: it is drawn by the reader, with no thread of
    # its own, so a large log is still read by two processes; its bytes count as the whole
    # log's, and it ends at the log's size.
    from tlview.logs.progress import Bar

    before = threading.active_count()
    bar = Bar(1000)
    try:
        assert threading.active_count() == before
    finally:
        bar.close()
    path = only_log("transformer_inductor")
    size = path.stat().st_size
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    told: list[int] = []
    halves: list[int] = []
    read_part = split.read_part
    monkeypatch.setattr(
        split, "read_part", lambda *a, **k: halves.append(a[3][1]) or read_part(*a, **k)
    )
    read_log(path, progress=told.append)
    mid = halves[-1]  # where the first part ends and the second starts
    assert 0 < mid < size
    assert told[0] > mid  # the first part's bytes, scaled to the whole log
    assert sum(told) == size
    # With work to do after its part (importing torch for `inputs`), this process's part is
    # shorter and stands for less: the bar waits for that work before it is full.
    told.clear()
    lead = 400_000
    read_log(
        path, progress=told.append, meanwhile=Meanwhile(lambda: None, lead * split.NS_PER_BYTE)
    )
    mid = halves[-1]
    assert told[0] <= (mid + 1) * size // (mid + lead) < size
    assert sum(told) == size


def test_an_end_whose_begin_was_lost_closes_nothing_in_either_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Damage: a begun event's record is gone, its end is still there. One reader ignores the
    # end; the second part of a split must not take it for the end of an event of the first
    # part (the depths of the events after it would be one short).
    data = only_log("transformer_inductor").read_bytes()
    starts = [m.end() for m in re.finditer(rb"\n(?=V)", data)]
    lost = next(
        i
        for i, at in enumerate(starts)
        if data.startswith(b"\t", data.index(b"\n", at) + 1)
        and b'"name": "_recursive_pre_grad_passes"' in data[at : data.find(b"\nV", at)]
        and b'"ph": "B"' in data[at : data.find(b"\nV", at)]
    )
    log = tmp_path / "lost.log"
    log.write_bytes(data[: starts[lost]] + data[starts[lost + 1] :])
    whole = _json(log)
    size = len(data) - (starts[lost + 1] - starts[lost])
    cuts = [at - (starts[lost + 1] - starts[lost]) for at in starts[lost + 1 : lost + 10]]
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    for at in cuts:
        assert 0 < at < size
        monkeypatch.setattr(split, "record_start", lambda path, x, at=at: at)
        assert _json(log) == whole, at
    # The events after the lost one sit where one reader puts them.
    (c,) = [c for c in every_attempt(whole) if c["key"] == "0/0"]
    depth = {p["name"]: p["depth"] for p in c["phases"]}
    assert depth["create_aot_dispatcher_function"] == depth["backend_compile"] + 1


@pytest.mark.parametrize("readers", [3, 5, 8])
@pytest.mark.parametrize(
    "log",
    [
        lambda: only_log("mlp_aot_eager"),  # restarts and recompiles of one frame in every part
        lambda: only_log("transformer_inductor"),  # events begun in one part, ended in another
        lambda: FIXTURES / "reset.log",  # compile ids started over: read on from that part
        lambda: FIXTURES / "demo.log",  # symbols made in a part after their inputs' part
    ],
)
def test_many_parts_equal_one_reader(
    log: Callable[[], Path], readers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As many readers as a 16-core machine has for a large log: every part is merged in order
    # into the read one reader gives, field for field; compiles closed and spilled in any part.
    path = log()
    monkeypatch.setattr(compiles, "IN_MEMORY", 3)
    whole = _everything(path)
    spans: list[tuple[int, int]] = []
    read_part = split.read_part
    monkeypatch.setattr(
        split, "read_part", lambda *a, **k: spans.append(a[3]) or read_part(*a, **k)
    )
    monkeypatch.setenv(split.READERS_ENV, str(readers))
    assert split.readers(path) == readers
    assert _everything(path) == whole
    assert spans[0][0] == 0 and len(spans) >= 1  # this process read the first part


def test_one_reader_a_core_with_eight_megabytes_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cores this process may run on (its affinity), each reader at least PART_MIN bytes;
    # below PARALLEL_MIN one reader. A sparse file stands for a large log.
    log = tmp_path / "big.log"
    with log.open("wb") as f:
        f.truncate(200 << 20)
    for cores, size, want in [
        (16, 200 << 20, 16),  # 200 MB: sixteen parts of 8 MB and more
        (16, 40 << 20, 5),
        (16, 12 << 20, 2),
        (2, 200 << 20, 2),
        (16, 6 << 20, 1),  # under PARALLEL_MIN
        (1, 200 << 20, 1),
    ]:
        monkeypatch.setattr(split, "cores", lambda n=cores: n)
        monkeypatch.setattr(split, "spare_core", lambda n=cores: n > 1)
        with log.open("r+b") as f:
            f.truncate(size)
        assert split.readers(log) == want, (cores, size)
    monkeypatch.setattr(split, "spare_core", lambda: True)
    monkeypatch.setenv(split.READERS_ENV, "8")  # asked for: whatever the log's size or cores
    assert split.readers(log) == 8
