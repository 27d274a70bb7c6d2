"""Stored reports: a `tlview.report/1` file given as `tlview diff BASE` is input as a log is (CI
downloads it from an artifact). It is read through one checking reader (analyze/stored.py):
every field tlview reads is of the type tlview writes there, else one line naming the field
(exit 1), never an internal error; a string of its table is read only where tlview refers to
one (a file), cut as an interned file name is, so no BASE makes an output many times its size.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crafted import interned, record, start
from damage import EXIT_NO_TRACE, EXIT_OK, assert_clean_exit, run
from helpers import FIXTURES

import tlview
from tlview.analyze.baseline import read_report
from tlview.analyze.diff import compare
from tlview.errors import TlviewError
from tlview.render import DIFF_FORMATS, Options
from tlview.render.json.report import stream
from tlview.runtime.output import Output

BIG = "/" + "a" * (1 << 20) + "/model.py"  # a 1 MiB file name
REF = {"$s": "0"}
FORMATS = ("json", "text", "markdown", "html")


def stored(log: Path, tmp: Path, name: str = "base.json") -> Path:
    """LOG's report as `tlview report --format json` writes it: a baseline."""
    buf = io.BytesIO()
    stream(tlview.read(log), buf)
    out = tmp / name
    out.write_bytes(buf.getvalue())
    return out


def multiplying(tmp: Path, compiles: int, everywhere: bool) -> Path:
    """The issue's baseline: one 1 MiB string in the table, referred to ten times by each
    compile (EVERYWHERE: in its function, reasons and places too; else in its files only)."""
    other = REF if everywhere else "x"
    doc = {
        "format": "tlview.report/1",
        "compiles": [
            {
                "compile_id": f"{k}/0",
                "key": f"{k}/0",
                "frame_id": k,
                "frame_compile_id": 0,
                "log": "base.log",
                "status": "failed",
                "function": other,
                "file": REF,
                "line": 3,
                "fail_type": "E",
                "fail_reason": other,
                "fail_where": other,
                "restart_reasons": [other],
                "recompile_reasons": [other],
                "graph_breaks": [{"reason": other, "where": other, "log_line": 1}],
                "stack": [{"file": REF, "line": i, "name": "f"} for i in range(4)],
                "metrics": {"entire_frame_compile_time_s": 1.0},
            }  # fmt: skip
            for k in range(compiles)
        ],
        "logs": [{"name": "base.log", "path": "base.log"}],
        "stats": {"compiles": compiles},
        "strings": {"0": BIG},
    }
    out = tmp / "multiplying.json"
    out.write_text(json.dumps(doc))
    return out


def test_a_reference_where_tlview_writes_none_is_refused(tmp_path: Path) -> None:
    """References in a compile's function, reasons and places (tlview writes them only for a
    file): one line naming the first such field, exit 1, in every format (before: 14 MB of
    JSON and 13 MB of text from a 1 MB file; the issue's, 238 MB)."""
    base = multiplying(tmp_path, 25, everywhere=True)
    for fmt in FORMATS:
        res = run("diff", str(base), str(FIXTURES / "demo.log"), "--format", fmt)
        assert_clean_exit(res, EXIT_NO_TRACE, fmt)
        assert (
            "a damaged tlview.report/1 file: compiles[0].function is an object, not a string"
            in (res.stderr)
        )


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_long_file_in_the_table_is_cut_as_an_interned_name(tmp_path: Path, fmt: str) -> None:
    """The 1 MiB file name referred to by every frame of 100 compiles (a 1.1 MB file): cut to
    its start and end around its length, and the diff's output stays under its BASE's size."""
    base = multiplying(tmp_path, 100, everywhere=False)
    rep = read_report(base)
    files = {f.file for c in rep.attempts for f in c.stack} | {c.file for c in rep.attempts}
    assert len(files) == 1
    (kept,) = files
    assert kept is not None and "...[1,048,586 characters]..." in kept and len(kept) < 520
    res = run("diff", str(base), str(FIXTURES / "demo.log"), "--format", fmt)
    assert_clean_exit(res, EXIT_OK, fmt)
    assert len(res.stdout_bytes) < base.stat().st_size // 10, len(res.stdout_bytes)


