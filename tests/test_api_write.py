"""`tlview.write_report`: the API call that writes any report format, as `tlview report` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli

import tlview
from tlview.errors import TlviewError


def test_each_format_is_what_the_command_writes(tmp_path: Path) -> None:
    report = tlview.read(FIXTURES / "demo.log")
    for fmt, name in (
        ("json", "r.json"),
        ("markdown", "r.md"),
        ("html", "r.html"),
        ("text", "r.txt"),
    ):
        (tmp_path / "api").mkdir(exist_ok=True)
        mine, theirs = tmp_path / "api" / name, tmp_path / name  # a page names its own file
        # a log's path: read as the format needs (the page keeps payload texts)
        figures = tlview.write_report(FIXTURES / "demo.log", mine, fmt)
        assert (
            run_cli("report", FIXTURES / "demo.log", "--format", fmt, "-o", theirs).exit_code == 0
        )
        assert mine.read_bytes() == theirs.read_bytes(), fmt
        assert figures is not None and figures.compiles == 5
    # The format from the name, as -o does; a file tlview did not write is refused.
    tlview.write_report(report, tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text())["format"] == "tlview.report/2"
    mine = tmp_path / "mine.txt"
    mine.write_text("not tlview's")
    with pytest.raises(TlviewError):
        tlview.write_report(report, mine)
    assert mine.read_text() == "not tlview's"
