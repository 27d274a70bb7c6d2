"""`tlview show` on hostile logs: it keeps only the payload it writes, never every payload of
its kind, and its listing pads no row to one long name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from crafted import compile_of
from damage import EXIT_OK, assert_clean_exit, run


def test_listings_pad_no_row_to_a_long_cell(tmp_path: Path) -> None:
    """`show`'s listing of a compile with one artifact named by 100,000 characters: its row cut
    to the width, every row at most as wide as the terminal, the name whole once under the
    table, so the output is about the log's size, not rows x name."""
    from crafted import artifact

    width = int(os.environ["COLUMNS"])
    long = "n" * 100_000
    log = tmp_path / "a.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(
        one + artifact(long, "x") + b"".join(artifact(f"a{i}", "y") for i in range(200))
    )
    res = run("show", str(log), "--compile-id", "0/0")
    assert_clean_exit(res, EXIT_OK, "show")
    lines = res.stdout.splitlines()
    assert sum(len(ln) for ln in lines) < 100_000 + 210 * width
    assert sum(ln.count(long) for ln in lines) == 1  # the long name whole, once
    assert max(len(ln) for ln in lines if long not in ln) <= width


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
    kept = [q for c in report.attempts for q in c.artifacts if q.data is not None]
    assert [q.data for q in kept] == [b"code 2"]


def _keep_for(line: int):  # type: ignore[no-untyped-def]
    from tlview.index.keep import Keep

    whole = 1 << 62
    return Keep(whole, whole, frozenset({"inductor_output_code"}), "0/0", exact=True, line=line)


CODE = "    buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)  # generated code\n"


def big_payloads(tmp: Path, n: int, size: int) -> tuple[Path, list[bytes]]:
    """A compile with N inductor_output_code payloads of about SIZE bytes each, each its own."""
    from crafted import artifact

    texts = [(CODE.replace("buf0", f"b{i}") * (size // len(CODE))).rstrip("\n") for i in range(n)]
    log = tmp / "big.log"
    one = compile_of((0, 0), [("L['x']", [4], "torch.float32")])
    log.write_bytes(one + b"".join(artifact("inductor_output_code", t) for t in texts))
    return log, [t.encode() for t in texts]


def test_a_payload_is_read_a_chunk_at_a_time_wherever_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """logs/payload.py finds the record's line across block boundaries (blocks of 4 KiB here)
    and gives back the payload's exact bytes, in chunks that end where its lines do."""
    import tlview
    from tlview.logs import payload

    monkeypatch.setattr(payload, "BLOCK", 4096)
    log, texts = big_payloads(tmp_path, 5, 20_000)
    names = [p for n, p in tlview.artifacts(str(log), "0/0") if n.startswith("inductor")]
    for p, text in zip(names, texts, strict=True):
        got = list(payload.chunks(log, p.line))
        assert b"".join(got) == text and len(got) > 3
        assert all(c.endswith(b"generated code") for c in got)
        assert payload.md5(log, p.line) == p.md5


@pytest.mark.slow  # eight 8 MiB payloads, read under tracemalloc
def test_show_streams_the_one_payload_it_writes(tmp_path: Path) -> None:
    """`show` of the 4th of eight 8 MiB payloads: written exactly, holding at most about three
    copies of one record (while the log is read to find it), never the payload whole again
    beside the others (before: 5 copies; the issue's eight 60 MiB ones peaked at 408 MB)."""
    import tracemalloc

    size = 8 << 20
    log, texts = big_payloads(tmp_path, 8, size)
    run("show", str(log), "--compile-id", "0/0")  # imports outside the count
    tracemalloc.start()
    try:
        res = run("show", str(log), "--compile-id", "0/0", "inductor_output_code#4")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_clean_exit(res, EXIT_OK, "show")
    assert res.stdout_bytes == texts[3]
    assert peak < 4 * size, peak / size
