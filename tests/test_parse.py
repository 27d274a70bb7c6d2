"""The streaming reader on real logs: framing, payloads, md5s, gzip, CRLF, string tables, ids."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import pytest
from helpers import corpus, only_log

from tlview.index.log import read_log
from tlview.logs.files import discover
from tlview.model import CompileId
from tlview.parse import Reader


@pytest.mark.parametrize(
    "text, parts",
    [
        ("0/0", (0, 0, 0, None)),
        ("0/1", (0, 1, 0, None)),
        ("0/0_1", (0, 0, 1, None)),
        ("12/3_2", (12, 3, 2, None)),
        ("!0/1/0", (1, 0, 0, 0)),
        ("!1", (None, None, 0, 1)),
        ("!2/3/4_1", (3, 4, 1, 2)),
    ],
)
def test_compile_id_round_trips_torch_form(text: str, parts: tuple) -> None:
    cid = CompileId.parse(text)
    assert (cid.frame, cid.frame_compile, cid.attempt, cid.autograd) == parts
    assert str(cid) == text


@pytest.mark.parametrize(
    "text", ["", "0", "a/b", "0/0/0", "-/-", "0/0_", "!", "\uff10/\uff10", "0/\u0661", "0/0@\uff12"]
)
def test_compile_id_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError):
        CompileId.parse(text)


def _record_lines(path: Path) -> list[int]:
    """Line numbers of record lines, found independently of tlview (not TAB, not blank)."""
    out = []
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if line.strip() and not line.startswith(b"\t"):
                out.append(n)
    return out


@pytest.mark.parametrize(
    "folder", ["mlp_aot_eager", "views_aliasing", "dtypes_zoo", "transformer_inductor", "export"]
)
def test_every_record_line_is_read_with_its_line_number(folder: str) -> None:
    path = only_log(folder)
    bad: list = []
    reader = Reader(path, on_bad=bad.append)
    records = list(reader)
    assert bad == []
    assert [r.line for r in records] == _record_lines(path)
    assert reader.lines == sum(1 for _ in path.open("rb"))
    for r in records:
        if "has_payload" in r.meta:
            assert r.payload_ok
            assert hashlib.md5(r.payload or b"").hexdigest() == r.meta["has_payload"]


def test_payload_text_keeps_unusual_line_breaks() -> None:
    # Payload lines are split on \n only: U+2028, U+0085 and form feeds stay inside a line.
    from helpers import FIXTURES

    (rec,) = [
        r
        for r in Reader(FIXTURES / "payloads.log")
        if r.kind == "artifact" and r.body["name"] == "odd_breaks"
    ]
    assert rec.payload_ok and rec.payload_lines == 2
    assert rec.text() == "line one\u2028still one\x0cform feed\x85next\nline two: caf\u00e9 \u2603"


def test_payload_tabs_of_its_own_are_kept() -> None:
    # Only the TAB torch puts before each payload line goes; TABs in the text stay, and the
    # md5 torch wrote agrees (the fast way of removing TABs is tried first, then the exact one).
    from helpers import FIXTURES

    for name in ("1", ""):
        mp = pytest.MonkeyPatch()
        if name:
            mp.setenv("TLVIEW_NO_MMAP", name)
        (rec,) = [
            r
            for r in Reader(FIXTURES / "payloads.log")
            if r.kind == "artifact" and r.body["name"] == "tabs_inside"
        ]
        mp.undo()
        assert rec.payload_ok and rec.line == 11 and rec.payload_lines == 5
        assert rec.text() == "def f(x):\n\treturn x\t# TABs inside lines\n\n\t\n\tend"
        assert hashlib.md5(rec.payload or b"").hexdigest() == rec.meta["has_payload"]


def test_small_chunks_give_the_same_records(monkeypatch: pytest.MonkeyPatch) -> None:
    # Records and payloads that straddle read chunks (streams) or windows (mapped files) are
    # put back together, and both ways of reading give the same records and line counts.
    import tlview.parse as parse

    path = only_log("mlp_aot_eager")
    reader = Reader(path)
    whole = [(r.line, r.kind, r.payload, r.payload_ok) for r in reader]
    monkeypatch.setattr(parse, "WINDOW", 97)
    small = Reader(path)
    assert [(r.line, r.kind, r.payload, r.payload_ok) for r in small] == whole
    monkeypatch.setenv("TLVIEW_NO_MMAP", "1")
    monkeypatch.setattr(parse, "CHUNK", 97)
    chunked = Reader(path)
    assert [(r.line, r.kind, r.payload, r.payload_ok) for r in chunked] == whole
    assert reader.lines == small.lines == chunked.lines


@pytest.mark.parametrize("folder", ["truncated_log", "subclasses", "export", "dtypes_zoo"])
def test_mapped_and_streamed_reads_agree(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = only_log(folder)
    bad_mapped: list = []
    mapped = Reader(path, on_bad=bad_mapped.append)
    got = [(r.line, r.kind, r.payload, r.payload_ok) for r in mapped]
    monkeypatch.setenv("TLVIEW_NO_MMAP", "1")
    bad_streamed: list = []
    streamed = Reader(path, on_bad=bad_streamed.append)
    assert [(r.line, r.kind, r.payload, r.payload_ok) for r in streamed] == got
    assert mapped.lines == streamed.lines and bad_mapped == bad_streamed


def test_gzip_log_reads_like_the_plain_one(tmp_path: Path) -> None:
    src = only_log("views_aliasing")
    gz = tmp_path / "trace.log.gz"
    with src.open("rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    plain = read_log(src)[0]
    packed = read_log(gz)[0]
    assert packed.records == plain.records == 657
    assert packed.lines == plain.lines
    assert [c.key for c in packed.compiles] == [c.key for c in plain.compiles]
    # Recognised by content, not by name.
    renamed = tmp_path / "renamed.log"
    shutil.copyfile(gz, renamed)
    assert read_log(renamed)[0].records == 657


def test_crlf_log_has_no_bad_lines() -> None:
    # rank 1 of tlparse's multi-rank test logs was written with CRLF line ends.
    path = corpus("tlparse-tests", "multi_rank_logs", "dedicated_log_torch_trace_rank_1.log")
    log = read_log(path)[0]
    assert log.bad_count == 0
    assert log.records == 810
    assert "CRLF line ends (read as LF)" in log.notes


def test_corrupted_json_payload_is_one_bad_line() -> None:
    path = corpus("tlparse-tests", "simple_corrupted_json.log")
    log = read_log(path)[0]
    assert log.bad_count == 1
    (bad,) = log.bad_lines
    assert bad.log == "simple_corrupted_json.log"
    assert bad.line == 14
    assert "md5" in bad.reason and "chromium_event" in bad.reason
    # Everything else is still there: the same compiles as the undamaged log.
    clean = read_log(corpus("tlparse-tests", "simple.log"))[0]
    assert [c.key for c in log.compiles] == [c.key for c in clean.compiles]
    assert log.records == clean.records


def test_interned_file_names_resolve_in_stacks() -> None:
    log = read_log(only_log("mlp_aot_eager"))[0]
    c = next(c for c in log.compiles if c.key == "0/0")
    assert c.stack[0].file == "/home/user/corpus/gen/mlp_aot_eager.py"
    assert c.stack[0].line == 23 and c.stack[0].name == "<module>"
    assert c.stack[-1].name == "forward" and c.stack[-1].line == 11


def test_directory_lists_logs_and_notes_the_rest() -> None:
    files, notes = discover(corpus("tlparse-tests"))
    assert [f.name for f in files] == [
        "artifacts.log",
        "comp_failure.log",
        "comp_metrics.log",
        "export.log",
        "export_guard_added.log",
        "simple.log",
        "simple_corrupted_json.log",
    ]
    assert any("PROVENANCE.txt" in n for n in notes)
    assert any("multi_rank_logs" in n for n in notes)


def test_thread_id_prefixes_stay_one_stream() -> None:
    # Older torch wrote thread ids (pointer-sized) in the prefix: one process, one log.
    logs = read_log(corpus("tlparse-tests", "comp_metrics.log"))
    assert len(logs) == 1
    assert [c.key for c in logs[0].compiles] == ["0/0", "0/0_1", "1/0", "1/0_1", "2/0"]


TRUNCATE_WHILE_READING = r"""
import os, sys
from pathlib import Path
from tlview import parse

