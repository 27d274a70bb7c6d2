"""The command line: options parsed, the API called (tlview/__init__.py), nothing more.

Its helpers are in commands/: the error funnel that turns every failure into one line on stderr
and its exit status, the paths (`--latest`, pipes), and the inputs listing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import tlview
from tlview.commands import funnel
from tlview.commands.funnel import Main, gate, on_terminal, outlive, say
from tlview.commands.paths import newest, rereadable
from tlview.errors import EXIT_STRICT, EXIT_USAGE, TlviewError
from tlview.render import DIFF_FORMATS, REPORT_FORMATS, Options, format_for
from tlview.replay import DEFAULT_TIMEOUT
from tlview.runtime.cores import Meanwhile
from tlview.runtime.output import Output
from tlview.version import __version__

if TYPE_CHECKING:
    from tlview.analyze.gate import Check
    from tlview.model import Report

# Importing torch alone, and torch with dynamo (what FakeTensorMode needs), on this machine with
# both cores busy: done while the other readers still read a large log.
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
launch_option = click.option(
    "--launch",
    type=click.IntRange(min=1),
    metavar="N",
    help="PATH is a folder that holds the logs of several launches (programs run into one "
    "TORCH_TRACE folder): read the Nth to start (tlview lists them).",
)
junit_option = click.option(
    "--junit-xml",
    "junit_xml",
    type=click.Path(),
    metavar="FILE",
    help="With --fail-on: write each check as a JUnit test case to FILE, failed with its figures.",
)
force_option = click.option(
    "--force", is_flag=True, help="Replace an existing output file that tlview did not write."
)


def _plain_id(value: str | None) -> str | None:
    """A --compile-id as tlview names compiles: `[0/1]` (torch's and tlparse's way) is `0/1`."""
    from tlview.analyze.names import plain_ref

    return None if value is None else plain_ref(value)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tlview")
def main() -> None:
    """Read PyTorch TORCH_TRACE logs: compiles, graph breaks, recompiles, failures, input tensors."""


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(tuple(REPORT_FORMATS)),
    help="text for the terminal, json for machines, html for a page, perfetto for a trace, "
    "markdown for a CI job summary (default: what -o's name ends with, .html, .json or .md, "
    "else text).",
)
@output_option
@click.option(
    "--compile-id",
    "compile_id",
    callback=lambda ctx, param, value: _plain_id(value),
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
    help=f"Exit {EXIT_STRICT} past these limits, e.g. graph-breaks:0,recompiles:3,compile-time:60s,"
    "phase:inductor_compile:30s.",
)
@click.option(
    "--baseline",
    metavar="BASE",
    type=click.Path(),
    help="With --fail-on: +N, +N% and bare checks are over BASE (a report stored with "
    "--format json, or a log), e.g. --fail-on phase:inductor_compile:+20%.",
)
@junit_option
@click.option(
    "--annotations",
    type=click.Choice(("github", "plain")),
    help="Also print each graph break, recompile and failed compile at its user source line: "
    "GitHub's ::warning commands, or plain file:line: lines.",
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
@launch_option
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
    baseline: str | None,
    junit_xml: str | None,
    annotations: str | None,
    jobs: int | None,
    scheduler: str | None,
    latest: bool,
    launch: int | None,
) -> None:
    """Report what a TORCH_TRACE log (file, .gz or directory) says about each compile."""
    f = REPORT_FORMATS[format_for(fmt, output)]
    path = newest(path) if latest else path
    source = path
    if f.rereads:  # the trace reads the log again: a pipe is read once, into a file
        source = click.get_current_context().with_resource(rereadable(path, f.rereads))
    checks, base = _report_checks(fail_on, baseline, junit_xml)
    opts = Options(
        compile_id=compile_id, verbosity=-1 if brief else verbose, full=full, checks=tuple(checks)
    )
    # The renderer (rich, or Jinja and all) is imported while the other readers still read.
    rep = tlview.read(
        source,
        keep=f.keep_for(opts),
        progress=on_terminal(sys.stderr),
        jobs=jobs,
        scheduler=scheduler or None,
        launch=launch,
        meanwhile=Meanwhile(f.warm, f.import_ns) if f.import_ns else None,
    )
    outlive(rep)
    if checks:  # the phases the checks name, measured before the renderers show the checks
        from tlview.analyze.gate import measure

        checks = measure(checks, rep.attempts, base)
        opts = opts._replace(checks=tuple(checks))
    if compile_id is not None:
        from tlview.analyze.names import check_named

        check_named(rep, compile_id)
    from tlview.write import write_report

    figures = write_report(rep, f.name, Output(output, force), opts)
    if output not in (None, "-"):
        say(f"tlview: wrote {output}", err=True)
    bad = sum(log.bad_count for log in rep.logs)
    if annotations is not None:
        from tlview.analyze.sites import sites
        from tlview.render import annotate

        for line in annotate.lines(sites(rep), annotations):
            say(line, command=annotations == "github")
    if checks:
        from tlview.analyze.gate import evaluate_report
        from tlview.analyze.summary import overview

        verdicts = evaluate_report(figures or overview(rep), checks)
        if junit_xml is not None:
            from tlview.render import junit

            junit.write(junit_xml, force, f"tlview report {path}", verdicts)
            say(f"tlview: wrote {junit_xml}", err=True)
        gate([v.failure for v in verdicts if v.failure is not None])
    if strict and bad:
        raise TlviewError(f"{path}: {bad} bad line(s) (--strict)", EXIT_STRICT)


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--compile-id",
    "compile_id",
    callback=lambda ctx, param, value: _plain_id(value),
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
@click.option(
    "--check",
    is_flag=True,
    help="Also rebuild each input as a fake and a meta tensor and say whether it rebuilds "
    "(imports torch).",
)
@click.option("--force", is_flag=True, help="Replace an existing FILE that tlview did not write.")
@latest_option
@launch_option
def inputs(
    path: str,
    compile_id: str | None,
    mode: str,
    seed: int,
    device: str | None,
    max_bytes: str | None,
    allow_import: tuple[str, ...],
    emit: str | None,
    check: bool,
    force: bool,
    latest: bool,
    launch: int | None,
) -> None:
    """List each compile's input tensors and rebuild them as fake, meta, zeros or random tensors."""
    from tlview.commands.listing import list_inputs, quiet_torch
    from tlview.replay.thirdparty import check_names

    check_names(allow_import)
    quiet_torch()
    path = newest(path) if latest else path
    from tlview.tensors.options import DEFAULT_MAX_BYTES
    from tlview.units import parse_bytes

    limit = DEFAULT_MAX_BYTES if max_bytes is None else parse_bytes(max_bytes, "--max-bytes")
    # torch is imported while the other readers still read a large log (and read more of it):
    # --check's fake column needs dynamo's too, which FakeTensorMode imports. The listing
    # alone imports none of it.
    warm = None
    if emit or check:
        job, ns = (_import_torch, TORCH_IMPORT_NS) if emit else (_import_fake, FAKE_IMPORT_NS)
        warm = Meanwhile(job, ns)
    rep = tlview.read(path, progress=on_terminal(sys.stderr), launch=launch, meanwhile=warm)
    if emit is not None:
        summary = tlview.emit_inputs(
            rep,
            compile_id,
            emit,
            mode=mode,
            seed=seed,
            device=device,
            max_bytes=limit,
            allow_import=allow_import,
            force=force,
        )
        say(f"tlview: wrote {emit} ({summary})", err=True)
        return
    from tlview.analyze.names import compiles_with_inputs

    list_inputs(rep, compiles_with_inputs(rep, compile_id), allow_import, check)


