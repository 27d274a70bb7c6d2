"""Work done by a forked copy of this process: the reader of a later part of a large log
(index/parts.py) and the writer of a large report's later half (runtime/halves.py). Plain
`os.fork` and a pipe: `multiprocessing` costs more to import than the copy takes to start."""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import weakref
from collections.abc import Callable
from typing import Any


class Forked:
    """A job running in a forked copy; `result()` waits for what it returned."""

    def __init__(self, job: Callable[[], Any], cleanup: Callable[[], None] | None = None) -> None:
        """Start `job` in a copy. `cleanup` runs in the copy when what it made will not be read:
        the job or its report failed, or this process is gone."""
        r, w = os.pipe()
        gc.freeze()  # the copy's collections then leave the shared heap's pages alone
        self.pid = os.fork()
        if self.pid == 0:  # the copy: do the job, report, and leave without running any cleanup
            os.close(r)
            try:
                data = pickle.dumps(("ok", job()), pickle.HIGHEST_PROTOCOL)
            except BaseException as e:  # this process does the job itself
                _clean(cleanup)
                data = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
            try:
                with os.fdopen(w, "wb") as out:
                    out.write(data)
            except OSError:
                _clean(cleanup)
            finally:
                os._exit(0)
        gc.unfreeze()
        os.close(w)
        self.conn = r
        # Whatever stops this process first (an error, ^C), the copy goes with it.
        self._final: weakref.finalize[Any, Any] = weakref.finalize(self, _stop, self.pid)

    def result(self) -> tuple[bool, Any]:
        """Wait for the copy: (True, what its job returned) or (False, why it failed)."""
        with os.fdopen(self.conn, "rb") as f:
            try:  # read as it comes: no copy of the whole message is held
                status, value = pickle.load(f)  # noqa: S301 - our own fork's, via its pipe
            except Exception:  # it died before reporting (killed, out of memory)
                status, value = "error", "the forked copy stopped before it reported"
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self._final.detach()
        return status == "ok", value


def _clean(cleanup: Callable[[], None] | None) -> None:
    if cleanup is not None:
        with contextlib.suppress(BaseException):
            cleanup()


def _stop(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)
