"""The command line: `tlview report`, `tlview inputs`, ...; every failure is one line on stderr."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import click

from tlview import __version__
from tlview.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_TRACE,
    EXIT_REFUSED,
    EXIT_STRICT,
    EXIT_TERMINATED,
    NO_ROOM,
    Terminated,
    TlviewError,
)

FORMATS = ("text", "json", "html", "perfetto")
# Importing the page's renderer (jinja2, render/page.py) and the terminal's (rich) on this
# machine, with both cores busy; torch alone, and torch with dynamo (what FakeTensorMode needs).
PAGE_IMPORT_NS, TEXT_IMPORT_NS = 25e6, 20e6
TORCH_IMPORT_NS, FAKE_IMPORT_NS = 1.0e9, 1.9e9
# Options of every command that writes one report.
output_option = click.option(
    "-o", "--output", "output", type=click.Path(), help="Write to this file (default: stdout)."
)
latest_option = click.option(
    "--latest",
    is_flag=True,
    help="PATH is a directory: read only its newest log (as tlparse --latest does).",
)
force_option = click.option(
    "--force", is_flag=True, help="Replace an existing output file that tlview did not write."
)


class Main(click.Group):
    """Routes every TlviewError to one stderr line and its exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        # A run builds millions of small objects and leaves next to no cycles: look for cycles
        # 300 times less often (as mypy does), about a tenth off a large report's time.
        was = gc.get_threshold()
        gc.set_threshold(200_000, 30, 30)
        try:
            return super().invoke(ctx)
        except TlviewError as e:
            click.echo(f"tlview: {_clean(e.message)}", err=True)
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
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except OSError as e:
            if e.errno in NO_ROOM:
                # A full disk or quota, a read-only file system: the output or a temp file.
                where = f"{e.filename}: " if e.filename else ""
                click.echo(f"tlview: {_clean(where)}cannot write: {e.strerror or e}", err=True)
                ctx.exit(EXIT_REFUSED)
            _bug(ctx, e)
        except Exception as e:
            _bug(ctx, e)
        finally:
            gc.set_threshold(*was)


def _bug(ctx: click.Context, e: Exception) -> None:
    """An error tlview did not expect: one line, and TLVIEW_DEBUG=1 shows the traceback."""
    if os.environ.get("TLVIEW_DEBUG"):
        raise e
    click.echo(
        f"tlview: internal error: {type(e).__name__}: {_clean(e)} "
        "(a bug in tlview; rerun with TLVIEW_DEBUG=1 for the traceback)",
        err=True,
    )
    ctx.exit(70)


def _format_for(fmt: str | None, output: str | None) -> str:
    """--format, else what the output file's name asks for (report.html, diff.json), else
    text: `-o report.html` alone writes the page, not the terminal report in a .html file."""
    if fmt is not None:
        return fmt
    name = (output or "").lower()
    if name.endswith((".html", ".htm")):
        return "html"
    if name.endswith(".json"):
        return "json"
    return "text"


def _on_terminal(stream: Any) -> bool:
    """Whether a standard stream is a terminal; False when it was closed (`2>&-`: None)."""
    return stream is not None and stream.isatty()


def _clean(text: object) -> str:
    """A message that may quote a log or a file name, safe for a terminal."""
    from tlview.render.text import clean

    return clean(text)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tlview")
def main() -> None:
    """Read PyTorch TORCH_TRACE logs: compiles, graph breaks, recompiles, failures, input tensors."""


