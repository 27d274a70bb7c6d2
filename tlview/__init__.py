"""tlview: read PyTorch TORCH_TRACE logs, report compiles and rebuild their input tensors.

The API the command line calls, and yours (docs/api.md):

    report = tlview.read("/tmp/trace")             # a log, a .gz, a directory or a URL
    fakes = tlview.fake_inputs(report, "0/1")       # {source: FakeTensor}
    got = tlview.real_inputs(report, "0/1", mode="random", seed=0)
    inputs = tlview.load_inputs("example_inputs.pt")["compiles"]["0/1"]
    outcome = tlview.repro("/tmp/trace", "0/1", "out/")  # repro.py and inputs.pt in out/
    changes = tlview.diff("base/", "new/")
    code = tlview.artifact("/tmp/trace", "0/1", "inductor_output_code").data  # exact bytes

Each function imports what it needs when called: `import tlview` loads neither rich, Jinja,
orjson nor torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from tlview.errors import TlviewError
from tlview.replay import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.serialization import MAP_LOCATION

    from tlview.analyze.compiles import Analysis
    from tlview.analyze.diff import Diff
    from tlview.analyze.summary import Overview
    from tlview.index.keep import Keep
    from tlview.logs.progress import BarLike
    from tlview.model import Compile, Payload, Report
    from tlview.replay.make import Outcome, ReproOptions
    from tlview.runtime.cores import Meanwhile
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.rebuilt import Rebuilt

from tlview.version import __version__

__all__ = [
    "Analysis",
    "Compile",
    "RebuildOptions",
    "Rebuilt",
    "Report",
    "ReproOptions",
    "TlviewError",
    "__version__",
    "analysed",
    "artifact",
    "artifacts",
    "diff",
    "emit_inputs",
    "expand_report",
    "fake_inputs",
    "load_inputs",
    "read",
    "real_inputs",
    "repro",
    "repro_all",
    "save_inputs",
    "write_report",
]

Log = Union[str, Path, "Report"]  # what the functions below read a compile from


def __getattr__(name: str) -> Any:
    """`tlview.Report` and `tlview.Compile`, imported when first asked for (`--help` needs neither)."""
    if name in ("Report", "Compile"):
        from tlview import model

        return getattr(model, name)
    if name == "Analysis":
        from tlview.analyze.compiles import Analysis

        return Analysis
    if name in ("RebuildOptions", "Rebuilt"):
        from tlview.tensors import options, rebuilt

        return getattr(options if name == "RebuildOptions" else rebuilt, name)
    if name == "ReproOptions":
        from tlview.replay.make import ReproOptions

        return ReproOptions
    raise AttributeError(f"module 'tlview' has no attribute {name!r}")


def read(
    path: str | Path,
    *,
    keep: Keep | None = None,
    progress: bool | BarLike | None = False,
    jobs: int | None = None,
    scheduler: str | None = None,
    launch: int | None = None,
    meanwhile: Meanwhile | None = None,
) -> Report:
    """Read every log PATH names (a file, a .gz, a directory of ranks, `-`, an fsspec URL).

    `keep`: which payload texts to hold in memory (default: none; graphs and code are hashed,
    measured and let go); `progress`: True for a bar on stderr when the read is long; `jobs`:
    processes reading a directory's logs (default: the cores); `scheduler`: the address of a
    Dask scheduler whose workers read the logs instead; `launch`: of a folder that holds the
    logs of several launches (programs run into one TORCH_TRACE folder), the Nth to start;
    `meanwhile`: work to do in this process while forked copies read the rest of one large log
    (`tlview.runtime.cores.Meanwhile`; not run when the log is read in one process).
    Raises TlviewError when no log holds a TORCH_TRACE record, or (exit 2) when a folder holds
    several launches and `launch` picks none.
    """
    from tlview.load import read as read_path

    return read_path(
        path,
        keep,
        progress=progress,
        jobs=jobs,
        scheduler=scheduler,
        launch=launch,
        meanwhile=meanwhile,
    )


def fake_inputs(
    log: Log | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: FakeTensorMode | None = None,
    shape_env: ShapeEnv | None = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """FakeTensors for the inputs of one compile, with the original run's symbols where dynamic.

    `log` is a path, a Report (then `compile_id` picks the compile) or a Compile. Without
    `fake_mode` and `shape_env`, a new FakeTensorMode over a ShapeEnv that names each dynamic
    dim's symbol as the original run did. Returns `Rebuilt`, as `real_inputs` does: a mapping
    {source: FakeTensor}, with `notes` and `failed`.
    """
    from tlview.rebuild import fake_rebuild  # torch is imported only here

    got = fake_rebuild(
        log, compile_id, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import
    )
    return got


def real_inputs(
    log: Log | Compile,
    compile_id: str | None = None,
    *,
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int | None = None,
    allow_import: Sequence[str] = (),
    options: RebuildOptions | None = None,
) -> Rebuilt:
    """Real (random or zeros) or meta tensors for the inputs of one compile, aliasing kept.

    Returns `Rebuilt`: a mapping {source: tensor} (`tensors`; every source of an input maps to
    the same tensor), `notes` ({source: [what could not be exact]}) and `failed` ({source:
    why}). `max_bytes` (default: half of this machine's memory) refuses a rebuild that needs
    more. `options` (a `tlview.RebuildOptions`) stands for all the keywords at once.
    """
    from tlview.tensors.real import build_real

    opts = options or _options(mode, seed, device, max_bytes, allow_import)
    return build_real(_compile(log, compile_id, "real_inputs"), opts)


def emit_inputs(
    log: Log,
    compile_id: str | None,
    path: str | Path,
    *,
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int | None = None,
    allow_import: Sequence[str] = (),
    force: bool = False,
    options: RebuildOptions | None = None,
) -> str:
    """Rebuild the inputs of one compile (None: of every compile that has some) and write them
    to PATH (`tlview.inputs/1`, what `tlview inputs --emit` writes); a one-line summary. The
    arguments come in `repro`'s order: the log, the compile, where to write."""
    from tlview.analyze.names import compiles_with_inputs
    from tlview.model import Report
    from tlview.tensors.emit import emit_file

    opts = options or _options(mode, seed, device, max_bytes, allow_import)
    report = log if isinstance(log, Report) else read(log)
    chosen = list(compiles_with_inputs(report, compile_id))
    return emit_file(report, chosen, str(path), opts, force=force)


def save_inputs(log: Log, path: str, compile_id: str | None = None, **options: Any) -> str:
    """Deprecated: `emit_inputs(log, compile_id, path, ...)`, in `repro`'s order."""
    import warnings

    warnings.warn(
        "tlview.save_inputs(log, path, compile_id) is deprecated: use "
        "tlview.emit_inputs(log, compile_id, path)",
        DeprecationWarning,
        stacklevel=2,
    )
    return emit_inputs(log, compile_id, path, **options)


def load_inputs(
    path: str | Path, map_location: MAP_LOCATION = None, allow_import: Sequence[str] = ()
) -> dict[str, Any]:
    """Load a file written by `tlview inputs --emit`, restoring exact tensors and aliasing.

    The result is the saved dictionary with `compiles` ({compile id: {source: tensor}}) rebuilt
    exactly; `map_location` is torch.load's; `allow_import` names modules whose tensor
    subclasses may be imported.
    """
    from tlview.tensors.emit import load_inputs as load  # torch is imported only here

    return load(path, map_location=map_location, allow_import=allow_import)


def repro(
    log: Log,
    compile_id: str,
    out: str | Path | None = None,
    *,
    backend: str | None = None,
    device: str | None = None,
    mode: str = "random",
    seed: int = 0,
    run: bool = False,
    force: bool = False,
    progress: bool | BarLike | None = None,
    world: str = "gloo",
    max_bytes: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    allow_import: Sequence[str] = (),
    check_accuracy: bool = False,
    launch: int | None = None,
    dynamo: bool = False,
    options: ReproOptions | None = None,
) -> Outcome:
    """Write a script that re-runs the graph of one compile (`ID`, `LOG:ID`, `ID#N`) on inputs
    rebuilt from the log: `repro.py` and `inputs.pt` in OUT; with `run`, run it in a new Python
    process (this executes code taken from the log). The outcome says what became of it.
    A graph with collectives runs on a world of the size they name: `world="gloo"`, that many
    gloo processes here, each on its rank's inputs; `"fake"`, one on torch's fake group.
    `max_bytes` bounds the inputs' memory and disk (default: half of RAM, at most half of the
    free space where OUT is): a graph past it is skipped, with the figure it needs. With `run`,
    a repro still running after `timeout` seconds (None: no limit) is stopped and failed.
    `allow_import` names packages to import for third-party ops and tensor subclasses (runs
    their code); `check_accuracy` (with `run`) compares eager with the backend: each output,
    each input the graph changes in place and each value the log holds. A backend is handed
    the graph module, as dynamo hands it a graph; `dynamo` goes through `torch.compile`.
    `options` (a `tlview.ReproOptions`) stands for the keywords from `backend` on at once."""
    from tlview.replay.make import ReproOptions, make_one
    from tlview.replay.thirdparty import check_names

    check_names(allow_import)
    opts = options or ReproOptions(
        backend=backend, device=device, mode=mode, seed=seed, run=run, force=force, world=world,
        max_bytes=max_bytes, timeout=timeout, allow_import=tuple(allow_import),
        check_accuracy=check_accuracy, via="dynamo" if dynamo else "backend",
    )  # fmt: skip
    where = _dir(out)  # checked, and torch looked for, before the log is read
    return make_one(_graphs(log, progress, launch), compile_id, where, opts)


def repro_all(
    log: Log,
    out: str | Path,
    *,
    backend: str | None = None,
    device: str | None = None,
    mode: str = "random",
    seed: int = 0,
    run: bool = False,
    force: bool = False,
    progress: bool | BarLike | None = None,
    world: str = "gloo",
    max_bytes: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    allow_import: Sequence[str] = (),
    check_accuracy: bool = False,
    launch: int | None = None,
    dynamo: bool = False,
    options: ReproOptions | None = None,
) -> list[Outcome]:
    """`repro` for every graph of the log, each in OUT/<compile>/, with OUT/summary.json;
    `max_bytes` bounds what all of them build and write together; `timeout`, each run;
    `options`, a `tlview.ReproOptions`, as for `repro`."""
    from tlview.replay.make import ReproOptions, make_all
    from tlview.replay.thirdparty import check_names

    check_names(allow_import)
    opts = options or ReproOptions(
        backend=backend, device=device, mode=mode, seed=seed, run=run, force=force,
        max_bytes=max_bytes, world=world, timeout=timeout, allow_import=tuple(allow_import),
        check_accuracy=check_accuracy, via="dynamo" if dynamo else "backend",
    )  # fmt: skip
    where = _dir(out)  # checked, and torch looked for, before the log is read
    assert where is not None
    return make_all(_graphs(log, progress, launch), where, opts)


def analysed(log: Log, *, progress: bool | BarLike | None = False) -> Iterator[Analysis]:
    """What each compile means, as every format shows it (docs/api.md): an `Analysis` for each
    of the report's attempts and `-/-` entries in order, worked out as it is asked for; a
    compile that followed restarted attempts holds them as `earlier`."""
    from tlview.analyze.compiles import analysed as each
    from tlview.model import Report

    return each(log if isinstance(log, Report) else read(log, progress=progress))


def write_report(
    log: Log,
    path: str | Path = "-",
    format: str | None = None,  # the word the command line uses
    *,
    compile_id: str | None = None,
    verbosity: int = 0,
    full: bool = False,
    force: bool = False,
) -> Overview | None:
    """Write the report of LOG (a path, read as the format needs, or a Report) to PATH ("-":
    standard output) as `tlview report` does: `format` is text, json, html, perfetto or
    markdown (default: what PATH's name asks for, else text). A Report read without `keep`
    has no payload texts for the page to show. A file is replaced only if tlview wrote it
    (else `force`). Returns the report's figures when the format counts them (not perfetto)."""
    from tlview.model import Report
    from tlview.render import REPORT_FORMATS, Options, format_for
    from tlview.runtime.output import Output
    from tlview.write import write_report as write

    out = None if str(path) == "-" else str(path)
    fmt = format_for(format, out)
    opts = Options(compile_id=compile_id, verbosity=verbosity, full=full)
    if not isinstance(log, Report):
        log = read(log, keep=REPORT_FORMATS[fmt].keep_for(opts))
    return write(log, fmt, Output(out, force), opts)


def diff(
    base: str | Path | Report, new: str | Path | Report, *, progress: bool | BarLike | None = False
) -> Diff:
    """What NEW compiles, breaks and fails differently from BASE (two runs: logs or folders,
    or a `tlview.report/1` file an earlier run stored)."""
    from tlview.analyze.baseline import is_report, read_report
    from tlview.analyze.diff import compare
    from tlview.model import Report

    stored: list[str] = []

    def report(x: str | Path | Report, side: str) -> Report:
        if isinstance(x, Report):
            return x
        if is_report(x):
            stored.append(side)
            return read_report(x)
        return read(x, progress=progress)

    d = compare(report(base, "BASE"), report(new, "NEW"))
    for side in stored:
        d.notes.append(f"{side} is a stored report: input changes are not compared")
    return d


def expand_report(doc: Any) -> Any:
    """A stored `tlview.report/1` or `tlview.diff/1` document, as `json.load` gives it, with
    every reference to its strings table (`{"$s": key}`) replaced by the string and the table
    removed (docs/formats.md#the-strings-table); the caller's document is left as it was.
    Raises TlviewError when a reference names no entry of the table."""
    from tlview.strings import expand

    return expand(doc)


def artifacts(
    log: Log, compile_id: str, *, progress: bool | BarLike | None = False, launch: int | None = None
) -> list[tuple[str, Payload]]:
    """A compile's artifacts (its graphs, code, guards and other payloads) in log order, by the
    names `artifact` takes: their kind, `KIND#N` for the Nth of a kind, and for inductor's the
    graph they are of (`inductor_output_code#2 (backward)`), each md5 checked (`ok`). Texts are
    not kept."""
    from tlview.analyze.names import find_compile, listed_artifacts, plain_ref
    from tlview.index.keep import Keep
    from tlview.model import Report

    if not isinstance(log, Report):
        keep = Keep(check=True, compile=plain_ref(compile_id).rpartition(":")[2])
        log = read(log, keep=keep, progress=progress, launch=launch)
    return listed_artifacts(find_compile(log, compile_id))


def artifact(
    log: str | Path,
    compile_id: str,
    name: str,
    *,
    progress: bool | BarLike | None = False,
    launch: int | None = None,
) -> Payload:
    """One artifact of a compile, its exact bytes (as the log holds them, md5 checked: `ok`)
    in `data`; None there when torch logged it without a payload. The log is read twice: to
    find the artifact's record, then to keep its bytes alone (never the others of its kind)."""
    from tlview.analyze.names import find_artifact, find_compile, plain_ref
    from tlview.index.keep import Keep

    compile_id = plain_ref(compile_id)
    report = read(log, progress=progress, launch=launch)
    found = find_artifact(report, find_compile(report, compile_id), name)[1]
    line = found.line
    whole = 1 << 62
    keep = Keep(
        payload_bytes=whole,
        total_bytes=whole,
        kinds=frozenset({found.kind}),
        compile=compile_id.rpartition(":")[2],
        exact=True,
        line=line,
    )
    report = read(log, keep=keep, progress=progress, launch=launch)
    c = find_compile(report, compile_id)
    return find_artifact(report, c, name)[1]


def _options(
    mode: str, seed: int, device: str | None, max_bytes: int | None, allow_import: Sequence[str]
) -> RebuildOptions:
    """The one record of what a rebuild was asked, from the keywords the API takes."""
    from tlview.replay.thirdparty import check_names
    from tlview.tensors.options import DEFAULT_MAX_BYTES, RebuildOptions

    check_names(allow_import)  # a dotted module name, as `repro` takes: else a usage error
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    return RebuildOptions(
        mode=mode, seed=seed, device=device, max_bytes=limit, allow_import=allow_import
    )


def _compile(log: Log | Compile, compile_id: str | None, what: str) -> Compile:
    """The compile a function was given, or the one COMPILE_ID names in the log."""
    from tlview.analyze.names import find_compile
    from tlview.errors import EXIT_USAGE
    from tlview.model import Compile, Report

    if isinstance(log, Compile):
        return log
    if compile_id is None:
        raise TlviewError(f"{what}: give a compile id", EXIT_USAGE)
    return find_compile(log if isinstance(log, Report) else read(log), compile_id)


def _graphs(log: Log, progress: bool | BarLike | None, launch: int | None = None) -> Report:
    """The report a repro reads: graph code kept, one log at a time."""
    from tlview.model import Report

    if isinstance(log, Report):
        return log
    from tlview.replay.make import graph_keep

    return read(log, keep=graph_keep(), progress=progress, jobs=1, launch=launch)


def _dir(out: str | Path | None) -> Path | None:
    """A repro's output directory, checked before the log is read; torch, which every repro
    needs, looked for first (exit 5 without it)."""
    from tlview.replay.script import check_dir
    from tlview.tensors.dtypes import need_torch

    need_torch("writing a repro")
    if out is None:
        return None
    check_dir(Path(out))
    return Path(out)
