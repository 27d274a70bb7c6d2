"""Hostile logs, third round (issue 34): the page identifies a payload by a hash tlview computes
of its text, never by the md5 the log claims: two payloads whose logged md5s collide each show
their own text."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted import compile_of, record
from test_html import page_payloads

import tlview
from tlview.render.html import budget
from tlview.render.html import report as html


def artifact(name: str, text: str, cid: tuple[int, int]) -> bytes:
    return record("artifact", {"name": name, "encoding": "string"}, cid, payload=text)


def test_equal_logged_md5s_show_each_payloads_own_text(tmp_path: Path) -> None:
    first, second = "a = 1\n" * 1000, "b = 2\n" * 1000  # packed: over the page's 2 KiB of text
    log = tmp_path / "a.log"
    one = [("L['x']", [4], "torch.float32")]
    log.write_bytes(
        compile_of((0, 0), one)
        + artifact("inductor_output_code", first, (0, 0))
        + compile_of((1, 0), one)
        + artifact("inductor_output_code", second, (1, 0))
        + compile_of((2, 0), one)
        + artifact("inductor_output_code", first, (2, 0))
    )
    report = tlview.read(str(log), keep=budget.page_keep(False))
    codes = [p for c in report.compiles for p in c.artifacts if p.kind == "inductor_output_code"]
    assert [p.ok for p in codes] == [True] * 3
    codes[1].md5 = codes[0].md5  # a collision: as if the two texts had one md5
    shown = page_payloads(html.render(report))
    texts = sorted(t for t in shown.values() if t and t.startswith(("a = 1", "b = 2")))
    assert texts == sorted([first, second, first])  # the third shares the first's packed text
    page = html.render(report)
    assert page.count("data-same=") == 1


@pytest.mark.parametrize("lib", ["isal", "zlib"])
def test_packed_payloads_are_plain_gzip_with_either_compressor(
    lib: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ISA-L packs the page's payloads where it is installed, zlib where not: either way a
    standard gzip stream, with no timestamp (the same page for the same log)."""
    import base64
    import gzip
    import zlib

    from conftest import only_log

    from tlview.render.html import payloads

    assert payloads.DEFLATE.__name__ == "isal.isal_zlib"  # a dependency: installed here
    if lib == "zlib":
        monkeypatch.setattr(payloads, "DEFLATE", zlib)
        monkeypatch.setattr(payloads, "LEVEL", payloads.GZIP_LEVEL)
    log = only_log("transformer_inductor")
    data = tlview.artifact(log, "0/0", "inductor_output_code").data
    assert data is not None
    code = data.decode()
    assert len(code) > 10_000
    packed = payloads.pack(code)
    raw = base64.b64decode(packed)
    assert raw[:4] == b"\x1f\x8b\x08\x00" and raw[4:8] == bytes(4)  # gzip, mtime 0
    assert gzip.decompress(raw).decode() == code
    assert payloads.pack(code) == packed
    assert len(raw) < len(code) // 4
