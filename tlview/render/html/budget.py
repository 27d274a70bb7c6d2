"""The page's payload budget, apart from the page: reading keeps texts by it before the page's
renderer (Jinja and all) is imported."""

from __future__ import annotations

from tlview.index.keep import Keep
from tlview.render import Options

KiB = 1024
MiB = 1024 * KiB
# The page budget (README "HTML report"): payload text kept per payload and over the whole page.
PAYLOAD_BYTES = 64 * KiB
PAGE_PAYLOAD_BYTES = 3 * MiB
_FULL = 1 << 62


def page_keep(full: bool, compile_key: str | None = None) -> Keep:
    """Payload text to keep while reading: the page budget per log, everything with --full, or
    every text of one compile (--compile-id: its key, without the log's name)."""
    if compile_key is not None:
        return Keep(payload_bytes=_FULL, total_bytes=_FULL, compile=compile_key)
    if full:
        return Keep(payload_bytes=_FULL, total_bytes=_FULL)
    return Keep(payload_bytes=PAYLOAD_BYTES, total_bytes=PAGE_PAYLOAD_BYTES)


def keep(opts: Options) -> Keep:
    """What the page needs kept while reading: with --compile-id, every text of that compile."""
    ref = opts.compile_id
    return page_keep(opts.full, None if ref is None else ref.rpartition(":")[2])