def _progress_reader(path: str) -> Any:
    """A rich progress bar on stderr for long reads on a terminal, else None."""
    if not _on_terminal(sys.stderr):
        return None
    from tlview.read.progress import bar_for

    return bar_for(path)


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="text for the terminal, json for machines, html for a page, perfetto for a trace "
    "(default: what -o's name ends with, .html or .json, else text).",
)
@output_option
@click.option(
    "--compile-id",
    "compile_id",
    help="Show one compile in full, e.g. 0/1, 0/0_1 or 0/0@2 (LOG:ID or rankN:ID with several logs); "
    "JSON and HTML: that compile alone.",
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Show more: every compile's inputs, symbols, graphs, metrics.",
)
@click.option("-q", "--brief", is_flag=True, help="Show less: the header and the compile table.")
@click.option(
    "--strict", is_flag=True, help=f"Exit {EXIT_STRICT} if any line of the log was bad (for CI)."
)
@force_option
@click.option(
    "--full", is_flag=True, help="HTML: keep every payload whole, beyond the page budget."
)
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="CHECKS",
    help=f"Exit {EXIT_STRICT} past these limits, e.g. graph-breaks:0,recompiles:3,compile-time:60s.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Processes reading the logs of a directory (default: the number of cores).",
)
@click.option(
    "--scheduler",
    envvar="DASK_SCHEDULER_ADDRESS",
    metavar="ADDRESS",
    help="Read the logs on this Dask cluster, e.g. tcp://host:8786 (or $DASK_SCHEDULER_ADDRESS).",
)
@latest_option
def report(
    path: str,
    fmt: str | None,
    output: str | None,
    compile_id: str | None,
    verbose: int,
    brief: bool,
    strict: bool,
    force: bool,
    full: bool,
    fail_on: tuple[str, ...],
    jobs: int | None,
    scheduler: str | None,
    latest: bool,
) -> None:
    """Report what a TORCH_TRACE log (file, .gz or directory) says about each compile."""
    fmt = _format_for(fmt, output)
    path = _newest(path) if latest else path
    source = path
    if fmt == "perfetto":  # the trace reads the log again: a pipe is read once, into a file
        source = click.get_current_context().with_resource(_rereadable(path))
    from tlview.load import load
    from tlview.runtime import cores
    from tlview.runtime.output import output as open_output

    checks = []
    if fail_on:  # the gate imports the diff machinery: only for a run that asks for it
        from tlview.analyze.gate import parse_checks as parse_checks

        checks = parse_checks(fail_on, against_base=False)
    keep = None
    meanwhile: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if fmt == "html":
        from tlview.render.html.kept import page_keep

        # One compile (--compile-id ID or LOG:ID): every text of it, none of the others.
        keep = page_keep(full, None if compile_id is None else compile_id.rpartition(":")[2])
        # The page's renderer (Jinja and all) is imported while a second reader still reads.
        meanwhile = cores.meanwhile(_import_page, PAGE_IMPORT_NS)
    elif fmt == "text":  # rich, likewise
        meanwhile = cores.meanwhile(_import_text, TEXT_IMPORT_NS)
    with meanwhile:
        rep = load(
            source, keep, progress=_on_terminal(sys.stderr), jobs=jobs, scheduler=scheduler or None
        )
    _outlive(rep)
    if compile_id is not None:
        _check_compile_id(rep, compile_id)
    figures = None  # the report's figures, as its renderer computed them on its one pass
    if fmt == "json":
        from tlview.render import json as json_render

        with open_output(output, force) as out:
            figures = json_render.write(rep, out, only=_picked(rep, compile_id))
    elif fmt == "html":
        from tlview.render import html as html_render

        with open_output(output, force) as out:
            only = None if compile_id is None else (compile_id, _picked(rep, compile_id))
            figures = html_render.write(rep, out, full=full, only=only)
    elif fmt == "perfetto":
        from tlview.render import perfetto

        with open_output(output, force) as out:
            perfetto.write(rep, out, only=_picked(rep, compile_id))
    else:
        figures = _text(rep, output, force, compile_id, -1 if brief else verbose)
    if output not in (None, "-"):
        click.echo(f"tlview: wrote {output}", err=True)
    bad = sum(log.bad_count for log in rep.logs)
    if checks:
        from tlview.analyze.gate import check_report
        from tlview.analyze.summary import overview

        _gate(check_report(figures or overview(rep), checks))
    if strict and bad:
        raise TlviewError(f"{path}: {bad} bad line(s) (--strict)", EXIT_STRICT)


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--compile-id",
    "compile_id",
    help="Only this compile, e.g. 0/1 (LOG:ID or rankN:ID with several logs).",
)
@click.option(
    "--mode",
    type=click.Choice(("random", "zeros", "meta")),
    default="random",
    show_default=True,
    help="Values of the tensors --emit writes: random per dtype, zeros, or meta (no memory).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random values.")
