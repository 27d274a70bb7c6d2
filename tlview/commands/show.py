"""`tlview show`: a compile's artifacts listed, or one written whole; and their completions."""

from __future__ import annotations

import codecs
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tlview.commands.funnel import on_terminal, say  # say: text from the log, made inert
from tlview.inert import command
from tlview.logs import payload
from tlview.model import Payload
from tlview.runtime.output import stdout
from tlview.units import nbytes

if TYPE_CHECKING:
    from rich.console import Console


def list_artifacts(path: str, ref: str, named: list[tuple[str, Payload]]) -> None:
    """A table of the artifacts, as the report draws its tables: each one's name, log line,
    size, and what is odd about it; then how to write one."""
    from tlview.render.text.console import T, on_console, table
    from tlview.runtime.output import Output

    stdout()  # closed (`>&-`): one line, not a listing that goes nowhere
    title = f"Artifacts of compile {ref} ({len(named)}) in {path}"
    if not named:
        say(f"compile {ref} of {path}: no artifact")
        return
    odd = {id(p): _odd(p) for _, p in named}
    regions = any(p.subgraph is not None for _, p in named)  # regional inductor's
    cols = ("name", "log line", "lines", "bytes") + (("subgraph",) if regions else ())
    cols += ("note",) if any(odd.values()) else ()

    def draw(console: Console) -> None:
        t = table(title, *cols, console=console)
        for name, p in named:
            region = (p.subgraph or "",) if regions else ()
            cells = (name, p.line, f"{p.lines:,}", nbytes(p.bytes), *region, odd[id(p)])
            t.add_row(*(T(c) for c in cells[: len(cols)]))
        console.print(t)
        show = command("tlview", "show", path, "--compile-id", ref)
        name = "NAME (or NAME[SUBGRAPH])" if regions else "NAME"
        # One line, never wrapped: it is pasted.
        console.print(T(f"{show} {name} writes one whole"), no_wrap=True)

    on_console(Output(None), draw)


def _odd(p: Payload) -> str:
    return "no payload" if p.absent else "" if p.ok else "md5 mismatch: cut short or altered"


def write_artifact(name: str, p: Payload, raw: bool = False) -> None:
    """The artifact whole: its exact bytes into a file (`> out.py`) or with RAW; to a pipe or a
    terminal its text, control characters shown as escapes (a log is untrusted: nothing in it
    drives a terminal, also through `| less`). Text without such characters is the same bytes."""
    if p.absent:
        say(f"tlview: {name}: torch logged this record without a payload", err=True)
        return
    if not p.ok:
        say(
            f"tlview: {name}: its md5 does not match (cut short or altered): "
            "written as the log holds it",
            err=True,
        )
    data = p.data or b""
    if not (raw or _into_file()):
        text = data.decode("utf-8", errors="replace")
        # On a terminal, a line end after it, so the prompt starts on a line of its own.
        say(text, nl=on_terminal(sys.stdout) and not text.endswith("\n"))
        return
    out = stdout()
    out.write(data)
    out.flush()


def located(
    path: str, compile_id: str, name: str, progress: bool, launch: int | None = None
) -> tuple[Payload, Path | None]:
    """The artifact NAME names (no text kept), and the log file that holds it, when that is a
    file to read again (not standard input or a URL)."""
    import tlview
    from tlview.analyze.names import find_artifact, find_compile, plain_ref

    report = tlview.read(path, progress=progress, launch=launch)
    c = find_compile(report, plain_ref(compile_id))
    p = find_artifact(report, c, name)[1]
    log = next((lg for lg in report.logs if lg.name == c.log), None)
    f = Path(log.path) if log is not None else None
    return p, f if f is not None and f.is_file() else None


def stream_artifact(p: Payload, log: Path, raw: bool = False) -> bool:
    """The artifact written as `write_artifact` writes it, read from LOG a chunk at a time, so
    no more than a chunk of it (and no other payload) is held; False, having written nothing,
    when its bytes are not as torch logged them (torch wrote none, a damaged or repaired
    payload: the caller reads it whole, as before)."""
    if p.absent or not p.ok or p.md5 is None or payload.md5(log, p.line) != p.md5:
        return False
    if raw or _into_file():
        out = stdout()
        for chunk in payload.chunks(log, p.line):
            out.write(chunk)
        out.flush()
        return True
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
    last = ""
    for chunk in payload.chunks(log, p.line):  # each ends where a line does: inert alone
        text = decode.decode(chunk)
        if text:
            say(text, nl=False)
            last = text
    # On a terminal, a line end after it, so the prompt starts on a line of its own.
    if on_terminal(sys.stdout) and not last.endswith("\n"):
        say("")
    return True


def _into_file() -> bool:
    """Whether standard output is a regular file, not a pipe or a terminal."""
    try:
        return stat.S_ISREG(os.fstat(sys.stdout.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # closed, or not a file at all (a test's)
        return False


def complete_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The compile ids of the log being typed: shell completion of --compile-id."""
    from click.shell_completion import CompletionItem

    import tlview
    from tlview.analyze.names import Refs

    path = ctx.params.get("path") or _typed_path()
    if not path:
        return []
    try:
        report = tlview.read(path, jobs=1)
    except Exception:  # a completion never fails the shell; it offers nothing
        return []
    refs = Refs.of(report)
    names = dict.fromkeys(refs(c) for c in report.attempts)
    return [CompletionItem(w) for w in _offered(names, incomplete)]


def _typed_path() -> str | None:
    """The PATH typed before `--compile-id <TAB>`: click leaves the arguments unparsed while an
    option waits for its value, so it is read from the words the shell gave (COMP_WORDS)."""
    import os
    import shlex

    try:
        words = shlex.split(os.environ.get("COMP_WORDS", ""))
    except ValueError:
        return None
    if "show" not in words:
        return None
    rest = words[words.index("show") + 1 :]
    for k, w in enumerate(rest):
        if not w.startswith("-") and (k == 0 or rest[k - 1] != "--compile-id"):
            return w
    return None


def complete_artifacts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The artifact names of the compile being typed: shell completion of ARTIFACT."""
    from click.shell_completion import CompletionItem

    import tlview

    path, ref = ctx.params.get("path"), ctx.params.get("compile_id")
    if not path or not ref:
        return []
    try:
        named = tlview.artifacts(path, ref)
    except Exception:  # a completion never fails the shell; it offers nothing
        return []
    return [CompletionItem(w) for w in _offered((n for n, _ in named), incomplete)]


def _offered(names: Iterable[str], incomplete: str) -> list[str]:
    """Completions the shell may insert: each name quoted as one word (`shlex.quote`: the shell
    then runs no `$(...)` or `;` from a log), and none holding a character a terminal obeys or a
    line end (the completion protocol is one line a word, on the terminal's stdout)."""
    return [command(n) for n in names if n.startswith(incomplete) and n.isprintable()]
