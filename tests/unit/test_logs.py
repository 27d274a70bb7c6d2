"""logs/: what a PATH names, and how its bytes are opened (gzip by its magic, not its name)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from helpers import FIXTURES

from tlview.errors import EXIT_NO_TRACE, TlviewError
from tlview.logs.files import discover, is_gzip, no_logs, open_log
from tlview.logs.sources import Source, find, is_url


def test_a_directory_names_its_logs_in_order_and_notes_the_rest(tmp_path: Path) -> None:
    for name in ("b.log", "a.log", "c.log.gz", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    logs, notes = discover(tmp_path)
    assert [p.name for p in logs] == ["a.log", "b.log", "c.log.gz"]
    assert notes == [
        "ignored 1 file(s) not named *.log or *.log.gz: notes.txt",
        "did not enter 1 subdirector(ies): sub",
    ]
    assert no_logs("d", notes).startswith("d: no *.log or *.log.gz file in this directory (")


def test_a_missing_path_is_one_error_with_exit_1(tmp_path: Path) -> None:
    with pytest.raises(TlviewError) as e:
        discover(tmp_path / "gone.log")
    assert e.value.exit_code == EXIT_NO_TRACE
    assert e.value.message.endswith("gone.log: no such file or directory")


def test_gzip_is_known_by_its_magic_whatever_its_name(tmp_path: Path) -> None:
    text = (FIXTURES / "demo.log").read_bytes()
    packed = tmp_path / "demo.log"  # no .gz in the name
    packed.write_bytes(gzip.compress(text))
    assert is_gzip(packed) and not is_gzip(FIXTURES / "demo.log")
    with open_log(packed) as f:
        assert f.read() == text


def test_find_sizes_each_log_and_tells_a_url() -> None:
    found = find(str(FIXTURES / "ranks"))
    assert found.directory
    assert [s.name for s in found.sources] == sorted(p.name for p in (FIXTURES / "ranks").iterdir())
    assert all(s.size == Path(s.path).stat().st_size for s in found.sources)
    assert is_url("s3://bucket/trace/") and not is_url("/tmp/trace")
    assert Source("s3://bucket/trace/rank_0.log").name == "rank_0.log"
