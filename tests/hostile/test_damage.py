"""Damaged real logs: no traceback, the documented exit status, nothing readable lost, every bad
line reported with its file, line and reason (README "Exit status", issue 6); a compile whose
first payload is cut, and a gzip cut after 1000 bytes, keep what they hold."""

from __future__ import annotations

import gzip
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import write_log
from damage import (
    EXIT_NO_TRACE,
    EXIT_OK,
    EXIT_STRICT,
    Facts,
    assert_clean_exit,
    assert_facts_kept,
    byte_junk,
    check_damaged,
    doc_of,
    flips,
    gunzip_prefix,
    gzip_bytes,
    interleave,
    line_edits,
    payload_of,
    readable,
    real_logs,
    record_json,
    replace_unit,
    report_json,
    run,
    run_process,
    truncations,
    unchecked_lines,
    unit_bytes,
    unit_edits,
    units,
    valid,
)
from helpers import CORPUS, FIXTURES

from tlview.analyze.baseline import every_attempt

SEED = 6  # the issue number: change it to try other damage, the checks stay the same
LOGS = real_logs(SEED, 4, max_bytes=700_000)
DAMAGES = {
    "truncations": truncations,
    "flips": flips,
    "line_edits": line_edits,
    "unit_edits": unit_edits,
    "byte_junk": byte_junk,
}


def _cases(log: Path, damage: str) -> Iterator[tuple[str, bytes]]:
    data = log.read_bytes()
    rng = random.Random(f"{SEED}:{log.name}:{damage}")
    for what, damaged in DAMAGES[damage](data, rng):
        yield f"{log.name}: {what}", damaged


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_damaged_copies_keep_every_intact_record(log: Path, damage: str, tmp_path: Path) -> None:
    """Each damaged copy: clean exit, intact compiles and inputs kept, damage reported."""
    original = log.read_bytes()
    failures = []
    count = 0
    for what, damaged in _cases(log, damage):
        count += 1
        try:
            check_damaged(original, damaged, tmp_path, log.name, what)
        except AssertionError as e:
            failures.append(str(e).splitlines()[0][:600])
    assert count > 0
    assert not failures, f"{len(failures)} of {count} cases failed:\n" + "\n".join(failures)


def _doc(log: Path) -> dict:
    return report_json(log)


@pytest.mark.parametrize("log", LOGS[:2], ids=lambda p: p.name)
def test_crlf_reads_as_the_original(log: Path, tmp_path: Path) -> None:
    """CRLF line ends change nothing: same compiles, statuses, inputs; no bad line; a note."""
    crlf = tmp_path / log.name
    crlf.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    want, got = _doc(log), _doc(crlf)
    assert_facts_kept(Facts.of(want), Facts.of(got), "CRLF", status=True)
    assert got["stats"]["bad_lines"] == want["stats"]["bad_lines"]
    assert got["stats"]["records"] == want["stats"]["records"]
    assert any("CRLF" in n for lg in got["logs"] for n in lg["notes"])


@pytest.mark.parametrize("log", LOGS[:2], ids=lambda p: p.name)
def test_duplicated_and_shuffled_records_lose_nothing(log: Path, tmp_path: Path) -> None:
    """Whole records repeated or out of order: every compile and input of the log is there."""
    want = Facts.of(_doc(log))
    us = units(log.read_bytes())
    rng = random.Random(SEED)
    dup = tmp_path / "dup" / log.name
    dup.parent.mkdir()
    dup.write_bytes(b"".join(u.data * (2 if rng.random() < 0.2 else 1) for u in us))
    assert_facts_kept(want, Facts.of(_doc(dup)), "duplicated records", status=True)
    shuffled = list(us)
    rng.shuffle(shuffled)
    mixed = tmp_path / "shuffled" / log.name
    mixed.parent.mkdir()
    mixed.write_bytes(b"".join(u.data for u in shuffled))
    got = Facts.of(_doc(mixed))
    assert_facts_kept(want, got, "shuffled records")


def test_records_of_two_logs_interleaved(tmp_path: Path) -> None:
    """Two processes writing one file: each one's compiles and inputs as in its own log."""
    a = FIXTURES / "demo.log"
    b = next(p for p in LOGS[1:] if _pids(p) != _pids(a))
    both = tmp_path / "both.log"
    both.write_bytes(interleave(a.read_bytes(), b.read_bytes(), random.Random(SEED)))
    got = _doc(both)
    facts = Facts.of(got)
    for one in (a, b):
        assert_facts_kept(Facts.of(_doc(one)), facts, f"interleaved {one.name}", status=True)
    assert len(got["logs"]) == 2
    assert sorted(lg["pid"] for lg in got["logs"]) == sorted(_pids(a) | _pids(b))
    assert got["stats"]["records"] == _doc(a)["stats"]["records"] + _doc(b)["stats"]["records"]


def _pids(p: Path) -> set[int]:
    return {c["pid"] for c in every_attempt(_doc(p))}