@click.option(
    "--device", help="Build on this device (default: the logged device when present, else cpu)."
)
@click.option(
    "--max-bytes",
    "max_bytes",
    metavar="SIZE",
    help="Refuse to build more real tensor memory than this, e.g. 8G (default: half of RAM).",
)
@click.option(
    "--allow-import",
    "allow_import",
    multiple=True,
    metavar="MODULE",
    help="Import tensor subclasses from MODULE (runs its code; torch's own types need none).",
)
@click.option(
    "--emit",
    type=click.Path(),
    metavar="FILE",
    help="Write the rebuilt inputs with torch.save (format tlview.inputs/1).",
)
@click.option("--force", is_flag=True, help="Replace an existing FILE that tlview did not write.")
@latest_option
def inputs(
    path: str,
    compile_id: str | None,
    mode: str,
    seed: int,
    device: str | None,
    max_bytes: str | None,
    allow_import: tuple[str, ...],
    emit: str | None,
    force: bool,
    latest: bool,
) -> None:
    """List each compile's input tensors and rebuild them as fake, meta, zeros or random tensors."""
    _quiet_torch()
    path = _newest(path) if latest else path
    from tlview.analyze.names import compiles_with_inputs
    from tlview.load import load
    from tlview.rebuild import DEFAULT_MAX_BYTES, parse_bytes
    from tlview.runtime import cores

    limit = DEFAULT_MAX_BYTES if max_bytes is None else parse_bytes(max_bytes, "--max-bytes")
    # torch is imported while a second reader still reads a large log (and reads more of it):
    # the listing's fake column needs dynamo's too, which FakeTensorMode imports.
    job, ns = (_import_torch, TORCH_IMPORT_NS) if emit else (_import_fake, FAKE_IMPORT_NS)
    with cores.meanwhile(job, ns):
        rep = load(path, progress=_on_terminal(sys.stderr))
    if emit is not None:
        from tlview.tensors.emit import emit_file

        summary = emit_file(
            rep,
            list(compiles_with_inputs(rep, compile_id)),
            emit,
            force=force,
            mode=mode,
            seed=seed,
            device=device,
            max_bytes=limit,
            allow_import=allow_import,
        )
        click.echo(f"tlview: wrote {emit} ({summary})", err=True)
        return
    _inputs_listing(rep, compiles_with_inputs(rep, compile_id), allow_import)


def _inputs_listing(rep: Any, chosen: Iterable[Any], allow_import: tuple[str, ...]) -> None:
    """Per compile, each input with its metadata and whether it rebuilds as fake and as real.

    One compile at a time: a log of thousands of compiles lists in the memory of one."""
    from tlview.analyze.names import Refs
    from tlview.rebuild import input_rows
    from tlview.render.text import clean  # text from the log: control characters shown, not obeyed
    from tlview.runtime.output import stdout

    stdout()  # closed (`>&-`): one line, not a listing that goes nowhere
    refs = Refs.of(rep)
    listed = False
    for c in chosen:
        listed = True
        rows, notes, problem = input_rows(c, allow_import)
        ref = refs(c)
        click.echo(clean(f"compile {ref}  {c.status}  {len(rows)} input(s)"))
        head = ("source", "shape", "stride", "offset", "dtype", "device", "alias", "fake", "real")
        table = [head, *[tuple(clean(v) for v in r) for r in rows]]
        widths = [max(len(r[i]) for r in table) for i in range(len(head))]
        for r in table:
            click.echo(
                "  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
            )
        for line in notes:
            click.echo(f"    {clean(line)}")
        if problem:
            click.echo(f"    {problem}")
        click.echo("")
    if not listed:
        click.echo(clean(f"{rep.path}: no compile described any input tensor"))


