"""The page packs its payloads as standard gzip, with ISA-L where it installs, else zlib."""

from __future__ import annotations

import base64
import gzip
import zlib

import pytest
from helpers import only_log

import tlview
from tlview.render.html import payloads


@pytest.mark.parametrize("lib", ["isal", "zlib"])
def test_packed_payloads_are_plain_gzip_with_either_compressor(
    lib: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ISA-L packs the page's payloads where it is installed, zlib where not: either way a
    standard gzip stream, with no timestamp (the same page for the same log)."""
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
