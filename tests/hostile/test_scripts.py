"""Repro scripts: what `tlview repro` writes from a log, and what it lets run. Every string from
a log is a Python literal and the graph's code gets the same escapes, so `cat repro.py` obeys
nothing and the code reads as it runs; without `--run` nothing of the log runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crafted import (
    OBEYED,
    graph,
    interned,
    metrics,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from damage import (
    EXIT_OK,
    assert_clean_exit,
    run,
)
from planted import Hostile, check_inert, planted, watch


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    yield from planted(tmp_path, monkeypatch)


@pytest.mark.slow
def test_repro_scripts_hold_no_control_or_bidi_character(tmp_path: Path) -> None:
    """Graph code whose comment holds OSC 52, clear-screen and bidi overrides, and a string
    holding ESC: repro.py holds them as escapes, the comment reads as it runs, and it runs."""
    pytest.importorskip("torch")
    body = (
        "# File: m.py:3 \x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J x = 1 \u202e } \u2066 // tail\n"
        "s = 'a\x1bb'"
    )
    g = graph([("L_x_", "f32[4, 4][4, 1]cpu")], body=body)
    parts = [start(), storage(0, 64), tensor(0, [4, 4], [4, 1], 0), source(0, "L['x']"), g]
    log = write_log(tmp_path, "bidi.log", interned("/m.py"), *parts, metrics())
    out = tmp_path / "r"
    res = run("repro", str(log), "--compile-id", "0/0", "-o", str(out), "--run")
    assert_clean_exit(res, EXIT_OK, "repro --run")
    text = (out / "repro.py").read_text()
    assert not OBEYED.search(text.replace("\t", ""))
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in text and "\\u202e" in text
    assert "s = 'a\\x1bb'" in text


@pytest.mark.slow
def test_repro_writes_but_runs_nothing_from_the_log(evil: Hostile, tmp_path: Path) -> None:
    """`tlview repro` (without --run) writes scripts from the log and runs none of it."""
    pytest.importorskip("torch")
    import tlview.replay.make  # noqa: F401  (torch imported before watching)

    with watch() as events:
        res = run("repro", str(evil.log), "--all", "-o", str(tmp_path / "repros"))
    assert res.exit_code in (0, 6), res.stderr  # 6: some graph gave no repro (README)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    check_inert(evil, events)
