"""`tlview show` on hostile logs: it keeps only the payload it writes, never every payload of
its kind, and its listing pads no row to one long name."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted import compile_of
from damage import EXIT_OK, assert_clean_exit, run


def test_listings_pad_no_row_to_a_long_cell(tmp_path: Path) -> None:
    """`show`'s listing of a compile with one artifact named by 100,000 characters: every other
    row is padded to at most COLUMN, so the output is about the log's size, not rows x name."""
    from crafted import artifact

    from tlview.commands.listing import COLUMN

    long = "n" * 100_000
    log = tmp_path / "a.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(
        one + artifact(long, "x") + b"".join(artifact(f"a{i}", "y") for i in range(200))
    )
    res = run("show", str(log), "--compile-id", "0/0")
    assert_clean_exit(res, EXIT_OK, "show")
    lines = res.stdout.splitlines()
    assert sum(len(ln) for ln in lines) < 100_000 + 200 * (COLUMN + 40)
    assert any(long in ln for ln in lines)  # the long name whole, on its own row
    assert max(len(ln) for ln in lines if "a17" in ln) < COLUMN + 40


def test_show_keeps_only_the_payload_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing one artifact keeps its bytes alone, not every payload of its kind."""
    from crafted import artifact

    import tlview

    log = tmp_path / "a.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(one + b"".join(artifact("inductor_output_code", f"code {i}") for i in range(5)))
    p = tlview.artifact(str(log), "0/0", "inductor_output_code#3")
    assert p.data == b"code 2"
    report = tlview.read(str(log), keep=_keep_for(p.line))
    kept = [q for c in report.compiles for q in c.artifacts if q.data is not None]
    assert [q.data for q in kept] == [b"code 2"]


def _keep_for(line: int):  # type: ignore[no-untyped-def]
    from tlview.index.keep import Keep

    whole = 1 << 62
    return Keep(whole, whole, frozenset({"inductor_output_code"}), "0/0", exact=True, line=line)
