"""Making repros: one compile's or every graph's of a report, written, run with --run, and
summed up in summary.json and the lines a person reads."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from tlview import __version__
from tlview.analyze.names import GRAPH_KIND, graphs, select
from tlview.errors import TlviewError
from tlview.index.keep import Keep
from tlview.model import Compile, Report
from tlview.replay.plan import MAX_GRAPH_BYTES, MAX_TOTAL_BYTES, Plan, plan
from tlview.replay.run import WARNING, run_scripts
from tlview.replay.script import SCRIPT, slug, write_files

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
    world: str = "gloo"  # a collective graph's world: N gloo processes, or torch's fake group


def rebuilder(opts: ReproOptions) -> Callable[[Compile], Any]:
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.real import build_real

    how = RebuildOptions(mode=opts.mode, seed=opts.seed, device=opts.device)
    return lambda c: build_real(c, how)


MAX_LOCAL_WORLD = 16  # gloo processes a repro starts on this machine, each with its own torch


def world(p: Plan, report: Report, opts: ReproOptions) -> None:
    """A collective graph's world: N gloo processes here, each with the inputs of its own
    rank's log where the report has it, or one process on torch's fake process group."""
    if not p.collectives or p.fatal:
        return
    n = p.world
    if opts.world == "fake":
        p.notes.append(
            f"the graph runs collectives: here in one process on torch's fake process group of "
            f"{n} rank(s) (--world fake): shapes only, no communication, so values are not the "
            "job's"
        )
        return
    if n == 1:
        p.notes.append(
            "the graph runs collectives on a process group of one rank: values differ from "
            "the job's"
        )
        return
    if n > MAX_LOCAL_WORLD:
        p.blockers.append(
            f"the graph's collectives ran on {n} ranks: more gloo processes than a repro starts "
            f"here ({MAX_LOCAL_WORLD}); --world fake runs it in one process on shapes alone"
        )
        return
    own = c_rank = p.compile.rank if p.compile.rank is not None else 0
    logs = {lg.process: lg for lg in report.logs if lg.process}
    missing = []
    for r in range(n):
        if r == own:
            p.ranks.append((r, p.rebuilt))
            continue
        lg = logs.get(f"rank{r}")
        c = next((x for x in lg.compiles if x.key == p.compile.key), None) if lg else None
        if c is None or not c.inputs:
            missing.append(r)
            p.ranks.append((r, p.rebuilt))
            continue
        p.ranks.append((r, rebuilder(replace(opts, seed=opts.seed + r))(c)))
    p.notes.append(
        f"the graph runs collectives: here on a world of {n} gloo processes on this machine "
        "(--world fake: one process, shapes only), each rank on the inputs of its own log"
        + (
            f"; ranks {', '.join(map(str, missing))} have no log of compile {p.compile.key} "
            f"here: they run on rank {c_rank}'s"
            if missing
            else ""
        )
    )


def make_one(report: Report, compile_id: str, out: Path | None, opts: ReproOptions) -> Outcome:
    """The repro of one compile: written to OUT, and run with --run."""
    ref, c, moved = select(report, compile_id)
    p = plan(ref, c, report, rebuilder(opts), opts.device)
    world(p, report, opts)
    if moved:
        p.notes.insert(0, moved)
    outcome = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
    if p.fatal:
        return outcome
    with _directory(out) as d:
        write_files(p, d, opts.backend, opts.force, opts.mode, opts.world)
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
    """One repro per graph in the report, under OUT/<compile>/, and OUT/summary.json."""
    outcomes: list[Outcome] = []
    made: list[tuple[Outcome, Path]] = []
    rebuild = rebuilder(opts)
    for ref, c in graphs(report):
        try:
            p = plan(ref, c, report, rebuild, opts.device)
            world(p, report, opts)
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
        d = out / slug(ref)
        write_files(p, d, opts.backend, opts.force, opts.mode, opts.world)
        o.dir = d.name
        o.status = "blocked" if p.blockers else "written"
        if not p.blockers:
            made.append((o, d))
        p.rebuilt, p.ranks = None, []  # free the tensors before the next graph
    if opts.run and made:
        if opts.warn:
            print(WARNING.format(script=out / "*" / SCRIPT), file=sys.stderr, flush=True)
        results = run_scripts([d for _, d in made])
        for o, d in made:
            _apply(o, results.get(d, {}))
    write_summary(report, out, outcomes, opts)
    return outcomes


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