# What torch says, as a warning, when it makes tensors of a kind a log can describe: the
# listing's notes say what matters, and stderr keeps one line per problem.
TORCH_NOISE = (
    "ComplexHalf support is experimental",
    "Sparse CSR tensor support is in beta",
    "Sparse invariant checks are implicitly disabled",
    "torch.quantize_per_tensor, torch.quantize_per_channel",
)


def _quiet_torch() -> None:
    import warnings

    for text in TORCH_NOISE:
        warnings.filterwarnings("ignore", message=re.escape(text))


def _import_torch() -> None:
    from tlview.rebuild import need_torch

    need_torch()


def _import_fake() -> None:
    _import_torch()
    import torch._dynamo  # noqa: F401 - what FakeTensorMode() imports on first use


def _import_page() -> None:
    from tlview.render import html  # noqa: F401


def _import_text() -> None:
    from tlview.render import text  # noqa: F401


def _picked(rep: Any, compile_id: str | None) -> Any:
    """Whether a compile is the one --compile-id names (None: every compile is)."""
    if compile_id is None:
        return None
    from tlview.analyze.names import is_named

    return lambda c: is_named(c, compile_id)


@contextlib.contextmanager
def _rereadable(path: str) -> Iterator[str]:
    """PATH, or a copy of it when it is a pipe (`-` from `cat`, `<(zcat ...)`), which a second
    read would find empty; the copy has the pipe's name, so the report names the same log."""
    real = "/dev/stdin" if path == "-" else path
    try:
        mode = os.stat(real).st_mode
    except OSError:  # the reader says what is wrong with it
        mode = stat.S_IFREG
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield path
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tlview-pipe-") as d:
        copy = os.path.join(d, os.path.basename(real) or "stdin")
        try:
            with open(real, "rb") as src, open(copy, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            raise TlviewError(f"{path}: cannot read: {e.strerror or e}", EXIT_NO_TRACE) from None
        yield copy


def _newest(path: str) -> str:
    """The newest log of a directory (--latest): by modification time, then name."""
    from pathlib import Path

    from tlview.errors import EXIT_USAGE
    from tlview.read.files import discover, no_logs
    from tlview.read.sources import is_url

    if is_url(path) or not Path(path).is_dir():
        raise TlviewError(f"{path}: --latest needs a local directory of logs", EXIT_USAGE)
    logs, notes = discover(Path(path))
    when = {}
    for log in logs:
        with contextlib.suppress(OSError):  # gone since it was listed
            when[log] = (log.stat().st_mtime_ns, log.name)
    if not when:
        raise TlviewError(no_logs(path, notes), EXIT_NO_TRACE)
    newest = max(when, key=lambda log: when[log])
    click.echo(f"tlview: reading the newest log, {_clean(newest)}", err=True)
    return str(newest)


def _check_compile_id(rep: Any, compile_id: str) -> None:
    from tlview.analyze.names import is_named, no_compile

    if not any(is_named(c, compile_id) for c in rep.compiles):
        raise TlviewError(no_compile(rep, compile_id), 2)


def _text(rep: Any, output: str | None, force: bool, compile_id: str | None, verbosity: int) -> Any:
    from tlview.render.text import TextOptions, write

    opts = TextOptions(compile_id=compile_id, verbosity=verbosity)
    return _console(output, force, lambda console: write(rep, console, opts))


def _pipe_width() -> int:
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 160


def _gate(failures: list[str]) -> None:
    """Print one line per failed --fail-on check and exit EXIT_STRICT if there is any."""
    for f in failures:
        click.echo(f"tlview: fail-on {f}", err=True)
    if failures:
        raise click.exceptions.Exit(EXIT_STRICT)


@main.command()
@click.argument("base", type=click.Path())
@click.argument("new", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("text", "json", "html")),
    help="text for the terminal, json for machines (tlview.diff/1), html for a page "
    "(default: what -o's name ends with, .html or .json, else text).",
)
@output_option
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="CHECKS",
    help=f"Exit {EXIT_STRICT} when NEW is worse, e.g. graph-breaks,recompiles,failures,compile-time:+20%.",
)
@click.option("-v", "--verbose", count=True, help="Text: list every frame, however many.")
@force_option
def diff(
    base: str,
    new: str,
    fmt: str | None,
    output: str | None,
    fail_on: tuple[str, ...],
    verbose: int,
    force: bool,
) -> None:
    """Compare two runs (logs or directories): what NEW compiles, breaks and fails differently."""
    fmt = _format_for(fmt, output)
    from tlview.analyze.diff import compare
    from tlview.analyze.gate import check_diff
    from tlview.analyze.gate import parse_checks as parse_checks
    from tlview.load import load
    from tlview.runtime.output import output as open_output

    checks = parse_checks(fail_on, against_base=True)
    bar = _on_terminal(sys.stderr)
    d = compare(load(base, progress=bar), load(new, progress=bar))
    failures = check_diff(d, checks) if checks else None
    if fmt == "json":
        from tlview.render import diff_json

        with open_output(output, force) as out:
            diff_json.write(d, out, failures)
    elif fmt == "html":
        from tlview.render import diff_html

        with open_output(output, force) as out:
            diff_html.write(d, out, failures)
    else:
        from tlview.render import diff_text

        _console(output, force, lambda console: diff_text.write(d, console, verbose))
    if output not in (None, "-"):
        click.echo(f"tlview: wrote {output}", err=True)
    _gate(failures or [])


