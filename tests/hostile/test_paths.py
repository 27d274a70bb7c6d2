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

from tlview.analyze.baseline import every_attempt


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
    assert orjson.loads(mine.read_bytes())["format"] == "tlview.report/2"
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


# -- what a job folder, an output path or a URL may be --------------------------------------------
def test_a_job_folder_of_odd_entries_is_read_and_said_once(tmp_path: Path) -> None:
    """A FIFO (never opened: a read of it would block), a link to nothing, a link back to the
    folder and 3,000 empty logs beside one log: its report, and one note for each kind of thing
    left out (before: a note for every empty log, 3,000 lines)."""
    import os
    import subprocess
    import sys

    job = tmp_path / "job"
    job.mkdir()
    (job / "a.log").write_bytes(DEMO.read_bytes())
    os.mkfifo(job / "fifo.log")
    (job / "gone.log").symlink_to(tmp_path / "nothing")
    (job / "loop").symlink_to(job)
    for i in range(3000):
        (job / f"e{i}.log").write_bytes(b"")
    p = subprocess.run(
        [sys.executable, "-m", "tlview", "report", str(job), "--format", "json", "--jobs", "1"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == EXIT_OK, p.stderr.decode()
    notes = json.loads(p.stdout)["notes"]
    assert len(notes) == 3, notes
    assert notes[0] == "could not read 2 *.log entr(ies): fifo.log (not a regular file), " \
        "gone.log (not a regular file)"  # fmt: skip
    assert notes[1] == "did not enter 1 subdirector(ies): loop"
    assert notes[2].startswith("skipped 3,000 logs (empty file): e0.log, e1.log, e10.log")


def test_a_log_that_grows_while_it_is_read(tmp_path: Path) -> None:
    """Records appended while tlview reads (a job still running): every compile of what was
    there is reported, what came after is read or is one bad line, never an error."""
    import threading
    import time

    log = tmp_path / "growing.log"
    data = DEMO.read_bytes()
    log.write_bytes(data * 20)
    done = threading.Event()

    def grow() -> None:
        # Bounded (the lead's edit: unbounded, a reader that chases the end filled the disk
        # with 65 GB): at most 64 MB more, then the writer stops as a finished job does.
        with log.open("ab") as f:
            for _ in range((64 << 20) // 70_000):
                if done.is_set():
                    break
                f.write(data[:70_000])  # a record cut anywhere, as a writer leaves it
                f.flush()
                time.sleep(0.001)

    t = threading.Thread(target=grow, daemon=True)
    t.start()
    try:
        for mmap in ("", "1"):
            res = run("report", str(log), "--format", "json", env={"TLVIEW_NO_MMAP": mmap})
            assert_clean_exit(res, EXIT_OK, f"mmap={mmap!r}")
            keys = [c["key"] for c in every_attempt(json.loads(res.stdout))]
            assert len(keys) >= 20 * 7, len(keys)
    finally:
        done.set()
        t.join()


def test_output_onto_a_link_is_refused_unless_forced(tmp_path: Path) -> None:
    """`-o LINK`: tlview writes no link, so one is refused (before: a link to tlview's own file,
    or to nothing, was silently replaced by a file); with --force the link is replaced and the
    file it names left alone. A link to a device is written through, as the device is."""
    mine = tmp_path / "mine.json"
    assert_clean_exit(run("report", str(DEMO), "--format", "json", "-o", str(mine)), 0, "mine")
    before = mine.read_bytes()
    for target in (mine, tmp_path / "no" / "such.json"):
        link = tmp_path / f"link{len(str(target))}.json"
        link.symlink_to(target)
        res = run("report", str(DEMO), "--format", "json", "-o", str(link))
        assert_clean_exit(res, EXIT_REFUSED, str(target))
        assert f"is a link (to {target}), which tlview did not write" in res.stderr
        assert link.is_symlink()
        res = run("report", str(DEMO), "--format", "json", "-o", str(link), "--force")
        assert_clean_exit(res, EXIT_OK, f"--force {target}")
        assert not link.is_symlink() and link.read_bytes() == before
    assert mine.read_bytes() == before
    null = tmp_path / "null.json"
    null.symlink_to("/dev/null")
    assert_clean_exit(run("report", str(DEMO), "-o", str(null)), EXIT_OK, "a link to a device")
    assert null.is_symlink()
    if Path("/dev/full").exists():
        res = run("report", str(DEMO), "--format", "json", "-o", "/dev/full")
        assert_clean_exit(res, EXIT_REFUSED, "/dev/full")
        assert "/dev/full: cannot write: No space left on device" in res.stderr


def test_latest_passes_over_what_is_no_log(tmp_path: Path) -> None:
    """--latest among links: the newest entry is a link to an empty file, which is passed over
    for the newest log, and said; a folder of no log is one line (exit 1)."""
    import os

    d = tmp_path / "logs"
    d.mkdir()
    (d / "a.log").write_bytes(DEMO.read_bytes())
    os.utime(d / "a.log", (0, 1_000_000))
    (tmp_path / "empty").write_bytes(b"")
    (d / "z.log").symlink_to(tmp_path / "empty")
    res = run("report", str(d), "--latest", "-q")
    assert_clean_exit(res, EXIT_OK, "--latest")
    assert f"reading the newest log, {d / 'a.log'} (passed over newer: z.log: empty file)" in (
        res.stderr
    )
    (d / "a.log").write_bytes(b"")
    res = run("report", str(d), "--latest")
    assert_clean_exit(res, 1, "no log")
    assert "no log to read among its *.log files: " in res.stderr
    res = run("report", "", "--latest")
    assert_clean_exit(res, 2, "an empty PATH")


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("", 2, "an empty PATH names no log"),
        ("zip://a.log::{demo}", 1, "cannot open: BadZipFile"),
        ("nosuchproto://x.log", 5, "Protocol not known"),
        ("{demo}\x00x", 1, "no such file or directory"),
        ("memory://none.log", 1, "no such file or directory"),
    ],
)
def test_a_hostile_path_is_one_error_in_the_api_and_the_command(
    path: str, status: int, words: str
) -> None:
    """`tlview.read` and `tlview report` on paths and fsspec URLs that name no log (before:
    `zip://` of no zip file ended in exit 70, and "" read the current directory)."""
    import tlview

    path = path.format(demo=DEMO)
    with pytest.raises(tlview.TlviewError, match=words) as e:
        tlview.read(path)
    assert e.value.exit_code == status
    if "\x00" not in path:  # no command line holds a NUL: only a Python caller can give one
        assert_clean_exit(run("report", path), status, repr(path))


def test_a_growing_log_is_read_as_it_was_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in chunks (not mapped: a .gz's plain twin, TLVIEW_NO_MMAP), a log that grows after
    tlview opened it is read to the size it had then, as a mapped one is (before: the reader
    chased the end, and a job writing faster than it reads kept it reading for ever)."""
    from tlview import parse

    monkeypatch.setenv("TLVIEW_NO_MMAP", "1")
    monkeypatch.setattr(parse, "CHUNK", 1 << 16)
    log = tmp_path / "growing.log"
    data = DEMO.read_bytes()
    log.write_bytes(data * 4)
    records = iter(parse.Reader(log))
    first = [next(records) for _ in range(10)]
    with log.open("ab") as f:  # grows after it was opened
        f.write(data * 4)
    rest = list(records)
    whole = sum(1 for _ in parse.Reader(tmp_path / "growing.log"))
    assert len(first) + len(rest) == whole // 2, (len(rest), whole)
