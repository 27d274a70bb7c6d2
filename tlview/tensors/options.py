"""What a real rebuild is asked for: its modes, its memory limit (`--max-bytes`), its options."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from tlview.units import parse_bytes  # noqa: F401  (--max-bytes: its sizes)

MODES = ("random", "zeros", "meta")


_GIB = 1 << 30


def _default_max_bytes() -> int:
    """Half of this machine's memory (4 GiB when it cannot be read): rebuilt tensors must fit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 * _GIB
    return max(_GIB, total // 2) if total > 0 else 4 * _GIB


DEFAULT_MAX_BYTES = _default_max_bytes()


@dataclass(frozen=True, slots=True)
class RebuildOptions:
    """One rebuild's options, made once from the keyword arguments of the API and `tlview inputs`."""

    mode: str = "random"  # one of MODES: random values per dtype, zeros, or meta (no memory)
    seed: int = 0  # of the random values: the same seed gives the same tensors
    device: str | None = None  # build on this device; None: the logged one when present, else cpu
    max_bytes: int = DEFAULT_MAX_BYTES  # refuse a rebuild whose real tensors need more memory
    allow_import: Sequence[str] = ()  # modules whose tensor subclasses may be imported (runs code)
