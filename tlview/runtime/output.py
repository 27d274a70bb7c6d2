"""Write output files safely: to a temporary name first, never over a file tlview did not write."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

from tlview.errors import EXIT_REFUSED, NO_ROOM, TlviewError
from tlview.runtime.leftovers import prefix, sweep

MARKER = b"tlview"  # every file tlview writes names it in its first bytes, as one of these:
# Each at the very start of the file, as tlview writes it: a log that holds one of these texts
# (in a payload, in its first 4 KB) is no file of tlview's.
SIGNATURE = re.compile(
    rb"# written by tlview \d"  # text reports
    rb"|<!-- written by tlview \d"  # Markdown
    rb'|<\?xml version="1\.0" encoding="utf-8"\?>\n<!-- written by tlview \d'  # JUnit XML
    rb'|\{\s*"format": ?"tlview\.'  # JSON: report, diff, repro summary
    rb'|<!doctype html>\s*<html[^>]*>\s*<head>\s*<meta charset="utf-8">\s*'
    rb'<meta name="generator" content="tlview \d'  # HTML
    rb'|\{"otherData":\{"generator":"tlview \d'  # Perfetto traces
    rb'|"""Re-run one graph [^\n]{0,120}\(written by tlview\)'  # repro scripts
    rb"|PK\x03\x04.{0,4000}?written_by.{1,16}tlview \d",  # torch.save files (inputs, repro)
    re.S,
)
_INPUTS: set[tuple[int, int]] = set()  # (device, inode) of each log this run reads


def written_by_tlview(path: Path) -> bool:
    """Whether tlview wrote PATH: its signature at the start, not just the word."""
    try:
        with path.open("rb") as f:
            return SIGNATURE.match(f.read(4096)) is not None
    except OSError:
        return False


def reading(path: str | Path) -> None:
    """Say that this run reads PATH: no output of the run is written over it, --force or not."""
    with contextlib.suppress(OSError, ValueError):
        st = os.stat(path)
        _INPUTS.add((st.st_dev, st.st_ino))


def forget_inputs() -> None:
    """A new run (a command) reads its own logs."""
    _INPUTS.clear()


def _is_input(path: Path) -> bool:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return (st.st_dev, st.st_ino) in _INPUTS


@contextlib.contextmanager
def _named(what: str) -> Iterator[None]:
    """A full disk or a read-only one while writing WHAT: one line naming it (exit 4)."""
    try:
        yield
    except OSError as e:
        if e.errno not in NO_ROOM:
            raise
        raise TlviewError(f"{what}: cannot write: {e.strerror or e}", EXIT_REFUSED) from None


def stdout() -> IO[bytes]:
    """Standard output, as bytes; one line and exit 4 when it was closed (`tlview ... >&-`)."""
    if sys.stdout is None:
        raise TlviewError(
            "standard output is closed: give a file to write to with -o", EXIT_REFUSED
        )
    return sys.stdout.buffer


@contextlib.contextmanager
def output(path: str | None, force: bool = False) -> Iterator[IO[bytes]]:
    """A binary stream for PATH (stdout for None or '-'), renamed into place only on success."""
    if path is None or path == "-":
        out = stdout()
        with _named("standard output"):
            yield out
            out.flush()
        return
    dest = Path(path)
    if _is_input(dest):  # also through a link, or another name of the same file
        raise TlviewError(
            f"{dest}: is a log this run reads; tlview never writes over its input", EXIT_REFUSED
        )
    if dest.is_dir():
        raise TlviewError(f"{dest}: is a directory; give a file name with -o", EXIT_REFUSED)
    if dest.exists() and not dest.is_file():
        # A device or pipe the user named (/dev/null, a FIFO): write straight to it.
        with _named(str(dest)), dest.open("wb") as f:
            yield f
        return
    if dest.is_symlink() and not force:
        # tlview writes no link: replacing one (or writing through it to the file it names, a
        # file tlview may never have been asked to touch) is the user's call.
        raise TlviewError(
            f"{dest}: is a link (to {os.readlink(dest)}), which tlview did not write; "
            "use --force to replace the link (the file it names is left alone)",
            EXIT_REFUSED,
        )
    if dest.exists() and not force and not written_by_tlview(dest):
        raise TlviewError(
            f"{dest}: exists and was not written by tlview; use --force to replace it", EXIT_REFUSED
        )
    parent = dest.parent if str(dest.parent) else Path(".")
    start = f".{dest.name}."
    sweep(str(parent), start)  # a temp file of a run killed while it wrote this one
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix(start), suffix=".tmp", dir=parent)
    except OSError as e:
        raise TlviewError(f"{dest}: cannot write: {e.strerror or e}", EXIT_REFUSED) from None
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        with _named(str(dest)), os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Output(NamedTuple):
    """Where a command's output goes: a file (written safely, as `output`) or standard output."""

    path: str | None = None  # None or "-": standard output
    force: bool = False  # replace a file tlview did not write

    @property
    def is_stdout(self) -> bool:
        return self.path is None or self.path == "-"

    def open(self) -> contextlib.AbstractContextManager[IO[bytes]]:
        return output(self.path, self.force)
