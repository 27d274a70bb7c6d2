"""Bounds: what a log can make tlview hold. Each figure of docs/trust.md's table is its named
constant and is tried with a log just past it (the exit statuses the README lists are
errors.py's); a record line, its payload and the lines after it are bounded by
TLVIEW_MAX_RECORD, mapped, chunked and gzipped; floods of lines are read in bounded memory; the
pipe copy `--format perfetto` makes holds what the trace rereads; a job keeps one text budget;
the reader and the index stay flat over many tiny records."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import orjson
import pytest
from crafted import (
    PREFIX,
    compile_of,
    interned,
    limited,
    metrics,
    one_input,
    record,
    source,
    start,
    storage,
    write_log,
)
from damage import (
    doc_of,
    run,
)
from helpers import FIXTURES, ROOT, report_json

import tlview
from tlview import errors
from tlview.analyze.baseline import every_attempt
from tlview.index import compiles, describe, kinds
from tlview.index.log import read_log
from tlview.parse import DEFAULT_MAX_RECORD, MAX_BAD_KEPT, Reader
from tlview.replay import plan, script
from tlview.tensors import fill

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# Each figure of the table (as it is written there) and the constant that sets it.
FIGURES: dict[str, int] = {
    "64 MiB": DEFAULT_MAX_RECORD,  # one record as read (the default column)
    "4M elements": fill.FILL_STEP,
    "16 MiB": fill.FILL_STEP * 4,  # of float32
    "512 characters": kinds.MAX_FILENAME,
    "1000 bad lines": MAX_BAD_KEPT,
    "500 events": kinds.MAX_EVENTS,
    "1000 distinct record kinds": kinds.MAX_KINDS,
    "100,000 storages": describe.MAX_DESCRIBED,
    "100,000 tensors": describe.MAX_DESCRIBED,
    "100,000 sources": describe.MAX_DESCRIBED,
    "256 compiles": compiles.IN_MEMORY,
    "8 MiB": compiles.IN_MEMORY_BYTES,
    "64 MiB a graph": plan.MAX_GRAPH_BYTES,
    "512 MiB a job": plan.MAX_TOTAL_BYTES,
    "100 characters": script.MAX_SLUG,
}
NUMBER = re.compile(r"(\d[\d,]*)\s?(KiB|MiB|GiB|K|M)?\b")


def _table(doc: Path, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after HEADING."""
    text = doc.read_text(encoding="utf-8").split(heading, 1)[1]
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # no header, no rule


def _value(figure: str) -> int:
    m = NUMBER.match(figure)
    assert m is not None, figure
    return int(m.group(1).replace(",", "")) * UNITS[m.group(2) or ""]


def test_every_figure_in_the_trust_table_is_its_constant() -> None:
    rows = _table(ROOT / "docs" / "trust.md", "## What is bounded")
    # The bound and default columns, without examples in code spans (`...[65,536 characters]`).
    text = " ".join(re.sub(r"`[^`]*`", "", r[1] + " " + r[3]) for r in rows)
    for figure, constant in FIGURES.items():
        assert figure in text, f"docs/trust.md no longer says {figure!r}"
        assert _value(figure) == constant, f"docs/trust.md says {figure}; the code has {constant:,}"
    rest = re.sub(r"exit \d+|float\d\w*", "", text)  # an exit status, a dtype: no figures
    for figure in sorted(FIGURES, key=len, reverse=True):
        rest = rest.replace(figure, "")
    assert NUMBER.findall(rest) == [], "a figure in docs/trust.md with no constant in FIGURES"


def test_the_readme_exit_statuses_are_errors_py() -> None:
    rows = _table(ROOT / "README.md", "## Exit status")
    documented = {int(r[0]) for r in rows}
    coded = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert documented == coded
    assert errors.EXIT_USAGE == 2 and "bad usage" in rows[2][1]


def _log(tmp_path: Path, body: bytes) -> Path:
    p = tmp_path / "past.log"
    p.write_bytes(interned("/m.py") + start() + body + metrics())
    return p