def test_the_table_and_its_references_are_checked(tmp_path: Path) -> None:
    """A list as the table, a reference to no entry, a non-string key or entry: one line."""
    base = json.loads(multiplying(tmp_path, 2, everywhere=False).read_text())
    lacks = "refers to string '0', which its strings table lacks"
    cases: list[tuple[str, dict[str, Any]]] = [
        ("the strings table, which is a list", {"strings": [BIG]}),
        (lacks, {"strings": {"7": BIG}}),
        (lacks, {"strings": {"0": 7}}),
        ("the strings table, which is null", {"strings": None}),
    ]
    for words, change in cases:
        p = tmp_path / "t.json"
        p.write_text(json.dumps({**base, **change}))
        with pytest.raises(TlviewError, match=words) as e:
            read_report(p)
        assert e.value.exit_code == EXIT_NO_TRACE and "compiles[0].stack[0].file" in e.value.message


# -- fuzz: every field tlview reads, of every other type ------------------------------------------
WRONG: list[Any] = [[1], {"a": 1}, 7, -1, 1.5, "x", True, REF, (1 << 63) - 1, 1 << 63, [None]]


def paths(v: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a document: each key of each object, each item of each list (only the
    first two of a list: the rest are alike)."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield (*at, k)
            yield from paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v[:2]):
            yield (*at, i)
            yield from paths(x, (*at, i))


