"""Nothing in a log is executed, imported, unpickled, opened or fetched: a real log planted with
code, pickles, a module, a secret file, a FIFO and URLs in every field tlview reads, through
`report` (every format), `inputs`, `diff`, under Python's audit hooks and as a process
(README "Trust", issue 6). `--allow-import MODULE` is the one way in."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from damage import (
    EXIT_OK,
    assert_clean_exit,
    run,
)
from planted import (
    DEMO,
    TOKEN,
    Hostile,
    _code,
    check_inert,
    planted,
    secret_untouched,
    violations,
    watch,
)


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    yield from planted(tmp_path, monkeypatch)


@pytest.mark.slow
def test_the_watch_sees_what_it_must_forbid(evil: Hostile) -> None:
    """Positive control: running, importing, unpickling or opening what the log holds is seen."""
    with watch() as events:
        exec(compile(_code(evil, "exec"), "<log>", "exec"))  # noqa: S102
        __import__(evil.module)
        pickle.loads(f"cos\nsystem\n(S'touch {evil.markers}/pickle'\ntR.".encode())  # noqa: S301
        evil.secret.read_text()
    found = " ".join(violations(events))
    for what in ("executed code", "unpickled", "open on a name", "import on a name"):
        assert what in found, (what, found)
    assert evil.marks() == ["exec", "imported", "pickle"]


REPORTS = [
    ("text",),
    ("text", "-v"),
    ("text", "--compile-id", "0/0"),
    ("json",),
    ("html",),
    ("html", "--full"),
    ("perfetto",),
]


@pytest.mark.parametrize("args", REPORTS, ids=" ".join)
def test_report_runs_nothing_from_the_log(evil: Hostile, args: tuple[str, ...]) -> None:
    fmt, *rest = args
    with watch() as events:
        res = run("report", str(evil.log), "--format", fmt, "--jobs", "1", *rest)
    assert_clean_exit(res, EXIT_OK, " ".join(args))
    check_inert(evil, events)
    assert TOKEN in res.stdout  # the hostile text is shown, as text


def test_report_written_to_a_file_runs_nothing(evil: Hostile, tmp_path: Path) -> None:
    for fmt in ("text", "json", "html"):
        dest = tmp_path / f"out.{fmt}"
        with watch() as events:
            res = run("report", str(evil.log), "--format", fmt, "-o", str(dest))
        assert_clean_exit(res, EXIT_OK, fmt)
        check_inert(evil, events)
        assert TOKEN in dest.read_text()


@pytest.mark.slow
def test_inputs_runs_nothing_from_the_log(evil: Hostile, tmp_path: Path) -> None:
    """The listing and --emit rebuild tensors from the log's metadata, never from its code."""
    pytest.importorskip("torch")
    import tlview.rebuild  # noqa: F401  (torch imported before watching: its imports are noise)

    runs = [
        (),
        ("--mode", "meta", "--emit", str(tmp_path / "meta.pt")),
        ("--compile-id", "0/0", "--emit", str(tmp_path / "real.pt")),
    ]
    for extra in runs:
        with watch() as events:
            res = run("inputs", str(evil.log), *extra)
        assert_clean_exit(res, EXIT_OK, f"inputs {extra}")
        check_inert(evil, events)
    listing = run("inputs", str(evil.log)).stdout
    assert f"--allow-import {evil.module}" in listing  # says why the type was not imported


@pytest.mark.slow
def test_allow_import_is_the_only_way_in(evil: Hostile, tmp_path: Path) -> None:
    """Positive control: the module the log names is imported when the user names it."""
    pytest.importorskip("torch")
    res = run(
        "inputs", str(evil.log), "--compile-id", "0/0", "--check", "--allow-import", evil.module
    )
    assert_clean_exit(res, EXIT_OK, "--allow-import")
    assert evil.marks() == ["imported"]


def test_diff_runs_nothing_from_the_log(evil: Hostile) -> None:
    for fmt in ("text", "json", "html"):
        with watch() as events:
            res = run("diff", str(DEMO), str(evil.log), "--format", fmt)
        assert_clean_exit(res, EXIT_OK, f"diff {fmt}")
        check_inert(evil, events)


@pytest.mark.slow
def test_as_a_process_nothing_is_run_and_the_fifo_is_never_opened(evil: Hostile) -> None:
    """The real command: no marker appears, and no one ever opens the FIFO the log names.

    Opening a FIFO to read blocks until a writer comes; a thread here tries to be that writer
    the whole time the command runs, so an open is seen (and released), never a hang.
    """
    opened: list[str] = []
    done = threading.Event()

    def writer() -> None:
        while not done.is_set():
            try:
                fd = os.open(evil.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader, as it should be
                time.sleep(0.005)
                continue
            opened.append("opened")
            os.close(fd)

    env = dict(
        os.environ, PYTHONPATH=f"{evil.module_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    )
    atime = _atime_is_kept(evil.markers.parent)
    os.utime(evil.secret, (0, evil.secret.stat().st_mtime))
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        for args in (
            ("report", str(evil.log)),
            ("report", str(evil.log), "--format", "json"),
            ("report", str(evil.log), "--format", "html"),
            ("inputs", str(evil.log), "--compile-id", "0/0"),
        ):
            p = subprocess.run(
                [sys.executable, "-m", "tlview", *args],
                capture_output=True,
                env=env,
                check=False,
                timeout=300,
            )
            err = p.stderr.decode()
            assert p.returncode == EXIT_OK, (args, p.returncode, err)
            assert "Traceback" not in err and "internal error" not in err, err
    finally:
        done.set()
        t.join()
    assert opened == []
    assert evil.marks() == []
    if atime:  # the secret file the log names was never read
        assert evil.secret.stat().st_atime == 0
    secret_untouched(evil)


def _atime_is_kept(tmp: Path) -> bool:
    """Whether reading a file here updates its access time (not on noatime mounts)."""
    probe = tmp / "atime_probe"
    probe.write_text("x")
    os.utime(probe, (0, probe.stat().st_mtime))
    probe.read_text()
    return probe.stat().st_atime != 0


@pytest.mark.parametrize("name", ["", "../evil", "a b", "os;x", ".x", "x.", "a..b", "é"])
def test_allow_import_takes_only_a_module_name(name: str) -> None:
    """A name no `import` statement could hold is a usage error (exit 2), for `inputs` as for
    `repro`, and in the API (before: `inputs --allow-import ../evil` was taken silently)."""
    import tlview

    res = run("inputs", str(DEMO), "--compile-id", "2/0", "--allow-import", name)
    assert_clean_exit(res, 2, repr(name))
    assert f"--allow-import {name!r}: not a module name" in res.stderr
    with pytest.raises(tlview.TlviewError, match="not a module name") as e:
        tlview.emit_inputs(str(DEMO), "2/0", "/dev/null", allow_import=[name])
    assert e.value.exit_code == 2


@pytest.mark.slow
def test_a_name_like_the_module_is_not_the_module(evil: Hostile) -> None:
    """`--allow-import` of a prefix of the module the log names (or of a package beside it)
    imports nothing: only that module, or one inside it, is let in."""
    pytest.importorskip("torch")
    for near in (evil.module[:-1], evil.module + "x", evil.module.rsplit("_", 1)[0]):
        res = run("inputs", str(evil.log), "--compile-id", "0/0", "--allow-import", near)
        assert_clean_exit(res, EXIT_OK, near)
        assert evil.marks() == [], near