def test_bad_lines_past_the_bound_are_counted_not_listed(tmp_path: Path) -> None:
    data = report_json(_log(tmp_path, b"not a record\n" * (MAX_BAD_KEPT + 1)))
    assert data["stats"]["bad_lines"] == MAX_BAD_KEPT + 1
    assert len(data["bad_lines"]) == MAX_BAD_KEPT
    at = report_json(_log(tmp_path, b"not a record\n" * MAX_BAD_KEPT))
    assert len(at["bad_lines"]) == at["stats"]["bad_lines"] == MAX_BAD_KEPT


def test_record_kinds_past_the_bound_are_counted_together(tmp_path: Path) -> None:
    n = kinds.MAX_KINDS + 1
    body = b"".join(record(f"kind{i}", {}) for i in range(n))
    counted = report_json(_log(tmp_path, body))["stats"]["kinds"]
    assert len(counted) == kinds.MAX_KINDS + 1  # the first MAX_KINDS, and the rest together
    assert counted[kinds.OTHER_KINDS] == n + 3 - kinds.MAX_KINDS  # str, start, metrics too


def test_a_file_name_past_the_bound_is_cut(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    name = "/" + "d" * kinds.MAX_FILENAME + ".py"
    p.write_bytes(interned(name) + start())
    shown = every_attempt(report_json(p))[0]["file"]
    assert len(shown) <= kinds.MAX_FILENAME < len(name)
    assert f"[{len(name):,} characters]" in shown


@pytest.mark.slow  # 2 x 100,001 records
def test_describe_records_past_the_bound_are_dropped_and_counted(tmp_path: Path) -> None:
    n = describe.MAX_DESCRIBED + 1
    body = b"".join(storage(i, 8) for i in range(n)) + b"".join(
        source(i, f"L['x{i}']") for i in range(n)
    )
    c = every_attempt(report_json(_log(tmp_path, body)))[0]
    assert c["events_dropped"] == 2  # the one storage and the one source past the bound
    assert len(c["inputs"]) == describe.MAX_DESCRIBED


def test_events_past_the_bound_are_counted_not_kept(tmp_path: Path) -> None:
    p = tmp_path / "events.log"
    n = kinds.MAX_EVENTS + 1
    p.write_bytes(interned("/m.py") + start() + record("some_event", {"n": 1}) * n)
    c = every_attempt(report_json(p))[0]
    assert len(c["events"]) == kinds.MAX_EVENTS and c["events_dropped"] == 1


def test_a_repro_folder_name_past_the_bound_is_cut_with_a_hash() -> None:
    at = "c" * (script.MAX_SLUG - 3) + "0/1"  # `0/1` -> `0-1`: exactly MAX_SLUG characters
    assert script.slug(at) == "c" * (script.MAX_SLUG - 3) + "0-1"
    past, other = "c" + at, "c" + at[:-1] + "2"
    cut = script.slug(past)
    assert len(cut) == script.MAX_SLUG and "---" in cut and cut != script.slug(other)


def _bounded_cases(tmp: Path) -> dict[str, tuple[Path, int, str]]:
    """Logs with one over-long unit between two compiles: the path, its line, the reason's words."""
    n = 3 << 20
    head = interned("/m.py") + one_input()
    tail = one_input((1, 0))
    art = record("artifact", {"name": "a", "encoding": "string"})
    lines = {
        "record line": (
            PREFIX + b'{"artifact": {"name": "x", "v": "' + b"a" * n + b'"}}\n',
            "a line of",
        ),
        "junk line": (b"j" * n + b"\n", "a line of"),
        "payload": (
            record(
                "artifact",
                {"name": "p", "encoding": "string"},
                payload=b"q" * 100 + b"\nq" * (n // 2),
            ),
            "payload of artifact",
        ),
        "blank lines": (art + b"\n" * n, "after the artifact record, no payload"),
        "CRLF blank lines": (art + b"\r\n" * (n // 2), "after the artifact record, no payload"),
    }
    out = {}
    line = head.count(b"\n") + 1
    for what, (unit, words) in lines.items():
        for gz in (False, True):
            data = head + unit + tail
            p = tmp / (what.replace(" ", "_") + (".log.gz" if gz else ".log"))
            p.write_bytes(gzip.compress(data, mtime=0) if gz else data)
            out[f"{what}{' (gzip)' if gz else ''}"] = (p, line, words)
    return out


@pytest.mark.slow  # over a second
def test_one_record_over_the_bound_is_one_bad_line(tmp_path: Path) -> None:
    """TLVIEW_MAX_RECORD=1M, a 3 MB line, payload or run of blank lines: one bad line at its
    line with its size and the bound; both compiles and the lines after it are read; mapped,
    chunked and gzipped alike."""
    env = {"TLVIEW_MAX_RECORD": "1M"}
    for what, (p, line, words) in _bounded_cases(tmp_path).items():
        for mmap in ("", "1"):
            doc = doc_of(p, env={**env, "TLVIEW_NO_MMAP": mmap})
            assert [c["key"] for c in every_attempt(doc)] == ["0/0", "1/0"], what
            bad = [(b["line"], b["reason"]) for b in doc["bad_lines"]]
            assert len(bad) == 1 and words in bad[0][1], (what, bad)
            assert "1,048,576 bytes, $TLVIEW_MAX_RECORD" in bad[0][1], bad
            assert bad[0][0] in (line, line + 1), (what, bad, line)
            whole = doc_of(p, env={"TLVIEW_NO_MMAP": mmap})  # under the default bound
            assert whole["stats"]["lines"] == doc["stats"]["lines"], what
            if "line" not in what:  # the record whose payload or flood was not read is kept
                assert whole["stats"]["records"] == doc["stats"]["records"], what


def test_a_bad_bound_is_a_usage_error(tmp_path: Path) -> None:
    res = run("report", str(FIXTURES / "demo.log"), env={"TLVIEW_MAX_RECORD": "lots"})
    assert res.exit_code == 2 and "TLVIEW_MAX_RECORD 'lots'" in res.stderr, res.stderr


@pytest.mark.slow
def test_long_lines_and_floods_in_bounded_memory(tmp_path: Path) -> None:
    """Under the default bound, in a child whose address space is 1.5 GB: a 96 MiB record line
    (orjson would die of a signal on it), and a gzip of a few hundred KB that expands to a
    record then 400 MB of blank lines, or to one line with no end. Each is one bad line."""
    base = interned("/m.py") + one_input()
    line = PREFIX + b'{"artifact": {"name": "x", "v": [' + b"NaN," * (24 << 20) + b"1]}}\n"
    write_log(tmp_path, "line.log", base, line, one_input((1, 0)))
    for name, filler in (("flood.log.gz", b"\n"), ("endless.log.gz", b"x")):
        with gzip.open(tmp_path / name, "wb", compresslevel=1) as z:
            z.write(base + record("artifact", {"name": "a"}))
            for _ in range(25):
                z.write(filler * (16 << 20))  # 400 MB in all, a few hundred KB on disk
    for name in ("line.log", "flood.log.gz", "endless.log.gz"):
        p = tmp_path / name
        res = limited(["report", str(p), "--format", "json"], 3 << 29)
        err = res.stderr.decode()
        assert res.returncode == 0 and "Traceback" not in err, (name, res.returncode, err[-500:])
        doc = orjson.loads(res.stdout)
        assert "0/0" in [c["key"] for c in every_attempt(doc)], name
        assert len(doc["bad_lines"]) == 1 and "TLVIEW_MAX_RECORD" in doc["bad_lines"][0]["reason"]


@pytest.mark.slow  # 16 MiB of graph code through a pipe: about 5 s
def test_the_pipe_copy_for_the_trace_is_what_it_rereads(tmp_path: Path) -> None:
    """`--format perfetto` from a pipe copies the stream to read it again: the copy holds every
    record line and the payloads of the records the trace reads, the others as empty lines (so
    each line keeps its number), gzip-compressed: 16 MiB of graph code copy as a few KiB."""
    import gzip
    import io

    from crafted import record

    from tlview.commands.paths import _copy_wanted

    event = {"name": "dynamo", "ph": "B", "ts": 5, "pid": 0, "tid": 0, "cat": "dynamo_timed"}
    big = "\n".join(f"    x{i} = y{i} + 1" for i in range(800_000))
    data = (
        compile_of((0, 0), [("L['x']", [4], "torch.float32")])
        + record("dynamo_output_graph", {"sizes": {}}, (0, 0), payload=big)
        + record("chromium_event", {}, (0, 0), payload=json.dumps(event))
    )
    for src in (data, gzip.compress(data)):
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as dst:
            _copy_wanted(io.BytesIO(src), dst, (b'"chromium_event"',))
        assert len(out.getvalue()) < 200_000 < len(data) // 50
        copy = gzip.decompress(out.getvalue())
        assert copy.count(b"\n") == data.count(b"\n")  # every line keeps its number
        assert json.dumps(event).encode() in copy and b"x17 = y17" not in copy
        kept = [ln for ln in copy.split(b"\n") if ln and not ln.startswith(b"\t")]
        assert kept == [ln for ln in data.split(b"\n") if ln and not ln.startswith(b"\t")]


def test_payload_text_kept_is_one_budget_per_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of 4 rank logs keeps at most the page's reading budget of text over all its logs
    (each log its share), not that budget per log."""
    from crafted import artifact

    from tlview.render.html import budget

    monkeypatch.setattr(budget, "READ_BYTES", 2 << 20)
    job = tmp_path / "job"
    job.mkdir()
    one = [("L['x']", [4], "torch.float32")]
    for r in range(4):
        codes = b"".join(
            artifact("inductor_output_code", f"{r}{k}" * 150_000, (0, 0)) for k in range(4)
        )
        (job / f"rank_{r}.log").write_bytes(compile_of((0, 0), one) + codes)
    report = tlview.read(str(job), keep=budget.page_keep(False))
    kept = [p for c in report.attempts for p in c.artifacts if p.text is not None]
    assert sum(len(p.text or "") for p in kept) <= 2 << 20
    assert {c.rank for c in report.attempts if any(p.text for p in c.artifacts)} == {0, 1, 2, 3}


_GEN = r"""
import hashlib, sys
n, path = int(sys.argv[1]), sys.argv[2]
pre = b"V1129 17:41:15.872000 2142 torch/_dynamo/utils.py:1] "
ev = b'{\n"name": "dynamo",\n"ts": %d,\n"ph": "B",\n"args": {\n"compile_id": "0/%d"\n}\n}'
with open(path, "wb") as w:
    batch = []
    for i in range(n):
        r = i % 5
        if r == 0:  # a chromium event begun and never ended, with its md5-checked payload
            pay = ev % (i, i % 8)
            head = b'{"chromium_event": {}, "frame_id": 0, "frame_compile_id": %d, "has_payload": "%s"}'
            rec = pre + head % (i % 8, hashlib.md5(pay).hexdigest().encode()) + b"\n"
            rec += b"".join(b"\t" + ln + b"\n" for ln in pay.split(b"\n"))
        elif r == 1:
            rec = pre + b'{"guard_added_fast": {"expr": "s0 > %d"}, "frame_id": 0, "frame_compile_id": %d}\n' % (i, i % 8)
        elif r == 2:
            rec = b"not a record %d\n" % i
        elif r == 3:
            rec = pre + b'{"kind_%d": {"n": %d}}\n' % (i, i)
        else:
            rec = pre + b'{"str": ["/a/model.py", %d]}\n' % (i % 16)
        batch.append(rec)
        if len(batch) >= 10000:
            w.write(b"".join(batch))
            batch.clear()
    w.write(b"".join(batch))
"""


def _stream_peak(tmp: Path, n: int, index: bool) -> tuple[int, int]:
    """Peak traced memory while reading N generated records from a pipe (never a file)."""
    fifo = tmp / f"stream{n}{index}"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", _GEN, str(n), str(fifo)])
    tracemalloc.start()
    try:
        if index:
            logs = read_log(fifo)
            count = logs[0].records
        else:
            count = sum(1 for _ in Reader(fifo))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        writer.wait(240)


@pytest.mark.parametrize("index", [False, True], ids=["reader", "index"])
@pytest.mark.slow
def test_memory_stays_flat_over_many_tiny_records(
    tmp_path: Path, index: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten times the records, the same memory: nothing is kept per record (distinct kinds,
    events never ended, bad lines, repeated file names are all bounded)."""
    from tlview import parse

    monkeypatch.setattr(parse, "CHUNK", 1 << 16)  # both streams span many chunks
    small_n, big_n = 20_000, 200_000
    small, small_peak = _stream_peak(tmp_path, small_n, index)
    big, big_peak = _stream_peak(tmp_path, big_n, index)
    assert (small, big) == (small_n * 4 // 5, big_n * 4 // 5)  # every record line was read
    assert big_peak < small_peak * 1.5 + (1 << 20), (small_peak, big_peak)