parse.WINDOW = 1 << 16
path = Path(sys.argv[1])
bad = []
reader = parse.Reader(path, on_bad=bad.append)
lines = []
for rec in reader:
    lines.append(rec.line)
    if len(lines) == 1:
        os.truncate(path, path.stat().st_size // 3)  # rotated in place while read
print(len(lines), max(lines))
for b in bad:
    print(b.line, b.reason)
"""


def test_a_log_cut_while_read_is_read_to_its_new_end(tmp_path: Path) -> None:
    """A mapped log truncated under tlview (its pages past the new end are gone: touching one
    kills the process with SIGBUS): reading stops at the new end, with a bad line saying so."""
    import subprocess
    import sys

    log = tmp_path / "rotated.log"
    shutil.copyfile(only_log("mlp_aot_eager"), log)
    size = log.stat().st_size
    assert size > 3 * (1 << 16)
    proc = subprocess.run(
        [sys.executable, "-c", TRUNCATE_WHILE_READING, str(log)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    head, *bad = proc.stdout.splitlines()
    count, last = map(int, head.split())
    kept = log.read_bytes()
    assert len(kept) == size // 3
    assert last <= kept.count(b"\n") + 1 and count > 1
    assert any(f"the log shrank to {size // 3:,} bytes while tlview read it" in b for b in bad)