def put(doc: Any, at: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for k in at[:-1]:
        node = node[k]
    node[at[-1]] = value
    return out


def fuzzed(base: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """BASE with one field swapped for a value of each other type, field by field."""
    for at in paths(base):
        if at[0] in ("format", "strings") or "inputs" in at[3:] and at[-1] != "inputs":
            continue  # the format decides what the file is; inputs: below
        if "attempts" in at and len(at) > at.index("attempts") + 3:
            continue  # an attempt is read as a compile is: its own fields, not theirs again
        for value in WRONG:
            yield f"{'.'.join(map(str, at))}={value!r}", put(base, at, value)


def diffed(base: Path, new: Any) -> None:
    """`tlview diff BASE NEW` in process, every format, into nothing."""
    d = compare(read_report(base), new)
    for fmt in FORMATS:
        DIFF_FORMATS[fmt].renderer()(d, Output("/dev/null", True), Options())


@pytest.mark.slow  # 25,000 documents, each read and diffed in four formats: 290 s alone
@pytest.mark.timeout(1500)  # the one test past the suite's 600 s (docs/testing.md)
def test_fields_of_every_type_give_a_diff_or_one_line(tmp_path: Path) -> None:
    """Real stored reports (breaks, restarts, recompiles, inputs; a failure and guards), every
    field tlview reads swapped for each other type and for numbers at and past 64 bits: the
    diff is made in every format, or the file is refused with one line naming a field."""
    new = tlview.read(FIXTURES / "demo.log")
    refused = 0
    for log in ("demo.log", "recomp.log"):
        base = json.loads(stored(FIXTURES / log, tmp_path).read_text())
        for what, doc in fuzzed(base):
            p = tmp_path / "f.json"
            p.write_text(json.dumps(doc))
            try:
                diffed(p, new)
            except TlviewError as e:
                assert e.exit_code == EXIT_NO_TRACE and e.message.startswith(str(p)), what
                assert "\n" not in e.message, what
                refused += 1
    assert refused > 500, refused  # most swaps are refused; the rest are read as tlview reads


def test_a_sum_past_64_bits_is_written(tmp_path: Path) -> None:
    """Three compiles of 2**63 - 1 graph ops (in a log, or a stored BASE): the diff's totals
    pass 64 bits and are written as numbers (before: exit 70, `Integer exceeds 64-bit range`)."""
    parts = [interned("/m.py")]
    for k in range(3):
        body = {"compile_id": f"{k}/0", "co_name": "f", "co_filename": "/m.py",
                "co_firstlineno": 1, "graph_op_count": (1 << 63) - 1}  # fmt: skip
        parts += [start((k, 0)), record("compilation_metrics", body, (k, 0))]
    log = tmp_path / "ops.log"
    log.write_bytes(b"".join(parts))
    base = stored(log, tmp_path)
    for b in (log, base):
        res = run("diff", str(b), str(log), "--format", "json")
        assert_clean_exit(res, EXIT_OK, str(b))
        ops = next(f for f in json.loads(res.stdout)["figures"] if f["name"] == "graph ops")
        assert ops["base"] == ops["new"] == pytest.approx(3 * ((1 << 63) - 1))


def test_expanding_a_hostile_document_copies_no_string() -> None:
    """`tlview.expand_report` (the API) on 100,000 references to a 1 MiB string: each is the
    table's one string, so memory grows by the references, not 100 GiB; 200,000 levels of
    nesting expand with an explicit stack, not Python's."""
    import tracemalloc

    doc: dict[str, Any] = {"format": "tlview.report/1", "x": [REF] * 100_000, "strings": {"0": BIG}}
    tracemalloc.start()
    try:
        got = tlview.expand_report(doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all(s is BIG for s in got["x"]) and peak < 8 << 20, peak
    deep: Any = REF
    for _ in range(200_000):
        deep = [deep]
    got = tlview.expand_report({"format": "tlview.report/1", "x": deep, "strings": {"0": "s"}})
    node = got["x"]
    while isinstance(node, list):
        node = node[0]
    assert node == "s"


# The issue's crafted baselines, each of which ended in exit 70: (where, value, what is said).
CRAFTED: list[tuple[tuple[Any, ...], Any, str]] = [
    (("stats",), [1], "stats is a list, not an object"),
    (("compiles", 1, "status"), ["ok"], "compiles[1].status is a list, not a string"),
    (("compiles", 1, "function"), 7, "compiles[1].function is an integer, not a string"),
    (
        ("compiles", 1, "fail_reason"),
        {"a": 1},
        "compiles[1].fail_reason is an object, not a string",
    ),
    (("compiles", 1, "graph_breaks", 0, "reason"), {"a": 1}, "graph_breaks[0].reason is an object"),
    (("compiles", 1, "graph_breaks", 0, "where"), 7, "graph_breaks[0].where is an integer"),
    (("logs", 0), "x", "logs[0] is a string, not an object"),
    (("stats", "kinds"), {"str": "many"}, "stats.kinds.str is a string, not an integer"),
    (("compiles", 1, "status"), "pwned", "compiles[1].status is 'pwned', no status tlview writes"),
]


@pytest.mark.parametrize(("at", "value", "said"), CRAFTED, ids=lambda v: str(v)[:30])
def test_each_crafted_baseline_of_the_issue_is_one_line(
    tmp_path: Path, at: tuple[Any, ...], value: Any, said: str
) -> None:
    base = json.loads(stored(FIXTURES / "demo.log", tmp_path).read_text())
    p = tmp_path / "crafted.json"
    p.write_text(json.dumps(put(base, at, value)))
    res = run("diff", str(p), str(FIXTURES / "demo.log"))
    assert_clean_exit(res, EXIT_NO_TRACE, said)
    assert said in res.stderr, res.stderr


def test_outside_compile_seconds_as_a_string_is_one_line(tmp_path: Path) -> None:
    base = json.loads(stored(FIXTURES / "demo.log", tmp_path).read_text())
    base["compiles"][0]["outside_compiles"] = [{"log_line": 1, "seconds": "5"}]
    p = tmp_path / "crafted.json"
    p.write_text(json.dumps(base))
    res = run("diff", str(p), str(FIXTURES / "demo.log"))
    assert_clean_exit(res, EXIT_NO_TRACE, "seconds")
    assert "compiles[0].outside_compiles[0].seconds is a string, not a number" in res.stderr
