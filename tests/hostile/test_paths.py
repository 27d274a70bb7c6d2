"""Paths and the file system: tlview writes only the files it is told to, replaces only what it
wrote (a crash leaves the old file whole), never writes over a log it reads, through a link or
another name, and names the folders it makes uniquely and briefly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import (
    interned,
    one_input,
    record,
    write_log,
)
from damage import (
    EXIT_OK,
    EXIT_REFUSED,
    assert_clean_exit,
    run,
)
from planted import DEMO


def test_output_replaces_only_what_tlview_wrote(tmp_path: Path) -> None:
    """A file tlview did not write is refused (exit 4, untouched) unless --force; its own files
    (every format) are replaced; nothing is left behind under a temporary name."""
    for fmt in ("text", "json", "html", "perfetto", "markdown"):
        dest = tmp_path / f"report.{fmt}"
        for _ in range(2):  # the second run replaces tlview's own file
            assert_clean_exit(run("report", str(DEMO), "--format", fmt, "-o", str(dest)), 0, fmt)
        assert dest.stat().st_size > 0
    mine = tmp_path / "notes.md"
    text = "# my notes on tlview 1.0 and tlview.report\nwritten by hand\n"
    for content in (text, "", "{}", "tlview"):
        mine.write_text(content)
        before = mine.stat()
        res = run("report", str(DEMO), "--format", "json", "-o", str(mine))
        assert_clean_exit(res, EXIT_REFUSED, repr(content))
        assert "--force" in res.stderr and str(mine) in res.stderr
        assert mine.read_text() == content and mine.stat().st_mtime_ns == before.st_mtime_ns
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    assert_clean_exit(run("report", str(DEMO), "-o", str(link)), EXIT_REFUSED, "symlink")
    assert mine.read_text() == content
    res = run("report", str(DEMO), "--format", "json", "-o", str(mine), "--force")
    assert_clean_exit(res, EXIT_OK, "--force")
    assert orjson.loads(mine.read_bytes())["format"] == "tlview.report/1"
    log = tmp_path / "copy.log"
    log.write_bytes(DEMO.read_bytes())
    assert_clean_exit(run("report", str(log), "-o", str(log)), EXIT_REFUSED, "over the log")
    assert log.read_bytes() == DEMO.read_bytes()
    assert_clean_exit(run("report", str(DEMO), "-o", str(tmp_path)), EXIT_REFUSED, "a directory")
    missing = tmp_path / "no" / "such" / "dir" / "r.json"
    assert_clean_exit(run("report", str(DEMO), "-o", str(missing)), EXIT_REFUSED, "no parent")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_crash_while_writing_leaves_no_half_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renderer dies halfway: the old file is intact, no new one appears, no temp is left."""
    from tlview.render.json import report as json_render

    def half(report: Any, out: Any, *a: Any, **k: Any) -> None:
        out.write(b'{"format":"tlview.report/1","half":')
        raise RuntimeError("renderer crashed")

    old = tmp_path / "old.json"
    assert_clean_exit(run("report", str(DEMO), "--format", "json", "-o", str(old)), 0, "first")
    before = old.read_bytes()
    monkeypatch.setattr(json_render, "stream", half)
    for dest in (old, tmp_path / "new.json"):
        res = run("report", str(DEMO), "--format", "json", "-o", str(dest))
        assert res.exit_code == 70 and "internal error" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


def test_the_log_is_never_overwritten_by_its_report(tmp_path: Path) -> None:
    """A log whose first 4 KB hold tlview's JSON signature in a payload is no file of
    tlview's: `-o LOG` is refused, with --force too, through a link too; a copy of it needs
    --force; tlview's own files are still replaced."""
    payload = b'{"format": "tlview.report/1", "written_by": "tlview 0.1.0"}'
    data = record("artifact", {"name": "x", "encoding": "json"}, payload=payload)
    data += interned("/m.py") + one_input()
    log = write_log(tmp_path, "run.log", data)
    (tmp_path / "link.json").symlink_to(log)
    for extra in ((), ("--force",)):
        for dest in (log, tmp_path / "link.json"):
            res = run("report", str(log), "--format", "json", "-o", str(dest), *extra)
            assert_clean_exit(res, EXIT_REFUSED, f"{dest.name} {extra}")
            assert "is a log this run reads" in res.stderr
    assert log.read_bytes() == data
    copy = write_log(tmp_path, "copy.log", data)
    res = run("report", str(log), "--format", "json", "-o", str(copy))
    assert_clean_exit(res, EXIT_REFUSED, "copy")
    assert "--force" in res.stderr
    mine = tmp_path / "mine.json"
    for _ in range(2):
        assert_clean_exit(run("report", str(log), "--format", "json", "-o", str(mine)), 0, "own")
    from tlview.runtime.output import written_by_tlview

    assert written_by_tlview(mine) and not written_by_tlview(copy)


EXIT_NO_REPRO = 6


@pytest.mark.slow
def test_repro_folders_are_unique_and_short(tmp_path: Path) -> None:
    """`a b.log` and `a_b.log` make one slug, a 251-character name too long a folder: every
    graph gets a folder of its own, each under 101 characters, and summary.json names it."""
    pytest.importorskip("torch")
    d = tmp_path / "logs"
    d.mkdir()
    one = interned("/m.py") + one_input()
    for name in ("a b.log", "a_b.log", "A_B.log", "L" * 247 + ".log"):
        (d / name).write_bytes(one)
    out = tmp_path / "repros"
    res = run("repro", str(d), "--all", "-o", str(out))
    assert_clean_exit(res, EXIT_OK, "repro --all")
    graphs = json.loads((out / "summary.json").read_text())["graphs"]
    dirs = [g["dir"] for g in graphs]
    assert len(graphs) == 4 and len({x.lower() for x in dirs}) == 4, dirs
    assert all(len(x) <= 100 and (out / x / "repro.py").exists() for x in dirs), dirs
    logs = {g["log"]: g["dir"] for g in graphs}
    assert logs["a b.log"] != logs["a_b.log"]


def test_slugs_are_bounded_and_folders_unique() -> None:
    from tlview.replay.make import Folders
    from tlview.replay.script import slug

    assert slug("0/1_2") == "0-1_2" and slug("!0/1/0") == "ca0-1-0"
    long = slug("x" * 300 + ".log:0/0")
    assert len(long) == 100 and long != slug("x" * 301 + ".log:0/0")
    f = Folders()
    assert [f.take(r) for r in ("a b.log:0/0", "a_b.log:0/0", "A_B.log:0/0")] == [
        "a_b.log--0-0",
        "a_b.log--0-0-2",
        "A_B.log--0-0-3",
    ]
