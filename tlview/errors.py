"""One exception type for every user-facing failure, so the CLI has a single error funnel."""

from __future__ import annotations

import errno

# Exit statuses, documented in the README ("Exit status").
EXIT_OK = 0
EXIT_NO_TRACE = 1  # nothing readable: missing path, empty or binary file, no TORCH_TRACE record
EXIT_USAGE = 2  # bad options (click's own status)
EXIT_STRICT = 3  # --strict saw bad lines, or a --fail-on limit was exceeded
EXIT_REFUSED = 4  # a request tlview will not carry out (too large a rebuild, existing output, ...)
# Why a write fails on a machine, not in tlview (exit EXIT_REFUSED): no room, a read-only disk.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
EXIT_NEEDS_EXTRA = 5  # the command needs an optional dependency: torch, or Dask and fsspec
EXIT_NO_REPRO = 6  # repro: a graph gave no repro that runs here (the reason is printed)
EXIT_BUG = 70  # an error tlview did not expect: a bug (TLVIEW_DEBUG=1 shows the traceback)
EXIT_INTERRUPTED = 130  # ^C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM, as a CI job's timeout sends (128 + SIGTERM)


class TlviewError(Exception):
    """A failure the user can act on: printed as one line on stderr, never as a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_NO_TRACE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class Terminated(BaseException):
    """SIGTERM, raised where tlview is (as ^C raises KeyboardInterrupt), so that its exit
    handlers run and its temp files go; not an Exception, so no `except Exception` stops it."""