def _import_torch() -> None:
    from tlview.tensors.dtypes import need_torch

    need_torch()


def _import_fake() -> None:
    _import_torch()
    import torch._dynamo  # noqa: F401 - what FakeTensorMode() imports on first use


@main.command()
@click.argument("base", type=click.Path())
@click.argument("new", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(tuple(DIFF_FORMATS)),
    help="text for the terminal, json for machines (tlview.diff/1), html for a page, markdown "
    "for a CI job summary (default: what -o's name ends with, .html, .json or .md, else text).",
)
@output_option
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="CHECKS",
    help=f"Exit {EXIT_STRICT} when NEW is worse, e.g. graph-breaks,recompiles,failures,compile-time:+20%.",
)
@junit_option
@click.option(
    "--annotations",
    type=click.Choice(("github", "plain")),
    help="Also print what NEW brings (graph breaks, recompiles, failed compiles at lines where "
    "BASE had none of them) at its user source line: GitHub's ::warning commands, or plain lines.",
)
@click.option("-v", "--verbose", count=True, help="Text: list every frame, however many.")
@force_option
def diff(
    base: str,
    new: str,
    fmt: str | None,
    output: str | None,
    fail_on: tuple[str, ...],
    junit_xml: str | None,
    annotations: str | None,
    verbose: int,
    force: bool,
) -> None:
    """Compare two runs (logs, directories, or a BASE report saved with --format json)."""
    f = DIFF_FORMATS[format_for(fmt, output)]
    from tlview.analyze.gate import evaluate_diff, parse_checks

    checks = parse_checks(fail_on, against_base=True)
    _junit_needs_checks(junit_xml, checks)
    from tlview.analyze.baseline import NEEDS_LOG, is_report

    for p, c in ((p, c) for p in (base, new) if is_report(p) for c in checks):
        if c.measure in NEEDS_LOG:
            raise TlviewError(
                f"--fail-on {c.text!r}: needs the log of {p}, not a stored report", EXIT_USAGE
            )
    d = tlview.diff(base, new, progress=on_terminal(sys.stderr))
    verdicts = evaluate_diff(d, checks) if checks else []
    failures = [v.failure for v in verdicts if v.failure is not None] if checks else None
    opts = Options(verbosity=verbose, gate=failures, checks=tuple(checks))
    f.renderer()(d, Output(output, force), opts)
    if output not in (None, "-"):
        say(f"tlview: wrote {output}", err=True)
    if annotations is not None:
        from tlview.analyze.sites import added
        from tlview.render import annotate

        for line in annotate.lines(added(d), annotations):
            say(line, command=annotations == "github")
    if junit_xml is not None:
        from tlview.render import junit

        junit.write(junit_xml, force, f"tlview diff {base} {new}", verdicts)
        say(f"tlview: wrote {junit_xml}", err=True)
    gate(failures or [])


