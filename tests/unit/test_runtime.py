"""runtime/: jobs mapped in process or on a pool give the same results in the items' order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tlview.errors import EXIT_REFUSED, TlviewError
from tlview.runtime.output import Output, written_by_tlview
from tlview.runtime.pool import map_each, map_pool


def square(n: int, progress: Callable[[int], None] | None) -> int:
    return n * n


def test_a_pool_gives_the_results_of_one_process_in_order() -> None:
    items = list(range(9))
    assert map_pool(square, items, 2) == map_each(square, items) == [n * n for n in items]


def test_output_replaces_only_what_tlview_wrote(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "r.json", tmp_path / "notes.json"
    with Output(str(mine)).open() as f:
        f.write(b'{"format": "tlview.report/1"}')
    assert written_by_tlview(mine)
    with Output(str(mine)).open() as f:  # ours: replaced
        f.write(b'{"format": "tlview.report/1", "again": 1}')
    theirs.write_text("{}")
    with pytest.raises(TlviewError) as e, Output(str(theirs)).open():
        pass
    assert e.value.exit_code == EXIT_REFUSED and theirs.read_text() == "{}"
    assert Output(str(theirs), force=True).path == str(theirs) and Output().is_stdout