def _console(output: str | None, force: bool, draw: Any) -> Any:
    """Run DRAW on a terminal console, or on a plain one whose text goes to OUTPUT; what it
    returns."""
    from rich.console import Console

    from tlview.runtime.output import output as open_output

    if output in (None, "-"):
        from tlview.runtime.output import stdout

        tty = stdout().isatty()
        return draw(_stdout_console(highlight=False, width=None if tty else _pipe_width()))
    with open_output(output, force) as out:
        import io

        buf = io.StringIO()
        console = Console(
            file=buf, highlight=False, width=_pipe_width(), no_color=True, force_terminal=False
        )
        console.print(f"# written by tlview {__version__}", markup=False)
        got = draw(console)
        out.write(buf.getvalue().encode("utf-8"))
    return got


def _stdout_console(**kw: Any) -> Any:
    """A console on stdout whose reader may go away (`| head`): that ends the run as it does for
    every format, with exit 0 (rich's own console exits 1, which fails a `pipefail` script)."""
    from rich.console import Console

    class Stdout(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return Stdout(**kw)


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--compile-id",
    "compile_id",
    help="The compile whose graph to re-run, e.g. 0/1 (LOG:ID or rankN:ID with several logs).",
)
@click.option(
    "--all",
    "all_graphs",
    is_flag=True,
    help="One repro per graph, in DIR/<compile>/, with DIR/summary.json.",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(),
    metavar="DIR",
    help="Write repro.py and inputs.pt into DIR (created if missing).",
)
@click.option(
    "--backend",
    type=click.Choice(("eager", "aot_eager", "inductor")),
    help="Compile the graph again with this backend (default: run it as it is).",
)
@click.option(
    "--device",
    help="Build the inputs on this device (default: the logged one if present, else cpu).",
)
@click.option(
    "--mode",
    type=click.Choice(("random", "zeros")),
    default="random",
    show_default=True,
    help="Values of the inputs (the log has none): random per dtype, or zeros.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option(
    "--run",
    "run_now",
    is_flag=True,
    help="Run the repro now in a new Python process: this executes code taken from the log.",
)
@click.option("--force", is_flag=True, help="Replace files in DIR that tlview did not write.")
@latest_option
def repro(
    path: str,
    compile_id: str | None,
    all_graphs: bool,
    output: str | None,
    backend: str | None,
    device: str | None,
    mode: str,
    seed: int,
    run_now: bool,
    force: bool,
    latest: bool,
) -> None:
    """Write a script that re-runs a captured graph on inputs rebuilt from the log."""
    _quiet_torch()
    path = _newest(path) if latest else path
    from pathlib import Path

    from tlview.analyze.names import GRAPH_KIND
    from tlview.errors import EXIT_NO_REPRO
    from tlview.load import load
    from tlview.repro import make as repro_mod

    if all_graphs == (compile_id is not None):
        raise TlviewError("give --compile-id ID for one graph, or --all", 2)
    if output is None and (all_graphs or not run_now):
        raise TlviewError("give -o DIR: where to write the repro", 2)
    opts = repro_mod.Options(
        backend=backend, device=device, mode=mode, seed=seed, run=run_now, force=force
    )
    rep = load(path, repro_mod.graph_keep(), progress=_progress_reader(path), jobs=1)
    out = Path(output) if output is not None else None
    if all_graphs:
        assert out is not None
        outcomes = repro_mod.make_all(rep, out, opts)
        for line in repro_mod.summary_lines(outcomes, run_now):
            click.echo(line)
        click.echo(f"tlview: wrote {out / repro_mod.SUMMARY}", err=True)
        good = ("ran",) if run_now else ("ran", "written")
        if not outcomes:  # asked for repros, got none: as much a failure as a skipped graph
            raise TlviewError(
                f"{path}: no {GRAPH_KIND} record in the log: no graph to repro",
                EXIT_NO_REPRO,
            )
        if any(o.status not in good for o in outcomes):
            raise TlviewError(
                f"{path}: {sum(o.status not in good for o in outcomes)} of {len(outcomes)} "
                f"graph(s) gave no repro that {'ran' if run_now else 'runs here'} "
                f"(see {out / repro_mod.SUMMARY})",
                EXIT_NO_REPRO,
            )
        return
    assert compile_id is not None
    o = repro_mod.make_one(rep, compile_id, out, opts)
    for note in o.notes:
        click.echo(f"tlview: note: {note}", err=True)
    if o.status == "skipped":
        raise TlviewError(f"{path}: compile {o.ref}: no repro: {o.reason}", EXIT_NO_REPRO)
    if out is not None:
        click.echo(f"tlview: wrote {out / repro_mod.SCRIPT} and {out / repro_mod.INPUTS}", err=True)
    if o.status == "blocked":
        raise TlviewError(
            f"{path}: compile {o.ref}: the repro will not run here: {o.reason}", EXIT_NO_REPRO
        )
    if o.status in ("failed", "mismatch"):
        raise TlviewError(
            f"{path}: compile {o.ref}: the repro {o.status}: {o.reason}", EXIT_NO_REPRO
        )


_LEFT: list[Any] | None = None  # what `run` lets the process end with, unfreed


def _outlive(obj: Any) -> None:
    """Keep obj to the end of the process when `run` ends it without freeing the heap: freeing
    a large report as its command returns costs milliseconds for nothing."""
    if _LEFT is not None:
        _LEFT.append(obj)


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def run() -> None:
    """The `tlview` command: `main`, then an exit that skips freeing the heap object by object
    (a large report leaves millions of objects; freeing them is 5-8% of its time)."""
    import atexit
    import contextlib

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
        click.echo(code, err=True)
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away (`| head`) or a closed stream: nothing more to say.
        with contextlib.suppress(OSError, ValueError, AttributeError):  # None: closed at start
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