def _report_checks(
    fail_on: tuple[str, ...], baseline: str | None, junit_xml: str | None
) -> tuple[list[Check], Report | None]:
    """`report`'s --fail-on checks, and the run --baseline names (read)."""
    checks: list[Check] = []
    if fail_on:  # the gate imports the diff machinery: only for a run that asks for it
        from tlview.analyze.gate import parse_checks

        checks = parse_checks(fail_on, against_base=baseline is not None)
    elif baseline is not None:
        raise TlviewError(
            "--baseline is what --fail-on checks are over: give --fail-on CHECKS too", EXIT_USAGE
        )
    _junit_needs_checks(junit_xml, checks)
    return checks, _baseline(baseline, checks)


def _baseline(path: str | None, checks: list[Check]) -> Report | None:
    """The run `report --baseline` names, read (a stored report, or a log)."""
    if path is None:
        return None
    from tlview.analyze.baseline import NEEDS_LOG, is_report, read_report

    if not is_report(path):
        return tlview.read(path, progress=on_terminal(sys.stderr))
    for c in checks:
        if c.measure in NEEDS_LOG:
            raise TlviewError(
                f"--fail-on {c.text!r}: needs the log of {path}, not a stored report", EXIT_USAGE
            )
    return read_report(path)


def _junit_needs_checks(junit_xml: str | None, checks: list[Check]) -> None:
    if junit_xml is not None and not checks:
        raise TlviewError(
            "--junit-xml writes the --fail-on checks: give --fail-on CHECKS too", EXIT_USAGE
        )


@main.command()
@click.argument("path", type=click.Path())
@click.option(
    "--compile-id",
    "compile_id",
    callback=lambda ctx, param, value: _plain_id(value),
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
    "--max-bytes",
    "max_bytes",
    metavar="SIZE",
    help="Skip graphs whose inputs would take the memory and disk all repros use past SIZE, "
    "e.g. 8G (default: half of RAM, at most half of DIR's free space).",
)
@click.option(
    "--run",
    "run_now",
    is_flag=True,
    help="Run the repro now in a new Python process: this executes code taken from the log.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    metavar="S",
    help="--run: stop a repro still running after S seconds, and fail it.",
)
@click.option(
    "--world",
    type=click.Choice(("gloo", "fake")),
    default="gloo",
    show_default=True,
    help="A graph with collectives: run it on N gloo processes here (N read off its calls), "
    "or in one process on torch's fake process group (shapes only, no communication).",
)
@click.option(
    "--allow-import",
    "allow_import",
    multiple=True,
    metavar="PKG",
    help="Import PKG (and its modules the graph's code names) before checking the graph's ops, "
    "and in repro.py: third-party custom ops and tensor subclasses (runs its code).",
)
@click.option(
    "--check-accuracy",
    "check_accuracy",
    is_flag=True,
    help="With --run: run the graph eagerly and under a backend (--backend, default the "
    "logged run's: inductor if it logged inductor's code, else aot_eager) on the same inputs "
    "and compare the values: outputs, inputs it changes in place, logged values (exit 6 if "
    "any disagrees, or if there is nothing to compare).",
)
@click.option(
    "--dynamo",
    is_flag=True,
    help="Compile through torch.compile, where dynamo traces the graph again (default: hand "
    "the graph module to the backend, as dynamo did).",
)
@click.option("--force", is_flag=True, help="Replace files in DIR that tlview did not write.")
@latest_option
@launch_option
def repro(
    path: str,
    compile_id: str | None,
    all_graphs: bool,
    output: str | None,
    backend: str | None,
    device: str | None,
    mode: str,
    seed: int,
    max_bytes: str | None,
    run_now: bool,
    timeout: float,
    world: str,
    allow_import: tuple[str, ...],
    check_accuracy: bool,
    dynamo: bool,
    force: bool,
    latest: bool,
    launch: int | None,
) -> None:
    """Write a script that re-runs a captured graph on inputs rebuilt from the log."""
    from tlview.commands.listing import quiet_torch
    from tlview.commands.repro import repro_all_said, repro_said, repro_usage

    quiet_torch()
    path = newest(path) if latest else path
    repro_usage(compile_id, all_graphs, output, run_now, check_accuracy)
    from tlview.replay.thirdparty import check_names

    check_names(allow_import)
    from tlview.units import parse_bytes

    limit = None if max_bytes is None else parse_bytes(max_bytes, "--max-bytes")
    from tlview.logs.progress import bar_for  # on stderr for a long read, on a terminal

    bar = bar_for(path) if on_terminal(sys.stderr) else None
    out = Path(output) if output is not None else None
    if all_graphs:
        assert out is not None
        outcomes = tlview.repro_all(
            path, out, backend=backend, device=device, mode=mode, seed=seed, run=run_now,
            force=force, progress=bar, max_bytes=limit, world=world, timeout=timeout,
            allow_import=allow_import,
            check_accuracy=check_accuracy, launch=launch, dynamo=dynamo,
        )  # fmt: skip
        repro_all_said(path, out, outcomes, run_now)
        return
    assert compile_id is not None
    o = tlview.repro(
        path, compile_id, out, backend=backend, device=device, mode=mode, seed=seed,
        run=run_now, force=force, progress=bar, max_bytes=limit, world=world, timeout=timeout,
        allow_import=allow_import, check_accuracy=check_accuracy, launch=launch, dynamo=dynamo,
    )  # fmt: skip
    repro_said(path, out, o, run_now)


