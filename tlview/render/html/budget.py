"""The page's payload budget, apart from the page: reading keeps texts by it before the page's
renderer (Jinja and all) is imported."""

from __future__ import annotations

from tlview.index.keep import Keep
from tlview.render import Options

KiB = 1024
MiB = 1024 * KiB
# The page budget (docs/html.md): payload text shown per payload and on the whole page. The page
# holds payloads gzip-compressed (about a quarter of their size, in base64), so 24 MiB of text
# make about 6 MiB of page.
PAYLOAD_BYTES = 8 * MiB
PAGE_PAYLOAD_BYTES = 24 * MiB
# What reading keeps per log for the page to choose from (failures, recompiles, the slowest
# compiles, inductor's code first): more than one page holds, so that a late compile that
# failed still finds its texts kept. Kept texts past a few hundred compiles wait on disk.
READ_BYTES = 64 * MiB
_FULL = 1 << 62


def page_keep(full: bool, compile_key: str | None = None) -> Keep:
    """Payload text to keep while reading: the page budget per log, everything with --full, or
    every text of one compile (--compile-id: its key, without the log's name)."""
    if compile_key is not None:
        return Keep(payload_bytes=_FULL, total_bytes=_FULL, compile=compile_key)
    if full:
        return Keep(payload_bytes=_FULL, total_bytes=_FULL)
    return Keep(payload_bytes=PAYLOAD_BYTES, total_bytes=READ_BYTES)


def keep(opts: Options) -> Keep:
    """What the page needs kept while reading: with --compile-id, every text of that compile."""
    ref = opts.compile_id
    return page_keep(opts.full, None if ref is None else ref.rpartition(":")[2])
