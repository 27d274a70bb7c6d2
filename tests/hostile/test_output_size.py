"""Output size: every format's output is at most about twice the log. A long file name a log
interns once and names in every frame is written once and referred to (a strings table, put
back by `expand_report`), and shown cut with its length (docs/trust.md#what-is-bounded)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import (
    interned,
    metrics,
    record,
    write_log,
)
from damage import assert_clean_exit, doc_of, run
from helpers import run_cli

import tlview
import tlview.render.json.report as json_mod
import tlview.strings as strings
from tlview import read as load
from tlview.analyze.baseline import every_attempt
from tlview.errors import TlviewError
from tlview.runtime import halves
from tlview.write import forking

NAME = "/" + "d" * 65_535 + "/model.py"  # kept as 512 characters: its start and end
SLACK = 64 << 10  # the constant of the bound: headers, tables, the first copy of a name
# The page's: it shows at most 1000 compiles, 500 of them in detail with 40 frames of a stack.
PAGE_SLACK = 8 << 20
# What every compile costs whatever its log holds: the JSON's keys (null, [], {}), -v's header
# and rule; a log of nothing but one-record compiles (about 130 bytes each) is the worst case.
COMPILE_COST = {"json": 800, "text -v": 640}
FORMATS: list[tuple[str, str, tuple[str, ...]]] = [
    ("json", "r.json", ()),
    ("text", "r.txt", ()),
    ("text -v", "v.txt", ("-v",)),
    ("text -q", "q.txt", ("-q",)),
    ("html", "r.html", ()),
    ("perfetto", "r.trace.json", ("--format", "perfetto")),
]


def crafted(tmp: Path, size: int, depth: int, timed: bool = True) -> Path:
    """About SIZE bytes: NAME interned once, then compiles whose stacks of DEPTH frames all name
    it (a line each), with a chromium event (Perfetto's input) and, when TIMED, a metrics record
    (whose file is short: without one a compile's file is its stack's, the long name)."""
    stack = [{"line": i, "name": "f", "filename": 0} for i in range(depth)]
    parts = [interned(NAME)]
    total, k = len(parts[0]), 0
    while total < size:
        if not timed:  # each compile a frame of its own (a line of its own), as `diff` pairs them
            stack = [{"line": k, "name": "f", "filename": 0}]
        event = {"name": "dynamo", "ph": "B", "ts": k, "pid": 0, "tid": 0, "args": {}}
        part = (
            record("dynamo_start", {"stack": stack}, (k, 0))
            + (metrics((k, 0)) if timed else b"")
            + record("chromium_event", {}, (k, 0), payload=orjson.dumps(event))
        )
        parts.append(part)
        total += len(part)
        k += 1
    log = tmp / f"names{depth}.log"
    log.write_bytes(b"".join(parts))
    return log


def written(tmp: Path, log: Path) -> dict[str, Path]:
    """Each format of `tlview report LOG`, written to a file in process."""
    out = {}
    for label, name, extra in FORMATS:
        path = tmp / name
        res = run_cli("report", log, "-o", path, *extra)
        assert res.exit_code == 0, (label, res.output)
        out[label] = path
    return out


def plain_doc(log: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The JSON report as written with no strings table (every string where it occurs)."""
    with monkeypatch.context() as m:
        m.setattr(strings, "MIN_CHARS", 1 << 62)
        res = run_cli("report", log, "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def check(tmp: Path, log: Path, depth: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Each format's bound and content on LOG; the size of each."""
    size = log.stat().st_size
    out = written(tmp, log)
    doc = json.loads(out["json"].read_text())
    compiles = len(every_attempt(doc))
    for label, path in out.items():
        got = path.stat().st_size
        slack = (PAGE_SLACK if label == "html" else SLACK) + COMPILE_COST.get(label, 0) * compiles
        assert got <= 2 * size + slack, (label, got, size, compiles)
    # Everything is still there: the JSON expands to the report written without the table.
    first = every_attempt(doc)[0]
    kept = (
        first["stack"][0]["file"] if isinstance(first["stack"][0]["file"], str) else first["file"]
    )
    assert f"...[{len(NAME):,} characters]..." in kept and kept.endswith("dd/model.py")
    assert len(kept) <= 512
    # Once in the table ("0"), again ("b0") when a forked copy wrote the later compiles.
    assert set(doc["strings"].values()) == {kept} and len(doc["strings"]) <= 2
    assert tlview.expand_report(doc) == plain_doc(log, monkeypatch)
    refs = [f["file"] for c in every_attempt(doc) for f in c["stack"] if f["file"] != kept]
    assert len(refs) >= compiles * depth - 2 and all(r in ({"$s": "0"}, {"$s": "b0"}) for r in refs)
    # Text and page: the name whole once, numbered; every other frame by its number and its end
    # (the page's later sections, when a forked copy drew them, show it whole once more).
    verbose = out["text -v"].read_text()
    # The terminal's width wraps the whole name: folded inside a word, or at a space with the
    # wrapped line indented.
    joined = re.sub(r"\n {2,}", " ", verbose).replace("\n", "")
    whole = re.search(re.escape(kept) + r" \[name (\d+)\]", joined)
    assert joined.count(kept) == 1 and whole is not None  # the compile table's `pkg/file` is
    n = whole.group(1)  # another name, numbered apart
    ref = f"{kept[: strings.HEAD]}...[name {n}]...{kept[-strings.TAIL :]}"
    assert len(re.findall(re.escape(ref) + r":\d+ in f\n", verbose)) >= compiles * depth - 1
    page = out["html"].read_text()
    assert 1 <= page.count(kept) <= 2 and page.count("...[name ") >= min(depth, 40)
    if depth > 40:  # a detailed section lists 40 frames, says how many there are and how to see all
        assert f"({depth} frames)" in page and f"... {depth - 40} more frames: <code>--full" in page
    if compiles > 500 and depth > 3:  # the sections past the 500 in detail list 3 frames
        assert f"... {depth - 3} more frames: <code>--full" in page
    if depth > 1:  # one stack, the same in every compile: the tree lists its outermost 40
        assert page.count('<div class="fr') == min(depth, 40)
    return {label: path.stat().st_size for label, path in out.items()}


@pytest.mark.slow  # 1.5 MB of compiles in six formats: about 5 s
def test_a_long_interned_name_keeps_every_format_within_twice_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 MB of compiles with 60-frame stacks naming one 64 KB file: JSON, text (default, -v,
    -q), page and Perfetto each at most 2x the log and 64 KB (the page: 8 MB); the JSON
    expands to all of it."""
    check(tmp_path, crafted(tmp_path, 1 << 20, 60), 60, monkeypatch)
    check(tmp_path, crafted(tmp_path, 512 << 10, 1, timed=False), 1, monkeypatch)


@pytest.mark.slow  # two 16 MB logs in every format: about two minutes
def test_a_16_mb_log_of_one_long_name_gives_at_most_32_mb_in_every_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's log: 16 MB of deep stacks (500 frames) naming one long file (it gave over
    200 MB of JSON), then 16 MB of one-frame compiles: at most 32 MB in every format."""
    for depth in (500, 1):
        log = crafted(tmp_path, 16 << 20, depth)
        sizes = check(tmp_path, log, depth, monkeypatch)
        assert max(sizes.values()) <= 2 * log.stat().st_size, sizes


def test_a_forked_later_half_keeps_its_own_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report whose later compiles a forked copy writes: its references ("b0") are in the one
    table, and the document expands to what one process writes."""
    rep = load(crafted(tmp_path, 1 << 20, 20))
    one = io.BytesIO()
    monkeypatch.setattr(halves, "MIN_COST", 1 << 62)
    json_mod.stream(rep, one, split=forking(rep))
    monkeypatch.setattr(halves, "MIN_COST", 0)
    monkeypatch.setattr(halves, "spare_core", lambda: True)
    two = io.BytesIO()
    json_mod.stream(rep, two, split=forking(rep))
    a, b = orjson.loads(one.getvalue()), orjson.loads(two.getvalue())
    assert a["strings"] == {"0": every_attempt(a)[0]["stack"][0]["file"]}
    assert sorted(b["strings"]) == ["0", "b0"], b["strings"].keys()
    assert strings.expand(a) == strings.expand(b) and a != b


def test_expanding_puts_every_string_back_and_leaves_the_document() -> None:
    """References anywhere (lists, nested objects) become their strings; the table goes; the
    caller's document is not changed; a document without a table is returned as it is."""
    long = "x" * strings.MIN_CHARS
    t = strings.Table()
    doc: dict[str, Any] = {
        "format": "tlview.report/1",
        "a": [t.deep([long, {"k": long}]), t.ref(long)],
    }
    doc["nested"] = {"deep": [[t.ref(long), t.ref("short")]]}
    doc[strings.TABLE] = t.entries
    before = json.loads(json.dumps(doc))
    assert doc["a"][0][0] == long and doc["a"][0][1] == {"k": {"$s": "0"}}
    got = strings.expand(doc)
    assert got == {
        "format": "tlview.report/1",
        "a": [[long, {"k": long}], long],
        "nested": {"deep": [[long, "short"]]},
    }
    assert doc == before
    plain = {"format": "tlview.report/1", "compiles": []}
    assert strings.expand(plain) is plain


def test_a_reference_to_no_entry_is_one_clear_error() -> None:
    for doc in (
        {"x": {"$s": "7"}, "strings": {"0": "a"}},
        {"x": [{"$s": 0}], "strings": {"0": "a"}},
        {"x": 1, "strings": ["a"]},
    ):
        with pytest.raises(TlviewError, match="strings"):
            tlview.expand_report(doc)


def test_the_diff_refers_to_a_long_file_name_once(tmp_path: Path) -> None:
    """`tlview diff --format json` of two such logs: the name written whole once and in the
    table, every other frame referring to it; expanded, every frame names it."""
    base = crafted(tmp_path, 256 << 10, 1, timed=False)
    new = tmp_path / "new.log"
    new.write_bytes(base.read_bytes())
    res = run_cli("diff", base, new, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    frames = doc["frames"]
    assert len(frames) > 100 and len(doc["strings"]) == 1
    assert len(res.stdout) < 2 * base.stat().st_size
    got = tlview.expand_report(doc)
    kept = got["frames"][0]["base_frame"]["file"]
    assert kept.endswith("/model.py") and "characters]..." in kept
    assert all(p[k]["file"] == kept for p in got["frames"] for k in ("base_frame", "new_frame"))


def test_a_stored_report_with_a_strings_table_diffs_as_its_log(tmp_path: Path) -> None:
    """`tlview diff BASE.json NEW` reads a stored report's strings table back (issue 36's
    baseline through issue 33's table): the same frames and changes as the log itself."""
    log = crafted(tmp_path, 256 << 10, 1, timed=False)
    base = tmp_path / "base.json"
    assert run_cli("report", log, "-o", base).exit_code == 0
    assert '"strings"' in base.read_text() and '{"$s"' in base.read_text()
    stored = run_cli("diff", base, log, "--format", "json")
    direct = run_cli("diff", log, log, "--format", "json")
    assert stored.exit_code == direct.exit_code == 0, stored.output
    got, want = (strings.expand(json.loads(r.stdout)) for r in (stored, direct))
    assert got["frames"] == want["frames"] and got["changes"] == want["changes"]
    files = {f["base_frame"]["file"] for f in got["frames"]}
    assert len(got["frames"]) > 10 and len(files) == 1 and len(files.pop()) > 200


@pytest.mark.slow  # over a second
def test_a_long_interned_name_is_cut_with_its_length(tmp_path: Path) -> None:
    """A 64 KB file name interned once and named by 20 stacks of 500 frames: JSON, HTML and
    -v text stay within a few times the log, the name shown cut, with its length."""
    name = "/" + "d" * 65_535
    stack = [{"line": i, "name": "f", "filename": 0} for i in range(500)]
    parts = [interned(name)] + [record("dynamo_start", {"stack": stack}, (k, 0)) for k in range(20)]
    log = write_log(tmp_path, "names.log", *parts)
    size = log.stat().st_size
    for fmt, extra in (("json", ()), ("html", ()), ("text", ("-v",))):
        out = tmp_path / f"out.{fmt}"
        assert_clean_exit(run("report", str(log), "--format", fmt, "-o", str(out), *extra), 0, fmt)
        assert out.stat().st_size < 40 * size, (fmt, out.stat().st_size, size)
    frame = tlview.expand_report(doc_of(log))["compiles"][0]["stack"][0]  # the strings table
    assert "...[65,536 characters]..." in frame["file"] and len(frame["file"]) < 520, frame