def _complete_artifacts(ctx: click.Context, param: click.Parameter, incomplete: str) -> Any:
    """`show`'s completion of artifact names, its module imported only when completing."""
    from tlview.commands.show import complete_artifacts

    return complete_artifacts(ctx, param, incomplete)


def _complete_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> Any:
    """`show`'s completion of compile ids, its module imported only when completing."""
    from tlview.commands.show import complete_ids

    return complete_ids(ctx, param, incomplete)


@main.command()
@click.argument("path", type=click.Path())
@click.argument("artifact", required=False, shell_complete=_complete_artifacts)
@click.option(
    "--compile-id",
    "compile_id",
    callback=lambda ctx, param, value: _plain_id(value),
    required=True,
    shell_complete=_complete_ids,
    help="The compile, e.g. 0/1 (LOG:ID or rankN:ID with several logs).",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Write the exact bytes to a pipe or a terminal too, control characters and all "
    "(into a file they always are).",
)
@click.option(
    "--passes",
    is_flag=True,
    help="The compile's graphs pass by pass: each stage's first graph whole, then each pass's "
    "graph as a diff against the one before it.",
)
@click.option("--diff", "diff_with", metavar="OTHER", help="ARTIFACT against OTHER, as a diff.")
@click.option(
    "--diff-previous",
    is_flag=True,
    help="ARTIFACT against the same artifact of the frame's previous compile.",
)
@click.option(
    "--bytecode",
    is_flag=True,
    help="The frame's bytecode before and after dynamo, as a diff (decompiled with depyf "
    "when it is installed).",
)
@latest_option
@launch_option
def show(
    path: str,
    artifact: str | None,
    compile_id: str,
    raw: bool,
    latest: bool,
    passes: bool,
    diff_with: str | None,
    diff_previous: bool,
    bytecode: bool,
    launch: int | None,
) -> None:
    """List a compile's artifacts, or write one whole (ARTIFACT: a name the listing gives,
    `NAME[SUBGRAPH]` for one of a region)."""
    from tlview.commands import show as show_help

    path = newest(path) if latest else path
    if passes or diff_with is not None or diff_previous or bytecode:
        from tlview.commands import passes as show_passes

        asked = show_passes.Asked(passes, diff_with, diff_previous, bytecode)
        show_passes.show(path, compile_id, artifact, asked, progress=on_terminal(sys.stderr))
        return
    if artifact is None:
        named = tlview.artifacts(path, compile_id, progress=on_terminal(sys.stderr), launch=launch)
        show_help.list_artifacts(path, compile_id, named)
        return
    p, log = show_help.located(path, compile_id, artifact, on_terminal(sys.stderr), launch)
    if log is None or not show_help.stream_artifact(p, log, raw):
        p = tlview.artifact(
            path, compile_id, artifact, progress=on_terminal(sys.stderr), launch=launch
        )
        show_help.write_artifact(artifact, p, raw)


def run() -> None:
    """The `tlview` command."""
    funnel.run(main)