def test_empty_binary_and_recordless_files_exit_1(tmp_path: Path) -> None:
    """Nothing readable: one line on stderr naming the file and why, exit 1."""
    cases = {
        "empty.log": b"",
        "random.bin": random.Random(SEED).randbytes(50_000),
        "image.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40,
        "notes.txt": b"just some text\nwith lines\n" * 100,
        "only-payload.log": b"\tpayload line\n\tanother\n",
        "blank.log": b"\n\n\r\n",
        "nul.log": b"\0" * 20_000,
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        res = run("report", str(p))
        assert_clean_exit(res, EXIT_NO_TRACE, name)
        assert name in res.stderr
    res = run("report", str(tmp_path / "missing.log"))
    assert_clean_exit(res, EXIT_NO_TRACE, "missing")
    assert "no such file" in res.stderr
    empty_dir = tmp_path / "d"
    empty_dir.mkdir()
    assert_clean_exit(run("report", str(empty_dir)), EXIT_NO_TRACE, "empty directory")


def test_strict_and_text_list_bad_lines(tmp_path: Path) -> None:
    """--strict exits 3 exactly when a line was bad; the text report lists file:line: reason."""
    log = FIXTURES / "demo.log"
    assert_clean_exit(run("report", str(log), "--strict"), EXIT_OK, "undamaged --strict")
    data = log.read_bytes()
    u = units(data)[40]
    cut = tmp_path / "demo.log"
    cut.write_bytes(data[: u.start + len(u.head) // 2] + b"\n" + data[u.end :])
    doc = report_json(cut)
    bad = doc["bad_lines"]
    assert [b["line"] for b in bad] == [u.line]
    assert "JSON" in bad[0]["reason"]
    res = run("report", str(cut), "--strict")
    assert_clean_exit(res, EXIT_STRICT, "--strict")
    assert res.stdout, "the report is still written under --strict"
    text = run("report", str(cut))
    assert_clean_exit(text, EXIT_OK, "text")
    assert f"demo.log:{u.line}: {bad[0]['reason']}" in text.stdout


def test_payload_lines_after_a_blank_line_are_bad_lines(tmp_path: Path) -> None:
    """TAB lines under a record, but with blank lines before them, belong to no record:
    reported at the first of them, with or without a payload above, the records kept."""
    data = (FIXTURES / "demo.log").read_bytes()
    us = units(data)
    bare = next(u for u in us if u.lines == 1)  # a record with no payload
    full = next(u for u in us if u.lines > 3 and u.start > bare.start)
    stray = b"\n\tstray payload line 1\n\tstray payload line 2\n"
    out = data[: bare.end] + stray + data[bare.end : full.end] + b"\n" + stray + data[full.end :]
    log = tmp_path / "stray.log"
    log.write_bytes(out)
    doc = report_json(log)
    second = full.last_line + 1 + 3  # its lines after the first stray block's three
    assert [(b["line"], b["reason"]) for b in doc["bad_lines"]] == [
        (bare.line + 2, "payload lines after a blank line, cut off from any record: skipped"),
        (second + 2, "payload lines after a blank line, cut off from any record: skipped"),
    ]
    assert doc["stats"]["records"] == report_json(FIXTURES / "demo.log")["stats"]["records"]
    assert_clean_exit(run("report", str(log), "--strict"), EXIT_STRICT, "--strict")


def test_times_no_clock_gives_are_bad_lines(tmp_path: Path) -> None:
    """A compile time below zero (damage torch never writes) is a bad line naming it, and is
    left out of the compile and of every total, as a missing one is."""
    data = (FIXTURES / "demo.log").read_bytes()
    us = units(data)
    fwd = next(u for u in us if b'"entire_frame_compile_time_s": 1.104691' in u.head)
    bwd = next(u for u in us if b'{"bwd_compilation_metrics"' in u.head)
    edits = []
    for u, fields in (
        (fwd, {"entire_frame_compile_time_s": -1.104691, "dynamo_cumulative_compile_time_us": -1}),
        (bwd, {"inductor_compile_time_s": -0.5}),
    ):
        meta = record_json(u, lenient=False)
        assert meta is not None
        kind = next(iter(meta))
        meta[kind].update(fields)
        edits.append((u, unit_bytes(meta, payload_of(u), u)))
    for u, new in sorted(edits, key=lambda e: -e[0].start):
        data = replace_unit(data, u, new)
    log = tmp_path / "negative.log"
    log.write_bytes(data)
    doc, before = report_json(log), report_json(FIXTURES / "demo.log")
    assert [(b["line"], b["reason"]) for b in doc["bad_lines"]] == [
        (
            fwd.line,
            "compilation_metrics: not a duration: entire_frame_compile_time_s -1.104691, "
            "dynamo_cumulative_compile_time_us -1",
        ),
        (bwd.line, "bwd_compilation_metrics: not a duration: inductor_compile_time_s -0.5"),
    ]
    c = next(c for c in every_attempt(doc) if c["first_log_line"] <= fwd.line <= c["last_log_line"])
    assert c["compile_time_s"] is None and c["metrics"]["graph_op_count"] is not None
    total, was = doc["stats"]["compile_time_s"], before["stats"]["compile_time_s"]
    assert total == pytest.approx(was - 1.104691)
    phases = doc["stats"]["compile_time_by_phase_s"]
    assert phases.get("backward") == before["stats"]["compile_time_by_phase_s"].get("backward")


def test_absurd_compile_times_are_bad_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compile times of 1e308 s (their sum: inf) from a damaged log: no clock gives them. Each
    is a bad line, left out; its microsecond twin (valid here) stands in, so every figure is
    the undamaged log's, and nothing says inf."""
    data = (FIXTURES / "demo.log").read_bytes()
    data, n = re.subn(
        rb'"entire_frame_compile_time_s": [0-9.]+', b'"entire_frame_compile_time_s": 1e308', data
    )
    assert n >= 3
    log = tmp_path / "absurd.log"
    log.write_bytes(data)
    doc, want = report_json(log), report_json(FIXTURES / "demo.log")
    reasons = [b["reason"] for b in doc["bad_lines"]]
    assert (
        reasons == ["compilation_metrics: not a duration: entire_frame_compile_time_s 1e+308"] * n
    )
    assert doc["stats"]["compile_time_s"] == pytest.approx(want["stats"]["compile_time_s"])
    assert [c["compile_time_s"] for c in every_attempt(doc)] == pytest.approx(
        [c["compile_time_s"] for c in every_attempt(want)]
    )
    monkeypatch.setenv("COLUMNS", "200")
    res = run("report", str(log))
    assert_clean_exit(res, EXIT_OK, "text")
    assert "inf" not in res.stdout and "e+308" not in res.stdout.split("Bad lines")[0]
    assert max(len(line) for line in res.stdout.splitlines()) <= 200


@pytest.mark.slow
def test_20mb_single_lines(tmp_path: Path) -> None:
    """A 20 MB record line, payload line and garbage line: read or reported, the rest kept."""
    log = FIXTURES / "demo.log"
    data = log.read_bytes()
    us = units(data)
    at = us[len(us) // 2]
    big = 20 << 20
    like = at
    record = unit_bytes({"tlview_test_blob": {"blob": "x" * big}}, None, like)
    payload = unit_bytes(
        {"artifact": {"name": "huge_line", "encoding": "string"}}, b"y" * big, like
    )
    garbage = b"z" * big + b"\n"
    want = Facts.of(_doc(log))
    for name, line in (("record", record), ("payload", payload), ("garbage", garbage)):
        p = tmp_path / name / log.name
        p.parent.mkdir()
        p.write_bytes(data[: at.start] + line + data[at.start :])
        doc = _doc(p)
        assert_facts_kept(want, Facts.of(doc), f"20 MB {name} line")
        lines = [b["line"] for b in doc["bad_lines"]]
        if name == "garbage":
            assert lines == [at.line], lines
        else:
            assert lines == [] and doc["stats"]["records"] == _doc(log)["stats"]["records"] + 1
        assert_clean_exit(run("report", str(p)), EXIT_OK, f"20 MB {name} line, text")


def test_gzip_whole_cut_short_and_with_junk(tmp_path: Path) -> None:
    """A .gz reads as its log; cut short, everything decompressible is reported, the cut said."""
    log = FIXTURES / "demo.log"
    data = log.read_bytes()
    whole = tmp_path / "whole" / "demo.log.gz"
    whole.parent.mkdir()
    gz = gzip_bytes(data)
    whole.write_bytes(gz)
    want = _doc(log)
    got = _doc(whole)
    assert_facts_kept(Facts.of(want), Facts.of(got), ".gz", status=True)
    assert got["stats"]["bad_lines"] == 0
    for frac in (0.1, 0.5, 0.97):
        cut = tmp_path / f"cut{frac}" / "demo.log.gz"
        cut.parent.mkdir()
        cut.write_bytes(gz[: int(len(gz) * frac)])
        readable = gunzip_prefix(gz[: int(len(gz) * frac)])
        whole_units = [u for u in units(readable) if u.data.endswith(b"\n")]
        prefix = tmp_path / f"prefix{frac}" / "demo.log"
        prefix.parent.mkdir()
        prefix.write_bytes(b"".join(u.data for u in whole_units[:-1]))
        doc = _doc(cut)
        assert_facts_kept(Facts.of(_doc(prefix)), Facts.of(doc), f".gz cut at {frac}")
        cut_at = [b["line"] for b in doc["bad_lines"] if "compressed" in b["reason"]]
        assert cut_at == [readable.count(b"\n") + 1], (cut_at, doc["bad_lines"])
    junk = tmp_path / "junk" / "demo.log.gz"
    junk.parent.mkdir()
    junk.write_bytes(gz + b"this is not gzip" * 10)
    assert_facts_kept(Facts.of(want), Facts.of(_doc(junk)), ".gz with junk after it")
    notgz = tmp_path / "fake" / "demo.log.gz"
    notgz.parent.mkdir()
    notgz.write_bytes(b"\x1f\x8b" + b"\x00garbage" * 100)
    assert_clean_exit(run("report", str(notgz)), EXIT_NO_TRACE, "gzip magic, no gzip")


def test_directory_with_decoys(tmp_path: Path) -> None:
    """A directory's logs are read; decoys are skipped with a note, never read as logs."""
    log = FIXTURES / "demo.log"
    d = tmp_path / "trace"
    d.mkdir()
    (d / "demo.log").write_bytes(log.read_bytes())
    (d / "empty.log").write_bytes(b"")
    (d / "binary.log").write_bytes(random.Random(SEED).randbytes(10_000))
    (d / "text.log").write_bytes(b"not a trace\n")
    (d / "notes.txt").write_bytes(log.read_bytes())
    (d / "model.pt").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    (d / "sub.log").mkdir()
    (d / "nested").mkdir()
    (d / "nested" / "other.log").write_bytes(log.read_bytes())
    os.mkfifo(d / "pipe.log")  # opened, a FIFO would block the reader forever
    os.symlink("/nonexistent/target.log", d / "dangling.log")
    os.symlink("loop.log", d / "loop.log")  # a link to itself: the OS says "too many levels"
    doc = _doc(d)
    assert [lg["name"] for lg in doc["logs"]] == ["demo.log"]
    assert_facts_kept(Facts.of(_doc(log)), Facts.of(doc), "directory", status=True)
    notes = " ".join(doc["notes"])
    for name in ("empty.log", "binary.log", "text.log", "notes.txt", "sub.log", "pipe.log"):
        assert name in notes, (name, notes)
    # Named *.log but not a file to read, each said so, with why.
    assert (
        "could not read 3 *.log entr(ies): dangling.log (not a regular file), "
        "loop.log (Too many levels of symbolic links), pipe.log (not a regular file)"
    ) in doc["notes"]
    assert_clean_exit(run("report", str(d)), EXIT_OK, "directory, text")
    res = run("report", str(d / "loop.log"))
    assert_clean_exit(res, EXIT_NO_TRACE, "a link to itself")
    assert "a symbolic link to nothing" in res.stderr


def test_values_nested_deeper_than_json_writers_go(tmp_path: Path) -> None:
    """A field and a trace event nested 500 levels deep (orjson reads 1024 levels and writes
    254): every output is still made, the value cut after 200 levels with a note."""
    data = (FIXTURES / "demo.log").read_bytes()
    deep = b'{"a": ' * 500 + b"1" + b"}" * 500
    us = units(data)
    m = next(u for u in us if "compilation_metrics" in (record_json(u) or {}))
    head = m.head.replace(
        b'{"compilation_metrics": {', b'{"compilation_metrics": {"deep": ' + deep + b", ", 1
    )
    data = replace_unit(data, m, head + m.data[len(m.head) :])
    us = units(data)
    ev = next(u for u in us if "chromium_event" in (record_json(u) or {}))
    payload = b'{"name": "deep", "ph": "i", "ts": 1, "pid": 0, "tid": 0, "args": ' + deep + b"}"
    data = replace_unit(data, ev, unit_bytes(record_json(ev) or {}, payload, ev))
    log = tmp_path / "deep.log"
    log.write_bytes(data)
    cut = "<nested deeper than 200 levels: cut>"
    doc = report_json(log)
    assert doc["stats"]["bad_lines"] == 0
    metrics = [c["metrics"] for c in every_attempt(doc) if "deep" in (c.get("metrics") or {})]
    assert len(metrics) == 1 and cut in orjson.dumps(metrics[0]).decode()
    for fmt in ("html", "perfetto"):
        out = tmp_path / f"out.{fmt}"
        assert_clean_exit(run("report", str(log), "--format", fmt, "-o", str(out)), EXIT_OK, fmt)
        assert cut.strip("<>") in out.read_text()  # the page escapes the brackets
    trace = orjson.loads((tmp_path / "out.perfetto").read_bytes())
    assert [e["name"] for e in trace["traceEvents"]].count("deep") == 1
    assert_clean_exit(run("report", str(log)), EXIT_OK, "text")
    res = run("diff", str(FIXTURES / "demo.log"), str(log), "--format", "json")
    assert_clean_exit(res, EXIT_OK, "diff")
    assert orjson.loads(res.stdout)["format"].startswith("tlview.diff")


@pytest.mark.slow
def test_as_a_process(tmp_path: Path) -> None:
    """The installed command, as its own process: no traceback, documented statuses."""
    log = FIXTURES / "demo.log"
    data = log.read_bytes()
    cut = tmp_path / "cut.log"
    cut.write_bytes(data[: len(data) // 2 + 7])
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "bin.log"
    binary.write_bytes(random.Random(SEED).randbytes(4096))
    for args, status in (
        ((str(cut),), EXIT_OK),
        ((str(cut), "--format", "json"), EXIT_OK),
        ((str(cut), "--strict"), EXIT_STRICT),
        ((str(empty),), EXIT_NO_TRACE),
        ((str(binary),), EXIT_NO_TRACE),
    ):
        p = run_process("report", *args)
        err = p.stderr.decode()
        assert p.returncode == status, (args, p.returncode, err)
        assert "Traceback" not in err and "internal error" not in err, err
        if status == EXIT_NO_TRACE:
            assert len(err.strip().splitlines()) == 1 and err.startswith("tlview: "), err
    doc = orjson.loads(run_process("report", str(cut), "--format", "json").stdout)
    assert doc["stats"]["bad_lines"] >= 1


def test_corpus_corrupted_json_log_counts_one_bad_line() -> None:
    """The corpus's own damaged log: its one bad line is found and the rest reported."""
    doc = report_json(next(CORPUS.rglob("simple_corrupted_json.log")))
    assert doc["stats"]["bad_lines"] == 1
    assert doc["stats"]["records"] == 76


# -- a field of the wrong type, for each field tlview reads -------------------------------------
INT = ["7", 2.5, True, [7], {"n": 7}, None]
INT_OPT = INT[:-1]  # null is what torch writes when there is no value
NUM_OPT = ["1.5", True, [1.5], {"s": 1}]
STR = [7, True, ["x"], {"x": "y"}, None]
STR_OPT = STR[:-1]
LIST = ["x", 7, {"0": "x"}]
DICT = ["x", 7, ["x"]]
DIMS = ["[2, 3]", [2.5], [True], [[2]], {"0": 2}, [None], 7, None]
BOOL = ["false", 1, [True], {"b": True}]
FRAME = ["frame", 7, None, [1, 2]]
PAIR = [{"a": 1}, ["x"], "x", 7]
INT_OR_STR = [2.5, True, [7], {"n": 7}]

METRICS = {
    **dict.fromkeys(
        ["fail_type", "fail_reason", "fail_user_frame_filename", "co_name", "co_filename"],
        STR_OPT,
    ),
    "recompile_reason": STR_OPT,
    "compile_id": STR_OPT,
    **dict.fromkeys(
        [
            "fail_user_frame_lineno",
            "co_firstlineno",
            "graph_op_count",
            "guard_count",
            "graph_node_count",
            "graph_input_count",
            "shape_env_guard_count",
        ],
        INT_OPT,
    ),
    **dict.fromkeys(
        [
            "entire_frame_compile_time_s",
            "backend_compile_time_s",
            "inductor_compile_time_s",
            "code_gen_time_s",
        ],
        NUM_OPT,
    ),
    "restart_reasons": LIST + [[7]],
    "cache_size": INT_OPT,
    "non_compliant_ops": LIST + [[7]],
}
TENSOR = {
    "id": INT,
    "describer_id": INT,
    "ndim": INT,
    "dtype": STR,
    "device": STR,
    "layout": STR,
    "size": DIMS,
    "stride": DIMS,
    "storage_offset": INT_OR_STR,
    "storage": INT_OPT,
    "base": INT_OPT,
    "grad": INT_OPT,
    "attrs": DICT + [{"a": "1"}],
    "type": STR_OPT,
    "requires_grad": BOOL,
    "is_leaf": BOOL,
    "is_parameter": BOOL,
    "is_view": BOOL,
}
# (record kind or "artifact:NAME", where the field is, its path, wrong values)
SPECS: list[tuple[str, str, tuple[Any, ...], list[Any]]] = [
    *[("describe_tensor", "meta", (k,), INT_OPT) for k in ("frame_id", "frame_compile_id")],
    *[("describe_tensor", "meta", (k,), INT_OPT) for k in ("attempt", "compiled_autograd_id")],
    ("dynamo_start", "meta", ("rank",), INT_OPT),
    ("chromium_event", "meta", ("has_payload",), [7, ["x"], {"md5": "x"}]),
    ("str", "body", (), PAIR),
    ("str", "body", (0,), STR),
    ("str", "body", (1,), INT),
    ("dynamo_start", "body", ("stack",), LIST),
    ("dynamo_start", "body", ("stack", 0), FRAME),
    ("dynamo_start", "body", ("stack", 0, "filename"), [2.5, True, [1], {"f": 1}]),
    ("dynamo_start", "body", ("stack", 0, "line"), INT),
    ("dynamo_start", "body", ("stack", 0, "name"), STR),
    ("dynamo_start", "body", ("stack", 0, "loc"), STR_OPT),
    *[("compilation_metrics", "body", (k,), v) for k, v in METRICS.items()],
    ("artifact", "body", ("name",), STR),
    ("artifact", "body", ("encoding",), STR_OPT),
    ("describe_storage", "body", ("id",), INT),
    ("describe_storage", "body", ("describer_id",), INT),
    ("describe_storage", "body", ("size",), INT_OR_STR),
    *[("describe_tensor", "body", (k,), v) for k, v in TENSOR.items()],
    ("describe_tensor", "body", ("size", 0), [2.5, True, None, [2]]),
    ("describe_source", "body", ("id",), INT),
    ("describe_source", "body", ("describer_id",), INT),
    ("describe_source", "body", ("source",), STR),
    ("create_symbol", "body", ("symbol",), STR),
    ("create_symbol", "body", ("source",), STR_OPT),
    ("create_symbol", "body", ("user_stack",), LIST),
    ("chromium_event", "payload", ("name",), STR),
    ("chromium_event", "payload", ("ph",), STR),
    ("chromium_event", "payload", ("ts",), NUM_OPT + [None]),
    ("chromium_event", "payload", ("args",), DICT),
    ("artifact:torch_version", "payload", ("pytorch_version",), STR),
    ("bwd_compilation_metrics", "body", (), ["x", 7, ["x"]]),
    ("bwd_compilation_metrics", "body", ("inductor_compile_time_s",), NUM_OPT),
    ("artifact:recompile_reasons", "payload", (0,), [7, {"r": "x"}, ["x"]]),
    ("artifact:make_fx_fail_partial", "meta", ("stack",), LIST),
    ("artifact:make_fx_fail_partial", "meta", ("stack", 0), FRAME),
    ("propagate_real_tensors_provenance", "body", ("expr",), STR_OPT),
    ("missing_fake_kernel", "body", ("op",), STR_OPT),
    ("mismatched_fake_kernel", "body", ("reason",), STR_OPT),
    ("guard_added", "body", ("symbol_to_sources",), ["x", 7, ["x"]]),
    ("missing_fake_kernel", "body", (), ["x", 7, ["x"]]),
]
WRONG_PER_FIELD = 2  # values tried per field, rotating through its list


def _record_pool() -> list[Path]:
    """Real logs to take one record of each kind from: the demo first, then small corpus logs."""
    pool = [FIXTURES / "demo.log", FIXTURES / "draft_export.log"]
    pool += sorted(CORPUS.rglob("*.log"), key=lambda p: p.stat().st_size)
    return pool


def _find(kind: str, where: str, path: tuple[Any, ...]) -> tuple[Path, bytes, Any] | None:
    """The first record of a kind (with the parent of `path` present) in the pool of logs."""
    name = None
    if kind.startswith("artifact:"):
        kind, name = "artifact", kind.split(":", 1)[1]
    for log in _record_pool():
        data = log.read_bytes()
        for u in units(data):
            meta = record_json(u, lenient=False)
            if meta is None or next(iter(meta)) != kind:
                continue
            if name is not None and (meta[kind] or {}).get("name") != name:
                continue
            root = meta if where == "meta" else meta[kind]
            if where == "payload":
                try:
                    root = orjson.loads(payload_of(u) or b"")
                except orjson.JSONDecodeError:
                    continue
            if _has_parent(root, path):
                return log, data, u
    return None


def _has_parent(root: Any, path: tuple[Any, ...]) -> bool:
    for p in path[:-1]:
        if isinstance(p, int):
            if not isinstance(root, list) or len(root) <= p:
                return False
        elif not isinstance(root, dict) or p not in root:
            return False
        root = root[p]
    return not path or isinstance(root, dict) or (isinstance(root, list) and len(root) > path[-1])


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    for p in path[:-1]:
        root = root[p]
    root[path[-1]] = value
    return None


def _wrong_cases() -> Iterator[tuple[str, str, tuple[Any, ...], Any]]:
    for n, (kind, where, path, values) in enumerate(SPECS):
        for k in range(WRONG_PER_FIELD):
            yield kind, where, path, values[(n + k) % len(values)]


def _label(case: tuple[str, str, tuple[Any, ...], Any]) -> str:
    kind, where, path, value = case
    return f"{kind}.{where}.{'.'.join(map(str, path))}={orjson.dumps(value).decode()}"


@pytest.mark.parametrize("case", list(_wrong_cases()), ids=_label)
def test_field_of_wrong_type(case: tuple[str, str, tuple[Any, ...], Any], tmp_path: Path) -> None:
    """A field tlview reads, of the wrong type: the record's line is reported naming the field,
    the field is not used as if it were right, and every other record is reported as before."""
    kind, where, path, value = case
    found = _find(kind, where, path)
    if found is None:
        pytest.fail(
            f"no {kind} record with {path[:-1]} in the logs at hand: a case that tests nothing"
        )
    log, data, u = found
    meta = record_json(u, lenient=False)
    assert meta is not None
    k = next(iter(meta))
    payload = payload_of(u)
    if where == "payload":
        doc = orjson.loads(payload or b"")
        _set(doc, path, value)
        payload = orjson.dumps(doc)
    elif where == "meta":
        if path == ("has_payload",):
            new = u.head[: u.head.find(b"] {") + 2] + orjson.dumps(dict(meta, has_payload=value))
            new += b"\n" + u.data[len(u.head) + 1 :]
            payload = None
        else:
            _set(meta, path, value)
    else:
        body = _set(meta[k], path, value) if path else value
        if not path:
            meta[k] = body
    if not (where == "meta" and path == ("has_payload",)):
        new = unit_bytes(meta, payload, u)
        if payload is None and meta.get("has_payload") is None:
            new = unit_bytes({x: y for x, y in meta.items()}, None, u)
    damaged = data[: u.start] + new + data[u.end :]
    what = f"{log.name}:{u.line} {_label(case)}"
    out = check_damaged(data, damaged, tmp_path, log.name, what, require_flag=True)
    word = next((p for p in reversed(path) if isinstance(p, str)), k)
    hits = [
        b
        for b in out.doc["bad_lines"]
        if u.line <= b["line"] <= u.line + new.count(b"\n") and word in b["reason"]
    ]
    assert hits, f"{what}: no bad line at line {u.line} naming {word!r}: {out.doc['bad_lines']}"


# -- damaged copies read in two parts (large logs are split between two processes) --------------
@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("damage", ["truncations", "flips", "line_edits", "byte_junk"])
def test_damaged_copies_read_in_two_parts_as_in_one(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log big enough to be read by two processes gives the report one reader gives, damaged
    or not: the same compiles, inputs, records and bad lines (the split is at the middle)."""
    from tlview.index import parts as split

    log = FIXTURES / "demo.log"
    cases = list(_cases(log, damage))[:6]
    read_parts = split.read_parts
    calls: list[Path] = []
    monkeypatch.setattr(split, "read_parts", lambda p, *a: calls.append(p) or read_parts(p, *a))
    for k, (what, damaged) in enumerate(cases):
        p = tmp_path / str(k) / log.name
        p.parent.mkdir()
        p.write_bytes(damaged)
        expected = EXIT_OK if any(readable(u) for u in units(damaged)) else EXIT_NO_TRACE
        monkeypatch.setattr(split, "PARALLEL_MIN", 1 << 62)
        one = report_json(p, expected=expected, what=f"{what}, one reader")
        monkeypatch.setattr(split, "PARALLEL_MIN", 1)
        two = report_json(p, expected=expected, what=f"{what}, two readers")
        if one is None:
            continue
        assert_facts_kept(Facts.of(one), Facts.of(two), f"{what}, two readers", status=True)
        assert_facts_kept(Facts.of(two), Facts.of(one), f"{what}, one reader", status=True)
        assert two["stats"]["records"] == one["stats"]["records"], what
        assert two["bad_lines"] == one["bad_lines"], what
    assert len(calls) == len(cases)  # each copy was read in two parts


# -- a log no one has seen: written by torch now, damaged the same ways --------------------------
FRESH = r"""
import torch

torch.manual_seed(0)


@torch.compile(backend="eager")
def f(a, b, k):
    c = a * b + k
    torch._dynamo.graph_break()
    return c.relu().sum(dim=0)


base = torch.randn(10, 8)
for n in (3, 5, 7):
    f(base[:n], base[1 : n + 1], n)
"""


@pytest.fixture(scope="module")
def fresh_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log torch writes during the test run: not in the corpus, not in the fixtures."""
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("fresh")
    (tmp / "prog.py").write_text(FRESH)
    env = dict(os.environ, TORCH_TRACE=str(tmp / "trace"))
    done = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (tmp / "trace").glob("*.log")
    return log


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.slow
def test_a_log_the_suite_never_saw(fresh_log: Path, damage: str, tmp_path: Path) -> None:
    """The same checks on damaged copies of a log torch wrote a moment ago."""
    original = fresh_log.read_bytes()
    doc = report_json(fresh_log)
    assert doc["stats"]["bad_lines"] == 0 and len(every_attempt(doc)) >= 3
    rng = random.Random(f"{SEED}:fresh:{damage}")
    failures = []
    for what, damaged in list(DAMAGES[damage](original, rng))[:8]:
        try:
            check_damaged(original, damaged, tmp_path, fresh_log.name, f"fresh: {what}")
        except AssertionError as e:
            failures.append(str(e).splitlines()[0][:600])
    assert not failures, "\n".join(failures)


def _every_real_log() -> list[Path]:
    logs = sorted(FIXTURES.glob("*.log"))
    logs += sorted(CORPUS.rglob("*.log"))
    return logs


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("log", _every_real_log(), ids=lambda p: p.parent.name + "/" + p.name)
def test_real_logs_accuse_no_good_line(log: Path) -> None:
    """On logs as torch wrote them, a line is reported bad exactly when its record is not one
    torch could have written (the format check here, not tlview's): no false alarms."""
    doc = report_json(log, "--jobs", "1")
    us = units(log.read_bytes())
    bad_units = [u for u in us if not valid(u)]
    flagged = {b["line"] for b in doc["bad_lines"]}
    for line in flagged:
        assert any(line in u.spans() for u in bad_units), f"{log.name}:{line} accused"
    unchecked = unchecked_lines(doc)  # payloads the JSON only measured (md5_ok null)
    for u in bad_units:
        if u.line not in unchecked:
            assert flagged & set(u.spans()), f"{log.name}:{u.line} not reported"


def test_quick_tensor_check_agrees_with_the_full_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # `check_tensor` first tries a one-pass check; every field of real records, set to each
    # wrong type, must get the message the full check gives.
    from helpers import only_log

    from tlview.index import inputs
    from tlview.parse import Reader

    bodies = [
        r.body
        for log in ("views_aliasing", "dtypes_zoo", "dynamic_shapes")
        for r in Reader(only_log(log))
        if r.kind == "describe_tensor"
    ]
    assert len(bodies) > 50
    wrong: list[Any] = [True, "s", 1.5, None, 3, [1, True], [1.5], {"a": True}, {"a": 1}, []]
    cases = [dict(b) for b in bodies]
    for b in bodies[:40]:
        for name in {*b, "storage_offset", "ndim", "base", "attrs", "requires_grad"}:
            cases.extend({**b, name: v} for v in wrong)
    quick = [inputs.check_tensor(b) for b in cases]
    monkeypatch.setattr(inputs, "_well_formed", lambda b: False)
    full = [inputs.check_tensor(b) for b in cases]
    assert quick == full
    assert sum(q is not None for q in quick) > 1000


def test_nan_and_infinity_as_json_dumps_writes_them(tmp_path: Path) -> None:
    """torch writes records with json.dumps: a float metric that is NaN or infinite comes out
    as NaN or Infinity, which orjson refuses. The record is read (its failure kept); an
    infinite compile time is a bad line, and its microsecond twin stands in."""
    data = (CORPUS / "compile_error" / "dedicated_log_torch_trace_4oku3kw2.log").read_bytes()
    us = units(data)
    first = next(u for u in us if b'{"compilation_metrics"' in u.head)
    head = re.sub(
        rb'"remote_cache_time_saved_s": [^,]+', b'"remote_cache_time_saved_s": NaN', first.head
    )
    head = re.sub(
        rb'"entire_frame_compile_time_s": [0-9.]+', b'"entire_frame_compile_time_s": Infinity', head
    )
    assert head != first.head and b"NaN" in head and b"Infinity" in head
    log = tmp_path / "nan.log"
    log.write_bytes(replace_unit(data, first, head + b"\n"))
    doc = report_json(log)
    (c,) = [c for c in every_attempt(doc) if c["key"] == "0/0"]
    assert c["status"] == "failed" and c["fail_type"] == "BackendCompilerFailed"
    assert c["metrics"]["remote_cache_time_saved_s"] is None  # NaN: JSON has no such number
    assert c["compile_time_s"] == pytest.approx(
        c["metrics"]["dynamo_cumulative_compile_time_us"] / 1e6
    )
    assert [(b["line"], b["reason"]) for b in doc["bad_lines"]] == [
        (first.line, "compilation_metrics: not a duration: entire_frame_compile_time_s inf")
    ]


def test_a_refused_recompile_is_no_retry(tmp_path: Path) -> None:
    """refused.log's 0/1 with cache_size 0 (damage): its RecompileError still names the guard
    that failed, so it is a recompile, not a retry of a compile that left nothing cached."""
    data = (FIXTURES / "refused.log").read_bytes()
    us = units(data)
    (u,) = [u for u in us if b'"compilation_metrics"' in u.head and b'"RecompileError"' in u.head]
    meta = record_json(u, lenient=False)
    assert meta is not None and meta["compilation_metrics"]["cache_size"] != 0
    meta["compilation_metrics"]["cache_size"] = 0
    log = tmp_path / "refused0.log"
    log.write_bytes(replace_unit(data, u, unit_bytes(meta, None, u)))
    doc = report_json(log)
    (c,) = [c for c in every_attempt(doc) if c["key"] == "0/1"]
    assert c["recompile"]["retry"] is False and doc["stats"]["recompiles"] == 1


def test_a_frame_id_alone_is_a_bad_line(tmp_path: Path) -> None:
    """torch writes frame_id and frame_compile_id together: one alone is a bad line (the
    record is read as outside any compile)."""
    data = (FIXTURES / "demo.log").read_bytes()
    u = next(u for u in units(data) if b'"frame_compile_id": 0' in u.head and u.lines == 1)
    head = re.sub(rb', "frame_compile_id": 0', b"", u.head)
    log = tmp_path / "alone.log"
    log.write_bytes(replace_unit(data, u, head + b"\n"))
    doc = report_json(log)
    assert [(b["line"], b["reason"].split(": ", 1)[1]) for b in doc["bad_lines"]] == [
        (u.line, "frame_id and frame_compile_id come together: one is missing")
    ]


def test_an_empty_fail_type_is_still_a_failure(tmp_path: Path) -> None:
    """A failure whose exception type was logged as "" (damage; torch writes null for none):
    the compile failed all the same, with its reason."""
    data = (CORPUS / "compile_error" / "dedicated_log_torch_trace_4oku3kw2.log").read_bytes()
    us = units(data)
    first = next(u for u in us if b'{"compilation_metrics"' in u.head)
    meta = record_json(first, lenient=False)
    assert meta is not None and meta["compilation_metrics"]["fail_type"] == "BackendCompilerFailed"
    meta["compilation_metrics"]["fail_type"] = ""
    log = tmp_path / "empty_type.log"
    log.write_bytes(replace_unit(data, first, unit_bytes(meta, None, first)))
    doc = report_json(log)
    (c,) = [c for c in every_attempt(doc) if c["key"] == "0/0"]
    assert c["status"] == "failed" and c["fail_type"] == "(exception type not logged)"
    assert c["fail_reason"] == meta["compilation_metrics"]["fail_reason"]
    assert doc["stats"]["failures"] == 4 and doc["bad_lines"] == []


def test_a_failed_compile_outside_dynamo_says_so(tmp_path: Path) -> None:
    """AOTInductor's compile failing (its metrics given a failure, as a compiler error would):
    the headline says one failed, and `-/-` gives its type and reason."""
    data = (FIXTURES / "aoti.log").read_bytes()
    us = units(data)
    (u,) = [u for u in us if b'{"compilation_metrics": {"compile_id": null' in u.head]
    meta = record_json(u, lenient=False)
    assert meta is not None and meta["compilation_metrics"]["fail_type"] is None
    meta["compilation_metrics"]["fail_type"] = "CppCompileError"
    meta["compilation_metrics"]["fail_reason"] = "C++ compile error\nwrapper.cpp:12: error"
    log = tmp_path / "aoti_failed.log"
    log.write_bytes(replace_unit(data, u, unit_bytes(meta, None, u)))
    doc = report_json(log)
    (c,) = [c for c in every_attempt(doc) if c["key"] == "-/-"]
    (o,) = c["outside_compiles"]
    assert (o["log_line"], o["fail_type"]) == (u.line, "CppCompileError")
    assert o["fail_reason"] == "C++ compile error\nwrapper.cpp:12: error"
    res = run("report", str(log))
    assert_clean_exit(res, 0, "report")
    assert "1 compiled outside dynamo (" in res.stdout and ", 1 failed)" in res.stdout
    assert "    failed: CppCompileError: C++ compile error" in res.stdout


def test_a_line_with_two_wrong_fields_is_one_bad_line(tmp_path: Path) -> None:
    """draft_export.log's missing_fake_kernel record with a wrong user_stack and a wrong op:
    one bad line, which names both."""
    data = (FIXTURES / "draft_export.log").read_bytes()
    us = units(data)
    u = next(u for u in us if b'{"missing_fake_kernel"' in u.head)
    meta = record_json(u, lenient=False)
    assert meta is not None
    meta["missing_fake_kernel"]["op"] = 7
    meta["missing_fake_kernel"]["user_stack"] = "x"
    log = tmp_path / "two_wrong.log"
    log.write_bytes(replace_unit(data, u, unit_bytes(meta, payload_of(u), u)))
    doc = report_json(log)
    assert doc["stats"]["bad_lines"] == 1
    ((line, reason),) = [(b["line"], b["reason"]) for b in doc["bad_lines"]]
    assert line == u.line and reason.startswith("missing_fake_kernel: ")
    assert "user_stack" in reason and "op is not" in reason


def test_a_compile_whose_first_payload_is_cut_is_kept(tmp_path: Path) -> None:
    data = (FIXTURES / "demo.log").read_bytes()
    u = units(data)[0]  # the chromium_event that opens compile 0/0
    cut = write_log(tmp_path, "cut.log", data[: u.start + len(u.head) + 1 + 20])
    doc = doc_of(cut)
    assert [c["key"] for c in every_attempt(doc)] == ["0/0"]
    assert every_attempt(doc)[0]["status"] == "incomplete"
    assert [b["line"] for b in doc["bad_lines"]] == [2]


def test_a_gzip_cut_after_1000_bytes_is_read(tmp_path: Path) -> None:
    z = gzip.compress((FIXTURES / "demo.log").read_bytes(), mtime=0)
    log = write_log(tmp_path, "cut.log.gz", z[:1000])
    doc = doc_of(log)
    assert [c["key"] for c in every_attempt(doc)] == ["-/-", "0/0"]  # -/-: the torch version
    assert any("compressed data is damaged" in b["reason"] for b in doc["bad_lines"])
