"""Making repros: one compile's or every graph's of a report, written, run with --run, and
summed up in summary.json and the lines a person reads."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tlview import __version__
from tlview.analyze.names import GRAPH_KIND, graphs, select
from tlview.errors import EXIT_NO_REPRO, EXIT_REFUSED, TlviewError
from tlview.index.keep import Keep
from tlview.model import Compile, Report
from tlview.replay.plan import MAX_GRAPH_BYTES, MAX_TOTAL_BYTES, plan
from tlview.replay.run import WARNING, run_scripts
from tlview.replay.script import INPUTS, SCRIPT, slug, write_files
from tlview.units import nbytes

SUMMARY = "summary.json"
SUMMARY_FORMAT = "tlview.repro/1"

# What became of one graph: its repro ran (and matched), ran and differed, failed, was written
# (not run), cannot run here, or was not made; in the order the summary lists them.
OutcomeStatus = Literal["ran", "mismatch", "failed", "written", "blocked", "skipped"]
OUTCOMES: tuple[OutcomeStatus, ...] = get_args(OutcomeStatus)


@dataclass(slots=True)
class Outcome:
    """What happened to one graph: written, run, or why not."""

    ref: str
    log: str
    compile_id: str
    dir: str | None  # the repro's directory, relative to the output directory
    status: OutcomeStatus
    reason: str | None = None
    outputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "compile": self.ref,
            "log": self.log,
            "compile_id": self.compile_id,
            "dir": self.dir,
            "status": self.status,
            "reason": self.reason,
            "outputs": self.outputs,
            "notes": self.notes,
        }


def graph_keep(compile_key: str | None = None) -> Keep:
    """Keep the graph code of one compile (or of all), nothing else."""
    return Keep(
        payload_bytes=MAX_GRAPH_BYTES,
        total_bytes=MAX_TOTAL_BYTES,
        kinds=frozenset({GRAPH_KIND}),
        compile=compile_key,
    )


@dataclass(slots=True)
class ReproOptions:
    backend: str | None = None
    device: str | None = None
    mode: str = "random"  # values of the rebuilt inputs: random or zeros
    seed: int = 0
    run: bool = False
    force: bool = False
    warn: bool = True  # say before running that the repros run code from the log
    # The bytes of inputs all the repros of a run may build and write (None: `default_bytes`).
    max_bytes: int | None = None


@dataclass(slots=True)
class ReproBudget:
    """--max-bytes over everything a run of repros writes: each graph's inputs are measured
    before they are built (what is allocated is what inputs.pt holds), and what is written
    counts against the graphs after it."""

    limit: int
    used: int = 0

    def check(self, c: Compile) -> None:
        """Refuse (before allocating anything) the inputs of a compile that do not fit."""
        from tlview.tensors.plans import plans_for, real_bytes

        need = real_bytes(plans_for(c)[1], saved=True)
        if self.used + need > self.limit:
            written = f", {nbytes(self.used)} of it taken by the repros before" if self.used else ""
            raise TlviewError(
                f"they need {nbytes(need)} of memory and as much on disk, over --max-bytes "
                f"{nbytes(self.limit)}{written}",
                EXIT_REFUSED,
            )

    def wrote(self, d: Path) -> None:
        for name in (SCRIPT, INPUTS):
            with contextlib.suppress(OSError):
                self.used += (d / name).stat().st_size


def default_bytes(out: Path | None) -> int:
    """Half of this machine's memory, and at most half of the free space where OUT is."""
    from tlview.tensors.options import DEFAULT_MAX_BYTES

    where = Path(tempfile.gettempdir()) if out is None else out.absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return DEFAULT_MAX_BYTES
    return min(DEFAULT_MAX_BYTES, free // 2)


def rebuilder(opts: ReproOptions, budget: ReproBudget) -> Callable[[Compile], Any]:
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.real import build_real

    how = RebuildOptions(mode=opts.mode, seed=opts.seed, device=opts.device, max_bytes=1 << 62)

    def build(c: Compile) -> Any:
        budget.check(c)  # a TlviewError: the plan says "inputs not rebuilt: <why>"
        return build_real(c, how)

    return build


def make_one(report: Report, compile_id: str, out: Path | None, opts: ReproOptions) -> Outcome:
    """The repro of one compile: written to OUT, and run with --run."""
    ref, c, moved = select(report, compile_id)
    budget = ReproBudget(default_bytes(out) if opts.max_bytes is None else opts.max_bytes)
    p = plan(ref, c, report, rebuilder(opts, budget), opts.device)
    if moved:
        p.notes.insert(0, moved)
    outcome = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
    if p.fatal:
        return outcome
    with _directory(out) as d:
        try:
            write_files(p, d, opts.backend, opts.force, opts.mode)
        except TlviewError as e:
            if e.exit_code != EXIT_NO_REPRO:
                raise
            outcome.reason = e.message  # the script a hostile graph would make: refused
            return outcome
        outcome.dir = str(d)
        outcome.status = "blocked" if p.blockers else "written"
        if opts.run and not p.blockers:
            if opts.warn:
                print(WARNING.format(script=d / SCRIPT), file=sys.stderr, flush=True)
            res = run_scripts([d], echo=True).get(d, {})
            _apply(outcome, res)
    return outcome


@contextlib.contextmanager
def _directory(out: Path | None) -> Iterator[Path]:
    if out is not None:
        yield out
        return
    tmp = Path(tempfile.mkdtemp(prefix="tlview-repro-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_all(report: Report, out: Path, opts: ReproOptions) -> list[Outcome]:
    """One repro per graph in the report, under OUT/<compile>/, and OUT/summary.json. A graph
    that cannot be written is one skipped entry with its reason; the others are written."""
    outcomes: list[Outcome] = []
    made: list[tuple[Outcome, Path]] = []
    budget = ReproBudget(default_bytes(out) if opts.max_bytes is None else opts.max_bytes)
    rebuild = rebuilder(opts, budget)
    folders = Folders()
    for ref, c in graphs(report):
        try:
            p = plan(ref, c, report, rebuild, opts.device)
        except TlviewError:
            raise
        except Exception as e:  # a bug for one graph must not lose the others' repros
            reason = f"internal error in tlview: {type(e).__name__}: {e}"[:300]
            outcomes.append(Outcome(ref, c.log, c.key, None, "skipped", reason))
            continue
        o = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
        outcomes.append(o)
        if p.fatal:
            continue
        d = out / folders.take(ref)
        try:
            write_files(p, d, opts.backend, opts.force, opts.mode)
        except TlviewError as e:  # a file in the way, a hostile graph's script refused
            o.reason = e.message
            continue
        except OSError as e:  # a name or a disk this file system refuses
            o.reason = f"{d}: cannot write: {e.strerror or e}"
            continue
        finally:
            p.rebuilt = None  # free the tensors before the next graph
        budget.wrote(d)
        o.dir = d.name
        o.status = "blocked" if p.blockers else "written"
        if not p.blockers:
            made.append((o, d))
    if opts.run and made:
        if opts.warn:
            print(WARNING.format(script=out / "*" / SCRIPT), file=sys.stderr, flush=True)
        results = run_scripts([d for _, d in made])
        for o, d in made:
            _apply(o, results.get(d, {}))
    write_summary(report, out, outcomes, opts)
    return outcomes


class Folders:
    """The directory names of one run's repros: each its compile's slug, made unique (`a b.log`
    and `a_b.log` give one slug, and so do names that differ in case only, on a file system
    that ignores case) by a number after it."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def take(self, ref: str) -> str:
        base = name = slug(ref)
        n = 1
        while name.lower() in self.taken:
            n += 1
            name = f"{base}-{n}"
        self.taken.add(name.lower())
        return name


def _apply(o: Outcome, res: dict[str, Any]) -> None:
    status = res.get("status")
    o.status = status if status in ("ran", "mismatch", "failed") else "failed"
    o.reason = res.get("reason") if o.status != "ran" else None
    if o.status == "failed" and not o.reason:
        o.reason = "the repro did not report a result"
    outs = res.get("outputs")
    o.outputs = [str(x) for x in outs] if isinstance(outs, list) else []


def write_summary(
    report: Report, out: Path, outcomes: Iterable[Outcome], opts: ReproOptions
) -> None:
    from tlview.runtime.output import output as open_output

    items = list(outcomes)
    counts = {s: sum(o.status == s for o in items) for s in OUTCOMES}
    obj = {
        "format": SUMMARY_FORMAT,
        "written_by": f"tlview {__version__}",
        "path": report.path,
        "torch_version": report.torch_version,
        "backend": opts.backend,
        "ran": opts.run,
        "counts": {k: v for k, v in counts.items() if v},
        "graphs": [o.as_json() for o in items],
    }
    out.mkdir(parents=True, exist_ok=True)
    with open_output(str(out / SUMMARY), opts.force) as f:
        f.write(json.dumps(obj, indent=1).encode("utf-8") + b"\n")


def summary_lines(outcomes: list[Outcome], ran: bool) -> list[str]:
    """The summary a person reads: one line per graph, then the counts."""
    width = max((len(o.ref) for o in outcomes), default=7)
    lines = []
    for o in outcomes:
        line = f"{o.ref:<{width}}  {o.status:<8}  {o.reason or ''}"
        lines.append(line.rstrip())
    counts = {s: sum(o.status == s for o in outcomes) for s in OUTCOMES}
    total = len(outcomes)
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    head = f"{total} graph(s): " + ", ".join(parts) if total else "no graphs in the log"
    if ran and total:
        head += f"; {counts['ran']}/{total} ran and match the logged shapes"
    lines.append(head)
    return lines
