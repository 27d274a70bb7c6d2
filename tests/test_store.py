"""Compiles spilled to disk read back exactly as they were kept in memory."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import corpus, only_log, run_cli

import tlview.runtime.store as store
from tlview.index import compiles
from tlview.load import read as load


@pytest.mark.parametrize("folder", ["dtypes_zoo", "views_aliasing", "mlp_aot_eager", "export"])
def test_spilled_report_equals_in_memory_report(
    folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = only_log(folder)
    in_memory = json.loads(run_cli("report", path, "--format", "json").stdout)
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    spilled_report = load(path)
    assert spilled_report.logs[0].compiles.on_disk  # type: ignore[attr-defined]
    spilled = json.loads(run_cli("report", path, "--format", "json").stdout)
    assert spilled == in_memory


def test_spilled_list_survives_pickling(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a pool worker sends back: the spill file changes hands, the compiles stay the same.
    monkeypatch.setattr(compiles, "IN_MEMORY", 3)
    log = load(corpus("dtypes_zoo")).logs[0]
    keys = [c.key for c in log.compiles]
    inputs = [[i.tensor.dtype for i in c.inputs] for c in log.compiles]
    back = pickle.loads(pickle.dumps(log))  # noqa: S301 - our own objects, round trip
    assert [c.key for c in back.compiles] == keys
    assert [[i.tensor.dtype for i in c.inputs] for c in back.compiles] == inputs
    assert back.compiles[5].key == keys[5]


def test_records_pickle_as_their_fields() -> None:
    # Compiles cross processes and spill files as class + field values: every field survives,
    # and only tlview's record classes are named in the pickle.
    c = next(c for c in load(corpus("views_aliasing")).attempts if c.inputs)
    data = pickle.dumps(c, pickle.HIGHEST_PROTOCOL)
    back = store._Unpickler(io.BytesIO(data)).load()
    assert back == c and back.inputs == c.inputs and back.id == c.id
    assert type(back.inputs[0].tensor) is type(c.inputs[0].tensor)
    assert c.__reduce__()[1][0] == c.id  # the first field, as the constructor takes it


def _report_with(tmp_path: Path, setup: str) -> bytes:
    """Run `tlview report --format json` on a corpus log in a new process that runs `setup`
    first, with its temp directory in tmp_path; its stderr, once its output is checked."""
    code = setup + "from tlview.cli import run\nrun()\n"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = ["report", str(corpus("dtypes_zoo")), "--format", "json"]
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    in_process = run_cli("report", corpus("dtypes_zoo"), "--format", "json").stdout
    assert json.loads(r.stdout) == json.loads(in_process)  # written whole before the exit
    return r.stderr


def test_the_command_removes_its_spill_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # `tlview` exits without freeing its heap (cli.run), but still removes its temp files.
    err = _report_with(
        tmp_path,
        "import sys\n"
        "import tlview.index.compiles as s\n"
        "s.IN_MEMORY = 2\n"
        "made = s.SpillFile.__init__\n"
        "def note(self, *args):\n"
        "    made(self, *args)\n"
        "    print('spill file', self.path, file=sys.stderr)\n"
        "s.SpillFile.__init__ = note\n",
    )
    made = [ln.split()[-1] for ln in err.decode().splitlines() if ln.startswith("spill")]
    assert made and all(Path(p).parent.parent == tmp_path for p in made)  # in the run's dir
    assert list(tmp_path.iterdir()) == []  # removed with it


def test_a_terminated_run_says_so_and_removes_its_temp_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # SIGTERM to tlview and its copy (as a CI job's timeout sends to the job's processes) once
    # the copy is reading: one line, exit 143, and no temp file or directory left.
    code = (
        "import os, signal\n"
        "import tlview.index.parts as sp, tlview.runtime.store as s\n"
        "import tlview.index.compiles as ic\n"
        "ic.IN_MEMORY = 2\n"
        "sp.PARALLEL_MIN = 0\n"
        "part = sp.read_part\n"
        "def read(*args, **kw):\n"
        "    got = part(*args, **kw)\n"
        "    if args[3][0] == 0:  # tlview's own part, read while its copy reads the other\n"
        "        assert os.listdir(s.temp_dir()) is not None\n"
        "        os.killpg(0, signal.SIGTERM)\n"
        "    return got\n"
        "sp.read_part = read\n"
        "from tlview.cli import run\n"
        "run()\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = ["report", str(corpus("dtypes_zoo")), "--format", "json", "-o", str(tmp_path / "r.json")]
    r = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=env,
        start_new_session=True,
        timeout=300,
    )
    assert r.returncode == 143
    assert r.stderr.decode() == "tlview: terminated\n"
    assert list(tmp_path.iterdir()) == []  # no output either: it was not written whole


def test_a_pool_of_readers_ends_quietly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The pool that reads a directory's logs stops its workers with SIGTERM: they do not take it
    # for tlview's own (a traceback per worker), and leave nothing behind.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    logs = corpus("tlparse-tests", "multi_rank_logs")
    args = ["report", str(logs), "--format", "json", "-j", "2"]
    r = subprocess.run(
        [sys.executable, "-m", "tlview", *args],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0 and r.stderr == b""
    assert json.loads(r.stdout)["stats"]["logs"] == len(list(logs.glob("*.log")))
    assert list(tmp_path.iterdir()) == []


def test_what_a_killed_copy_left_is_removed_at_exit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The second reader spills its compiles and is killed before it hands them over: the run's
    # temp directory, and the files in it, go when tlview exits; the second part is read here.
    _report_with(
        tmp_path,
        "import os, signal\n"
        "import tlview.index.parts as sp, tlview.runtime.store as s\n"
        "import tlview.index.compiles as ic\n"
        "ic.IN_MEMORY = 2\n"
        "sp.PARALLEL_MIN = 0\n"
        "later = sp._later\n"
        "def killed(*args):\n"
        "    later(*args)\n"
        "    assert any(os.scandir(s.temp_dir()))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "sp._later = killed\n",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_what_a_killed_run_left_goes_with_the_next_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # SIGKILL (the OOM killer, a CI runner giving up) leaves the run's temp directory, its spill
    # files and the output half written: the next run on this machine removes them.
    out = tmp_path / "out"
    out.mkdir()
    setup = (
        "import os, signal\n"
        "import tlview.index.parts as sp, tlview.runtime.store as s\n"
        "import tlview.index.compiles as ic\n"
        "ic.IN_MEMORY = 2\n"
        "sp.PARALLEL_MIN = 0\n"
    )
    kill = (
        "from tlview.render.json import report as j\n"
        "def cut(rep, f, *a, **k):\n"
        "    f.write(b'{')\n"
        "    f.flush()\n"
        "    os.killpg(0, signal.SIGKILL)\n"
        "j.stream = cut\n"
    )
    run = "from tlview.cli import run\nrun()\n"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = ["report", str(corpus("dtypes_zoo")), "--format", "json", "-o", str(out / "r.json")]
    r = subprocess.run(
        [sys.executable, "-c", setup + kill + run, *args],
        capture_output=True,
        env=env,
        start_new_session=True,
        timeout=300,
    )
    assert r.returncode == -9
    (left,) = [p for p in tmp_path.iterdir() if p != out]
    assert left.name.startswith("tlview-") and "@" in left.name  # tagged with its pid and host
    assert any(p.suffix == ".spill" for p in left.iterdir())
    (half,) = out.iterdir()
    assert half.name.startswith(".r.json.") and half.read_bytes() == b"{"
    # A run that writes elsewhere and needs no temp directory leaves both alone...
    small = [sys.executable, "-m", "tlview", "report", str(only_log("views_aliasing"))]
    assert subprocess.run(small, capture_output=True, env=env, timeout=300).returncode == 0
    assert left.exists() and half.exists()
    # ...one that makes a temp directory and writes r.json removes them.
    r = subprocess.run(
        [sys.executable, "-c", setup + run, *args], capture_output=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in out.iterdir()] == ["r.json"]
    assert len(json.loads((out / "r.json").read_bytes())["compiles"]) == len(
        list(load(corpus("dtypes_zoo")).compiles)
    )


def test_only_what_dead_processes_of_this_host_left_is_removed(tmp_path: Path) -> None:
    from tlview.runtime import leftovers

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, timeout=300
    )
    dead = int(gone.stdout)  # reaped: no process has this pid now
    host = leftovers.tag().split("@")[1][:-1]
    names = {
        f"tlview-{dead}@{host}~abc12345": True,  # a dead run's directory
        f"tlview-{os.getpid()}@{host}~def12345": False,  # a live one's (this process)
        f"tlview-{os.getppid()}@{host}~ghi12345": False,  # another live process
        f"tlview-{dead}@another-host~jkl12345": False,  # made on another machine (shared /tmp)
        "tlview-mno12345": False,  # no tag: made by an older tlview, nobody can tell
    }
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "tlview-x.spill").write_bytes(b"x")
    (tmp_path / f".r.json.{dead}@{host}~pqr12345.tmp").write_bytes(b"{")
    (tmp_path / f".r.json.{os.getpid()}@{host}~stu12345.tmp").write_bytes(b"{")
    (tmp_path / f"notes-{dead}@{host}~vwx12345").write_bytes(b"")  # not ours by its name
    assert leftovers.sweep(str(tmp_path), "tlview-") == 1
    assert leftovers.sweep(str(tmp_path), ".r.json.") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [n for n, goes in names.items() if not goes]
        + [f".r.json.{os.getpid()}@{host}~stu12345.tmp", f"notes-{dead}@{host}~vwx12345"]
    )
    assert leftovers.sweep(str(tmp_path / "missing"), "tlview-") == 0


def test_repeated_stacks_and_graph_breaks_are_kept_once() -> None:
    # A log of thousands of recompiles must not hold thousands of copies of the same stacks and
    # graph breaks.
    rep = load(only_log("mlp_aot_eager"))
    by_id = {str(c.id): c for c in rep.attempts}
    first, again = by_id["0/0_1"], by_id["0/1_1"]  # the frame compiled again after a recompile
    assert len(first.stack) == len(again.stack) == 6
    assert all(a is b for a, b in zip(first.stack, again.stack, strict=True))
    (b0,) = by_id["0/0"].graph_breaks
    (b1,) = by_id["0/1"].graph_breaks
    assert (b0.line, b1.line) == (70, 1861) and len(b0.text) == 3307
    assert b0.text is b1.text and b0.reason is b1.reason
