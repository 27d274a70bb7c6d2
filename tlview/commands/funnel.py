"""Every failure of a command as one line on stderr with its exit status, and the process's end."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys
import warnings
from typing import TYPE_CHECKING, Any

import click

from tlview.errors import (
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_STRICT,
    EXIT_TERMINATED,
    NO_ROOM,
    Terminated,
    TlviewError,
)
from tlview.inert import controls
from tlview.render.clean import clean
from tlview.runtime.output import forget_inputs

if TYPE_CHECKING:
    from types import FrameType
    from typing import IO, TextIO

# click >= 8.2: `tlview` alone prints the help (exit 2); that is not a one-line error.
_HELP: tuple[type[Exception], ...] = tuple(
    [c for c in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if c is not None]
)


class Main(click.Group):
    """Routes every TlviewError and click usage error to one stderr line and its exit status."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        # The group's own options (`tlview --bogus`) are parsed here, before invoke.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except _HELP:
            raise
        except click.ClickException as e:
            say(usage_line(e), err=True)
            raise click.exceptions.Exit(e.exit_code) from None

    def invoke(self, ctx: click.Context) -> Any:
        # A run builds millions of small objects and leaves next to no cycles: look for cycles
        # 300 times less often (as mypy does), about a tenth off a large report's time.
        was = gc.get_threshold()
        gc.set_threshold(200_000, 30, 30)
        shown, warnings.showwarning = warnings.showwarning, _warned
        forget_inputs()  # the logs this command reads are the ones no output may replace
        try:
            return super().invoke(ctx)
        except TlviewError as e:
            say(f"tlview: {e.message}", err=True)
            ctx.exit(e.exit_code)
        except BrokenPipeError:
            # The reader went away (`| head`): not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except KeyboardInterrupt:
            click.echo("tlview: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Terminated:
            click.echo("tlview: terminated", err=True)
            ctx.exit(EXIT_TERMINATED)
        except _HELP:
            raise
        except click.ClickException as e:  # a command's options: unknown, missing, invalid
            say(usage_line(e), err=True)
            ctx.exit(e.exit_code)
        except (click.exceptions.Exit, click.Abort):
            raise
        except OSError as e:
            if e.errno in NO_ROOM:
                # A full disk or quota, a read-only file system: the output or a temp file.
                where = f"{e.filename}: " if e.filename else ""
                say(f"tlview: {where}cannot write: {e.strerror or e}", err=True)
                ctx.exit(EXIT_REFUSED)
            _bug(ctx, e)
        except Exception as e:
            _bug(ctx, e)
        finally:
            gc.set_threshold(*was)
            warnings.showwarning = shown


def usage_line(e: click.ClickException) -> str:
    """click's usage error as one line: `tlview: report: No such option: --bogus (see ...)`."""
    ctx = getattr(e, "ctx", None)
    names: list[str] = []
    while isinstance(ctx, click.Context) and ctx.parent is not None:  # the root: `tlview`
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    where = "".join(f"{n}: " for n in names)
    hint = (
        f" (see 'tlview {' '.join([*names, '--help'])}')" if isinstance(e, click.UsageError) else ""
    )
    return f"tlview: {where}{' '.join(e.format_message().split())}{hint}"


def _bug(ctx: click.Context, e: Exception) -> None:
    """An error tlview did not expect: one line, and TLVIEW_DEBUG=1 shows the traceback."""
    if os.environ.get("TLVIEW_DEBUG"):
        raise e
    say(
        f"tlview: internal error: {type(e).__name__}: {e} "
        "(a bug in tlview; rerun with TLVIEW_DEBUG=1 for the traceback)",
        err=True,
    )
    ctx.exit(EXIT_BUG)


def say(text: object, err: bool = False, nl: bool = True, command: bool = False) -> None:
    """One line of a command's own output (stdout, or stderr with `err`): whatever of a log it
    quotes (names, sources, reasons, notes) made inert by render/clean.py, tty or pipe. With
    `command`, a workflow command tlview writes itself (`--annotations github`), whose log text
    render/annotate.py made inert field by field: its own leading `::` is kept."""
    click.echo(controls(str(text)) if command else clean(text), err=err, nl=nl)


def _warned(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A Python warning (torch warns while rebuilding tensors a log describes) as one inert text."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        (file or sys.stderr).write(clean(text))


def on_terminal(stream: IO[str] | None) -> bool:
    """Whether a standard stream is a terminal; False when it was closed (`2>&-`: None)."""
    return stream is not None and stream.isatty()


def gate(failures: list[str]) -> None:
    """Print one line per failed --fail-on check and exit EXIT_STRICT if there is any."""
    for f in failures:
        say(f"tlview: fail-on {f}", err=True)
    if failures:
        raise click.exceptions.Exit(EXIT_STRICT)


_LEFT: list[object] | None = None  # what `run` lets the process end with, unfreed


def outlive(obj: object) -> None:
    """Keep obj to the end of the process when `run` ends it without freeing the heap: freeing
    a large report as its command returns costs milliseconds for nothing."""
    if _LEFT is not None:
        _LEFT.append(obj)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def run(main: click.Group) -> None:
    """Run MAIN, then exit without freeing the heap object by object (a large report leaves
    millions of objects; freeing them is 5-8% of its time)."""
    global _LEFT
    _LEFT = []
    # SIGTERM (a CI job's timeout, `kill`) ends a run as ^C does: its temp files are removed.
    # Forked copies inherit this: one stopped so removes what it made.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()  # click ends every run with SystemExit
        code: int | str | None = 0
    except SystemExit as e:
        code = e.code
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleanup below is short: let it finish
    atexit._run_exitfuncs()  # what a normal exit still does: temp (spill) files removed
    if isinstance(code, str):
        say(code, err=True)
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away (`| head`) or a closed stream: nothing more to say.
        with contextlib.suppress(OSError, ValueError, AttributeError):  # None: closed at start
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
