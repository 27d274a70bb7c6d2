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
from tlview.errors import TlviewError
from tlview.index.keep import Keep
from tlview.model import Compile, Report
from tlview.replay.plan import MAX_GRAPH_BYTES, MAX_TOTAL_BYTES, plan
from tlview.replay.run import WARNING, run_scripts
from tlview.replay.script import SCRIPT, make_dir, slug, write_files

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


def rebuilder(opts: ReproOptions) -> Callable[[Compile], Any]:
    from tlview.tensors.dtypes import need_torch
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.real import build_real

    need_torch("writing a repro")  # exit 5, as for every command that needs torch

    how = RebuildOptions(mode=opts.mode, seed=opts.seed, device=opts.device)
    return lambda c: build_real(c, how)


def make_one(report: Report, compile_id: str, out: Path | None, opts: ReproOptions) -> Outcome:
    """The repro of one compile: written to OUT, and run with --run."""
    ref, c, moved = select(report, compile_id)
    p = plan(ref, c, report, rebuilder(opts), opts.device)
    if moved:
        p.notes.insert(0, moved)
    outcome = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
    if p.fatal:
        return outcome
    with _directory(out) as d:
        write_files(p, d, opts.backend, opts.force, opts.mode)
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
        write_files(p, d, opts.backend, opts.force, opts.mode)
        o.dir = d.name
        o.status = "blocked" if p.blockers else "written"
        if not p.blockers:
            made.append((o, d))
        p.rebuilt = None  # free the tensors before the next graph
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
    make_dir(out)
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
