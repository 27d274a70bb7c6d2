"""The one Jinja environment over templates/: HTML pages autoescaped, the repro script not."""

from __future__ import annotations

import contextlib
import os
import pickle
from functools import lru_cache
from pathlib import Path

import jinja2

from tlview.inert import command


def template_dirs() -> list[Path]:
    """Where the templates are: inside the installed package, or at the top of a source checkout."""
    here = Path(__file__).resolve().parents[1]  # the tlview package
    candidates = [here / "templates", here.parent / "templates"]
    return [d for d in candidates if (d / "report.html.j2").is_file()]


class _Cache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs: compiling the page's template costs more than drawing it."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            # A damaged file (the checksum jinja pickles before the code): compile afresh.
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):  # a read-only or full disk: compiled again next time
            super().dump_bytecode(bucket)


def _cache() -> jinja2.BytecodeCache | None:
    """Jinja's per-user cache directory (owner-only), unless TLVIEW_NO_CACHE is set or it is unsafe."""
    if os.environ.get("TLVIEW_NO_CACHE"):
        return None
    try:
        return _Cache()
    except (OSError, RuntimeError):  # no temp directory, or one another user owns
        return None


def _escaped(name: str | None) -> bool:
    """HTML is autoescaped; a Python template (`.py.j2`) escapes every value with its `py` filter."""
    return name is None or not name.endswith(".py.j2")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The environment every template is rendered in; its trailing newlines are the caller's."""
    dirs = template_dirs()
    if not dirs:
        raise RuntimeError("tlview's templates are missing from this installation")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
        autoescape=_escaped,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        bytecode_cache=_cache(),
    )
    env.globals["command"] = command  # a suggested command: each word from a log quoted
    return env
