"""The terminal (issue 49): the width of the text, ids and places never broken, names cut in the
middle and written whole once, no line ending in spaces, wrapped lines indented."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
import uuid
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, corpus, run_cli

from tlview.render.text import console

TLVIEW = [sys.executable, "-m", "tlview"]
LOGS = [
    FIXTURES / "demo.log",
    FIXTURES / "kernels.log",
    FIXTURES / "ranks",
    corpus("compile_error"),
    corpus("transformer_inductor"),
    corpus("dynamic_shapes"),
]


def test_with_no_terminal_and_no_columns_text_is_100_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(console, "_attached", lambda: None)
    assert console.terminal_width() == console.pipe_width() == 100
    out = run_cli("report", FIXTURES / "demo.log", "-v").stdout.splitlines()
    assert max(map(len, out)) <= 100 and max(map(len, out)) > 90
    monkeypatch.setattr(console, "_attached", lambda: 87)
    assert console.terminal_width() == 87 and console.pipe_width() == 100  # a file: not the tty
    monkeypatch.setenv("COLUMNS", "120")
    assert console.terminal_width() == console.pipe_width() == 120


@pytest.mark.parametrize("width", ["60", "80", "100", "160"])
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_no_line_of_text_ends_in_a_space(
    log: Path, width: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", width)
    for args in (("report", log, "-v"), ("report", log), ("report", log, "-q")):
        out = run_cli(*args).stdout.splitlines()
        assert [ln for ln in out if ln != ln.rstrip()] == [], args


def test_a_wrapped_line_is_indented_under_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`graph break at FILE:LINE: Call to ...` wraps at its spaces, its later lines indented two
    past its own start; a place is never split."""
    monkeypatch.setenv("COLUMNS", "60")
    out = run_cli("report", FIXTURES / "demo.log").stdout.splitlines()
    at = next(k for k, ln in enumerate(out) if ln.startswith("  graph break at "))
    assert out[at] == "  graph break at /tmp/tmps3otvy77/demo.py:15: Call to"
    assert out[at + 1] == "    `torch._dynamo.graph_break()`"


def _ids_and_places(path: Path) -> tuple[set[str], set[str]]:
    """Every compile's name as the text report gives it, and every `file:line` of the compile
    table: what must show whole."""
    import tlview
    from tlview.analyze.names import Refs
    from tlview.units import short_path

    rep = tlview.read(path)
    refs = Refs.of(rep)
    ids = {refs(c) for c in rep.attempts if c.id is not None}
    places = {f"{short_path(c.file)}:{c.source_line}" for c in rep.attempts if c.file}
    return ids, places


def _tmux() -> str:
    found = shutil.which("tmux")
    assert found, "tmux is needed (apt-get install tmux; .ci/run installs it)"
    return found


def _in_tmux(command: str, width: int = 80) -> list[str]:
    """COMMAND run in a real terminal WIDTH columns wide (tmux), and the screen it left, with
    every line it scrolled past: as a person reads it, lines the terminal wrapped included."""
    tmux = _tmux()
    sock = f"tlview-test-{uuid.uuid4().hex[:8]}"
    done = f"done-{sock}"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    base = [tmux, "-L", sock, "-f", "/dev/null"]
    script = f"cd {ROOT} && {command}; tmux -L {sock} wait-for -S {done}; sleep 60"
    try:
        subprocess.run(
            [
                *base,
                "new-session",
                "-d",
                "-x",
                str(width),
                "-y",
                "40",
                "bash",
                "--norc",
                "-c",
                script,
            ],
            env=env,
            check=True,
            timeout=30,
        )
        subprocess.run([*base, "set-option", "-g", "history-limit", "50000"], env=env, timeout=30)
        subprocess.run([*base, "wait-for", done], env=env, check=True, timeout=120)
        got = subprocess.run(
            [*base, "capture-pane", "-p", "-S", "-", "-E", "-"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return got.stdout.splitlines()
    finally:
        subprocess.run([*base, "kill-server"], env=env, capture_output=True, timeout=30)


@pytest.mark.slow  # runs tlview in tmux, twice per log
@pytest.mark.parametrize(
    "path",
    [corpus("compile_error"), corpus("transformer_inductor"), FIXTURES / "demo.log"],
    ids=lambda p: p.name,
)
def test_at_80_columns_no_id_or_place_is_broken(path: Path) -> None:
    """In a terminal of 80 columns, on the terminal and piped (`| cat`, whose width is the
    terminal's too), every compile id and every `file:line` of the report is whole on one row of
    the screen."""
    ids, places = _ids_and_places(path)
    py = " ".join(TLVIEW)
    for pipe in ("", " | cat"):
        screen = _in_tmux(f"{py} report {path}{pipe}")
        text = "\n".join(screen)
        assert "Compiles" in text, text[-2000:]
        broken = [w for w in sorted(ids | places) if w not in text]
        assert broken == [], (pipe, broken, text[:3000])


@pytest.mark.slow  # runs tlview on a pseudo-terminal
def test_piped_text_fits_the_terminal_it_was_run_from(tmp_path: Path) -> None:
    """`tlview report LOG | less`: stdout is a pipe, stdin and stderr the terminal (90 columns
    here); the text is as wide as that terminal, not $COLUMNS's default."""
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 90, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    try:
        res = subprocess.run(
            [*TLVIEW, "report", str(FIXTURES / "demo.log"), "-v"],
            stdin=sub,
            stderr=sub,
            stdout=subprocess.PIPE,
            env=env,
            cwd=ROOT,
            timeout=120,
            check=True,
        )
    finally:
        os.close(sub)
        os.close(main)
    out = res.stdout.decode().splitlines()
    assert max(map(len, (ln for ln in out if " is " not in ln))) == 90
    assert json.dumps(out).count("\\u001b") == 0  # piped: no colour


def test_the_readmes_sample_is_what_tlview_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's `COLUMNS=130 tlview report tests/fixtures/demo.log`, piped: its first lines, as
    the README shows them, no line ending in a space."""
    readme = (ROOT / "README.md").read_text()
    intro = "`COLUMNS=130 tlview report tests/fixtures/demo.log`, piped, begins:\n\n```\n"
    start = readme.index(intro) + len(intro)
    sample = readme[start : readme.index("```", start)].splitlines()
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "130")
    out = run_cli("report", "tests/fixtures/demo.log").stdout.splitlines()
    assert out[: len(sample)] == sample
