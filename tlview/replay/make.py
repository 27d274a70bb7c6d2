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
from typing import TYPE_CHECKING, Any, Literal, get_args

from tlview.analyze.names import GRAPH_KIND, graphs, select
from tlview.errors import EXIT_NO_REPRO, EXIT_REFUSED, TlviewError
from tlview.index.keep import Keep
from tlview.model import Compile, Report
from tlview.replay import DEFAULT_TIMEOUT
from tlview.replay.child import via_words
from tlview.replay.plan import MAX_GRAPH_BYTES, MAX_TOTAL_BYTES, plan
from tlview.replay.planned import Plan
from tlview.replay.run import WARNING, run_scripts
from tlview.replay.script import INPUTS, SCRIPT, make_dir, slug, write_files
from tlview.units import nbytes
from tlview.version import __version__

if TYPE_CHECKING:
    from tlview.tensors.rebuilt import Rebuilt

SUMMARY = "summary.json"
SUMMARY_FORMAT = "tlview.repro/1"

# What became of one graph: its repro ran (and matched), ran and differed (from the log's
# annotations, or with --check-accuracy from eager beyond the tolerance), ran with
# --check-accuracy but had nothing to compare, failed, was written (not run), cannot run here,
# or was not made; in the order the summary lists them.
OutcomeStatus = Literal[
    "ran", "mismatch", "inaccurate", "unchecked", "failed", "written", "blocked", "skipped"
]  # fmt: skip
# What --check-accuracy compares, each kind as summary.json counts it.
COMPARED = {
    "output": "outputs",
    "changed in place": "changed_inputs",
    "logged value": "logged_values",
}
Check = tuple[str, str, float | None, float, str]  # name, verdict, difference, tolerance, what
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
    # Each output against the log's annotation after a run: name, "reproduced" or what differs
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    # Each .item() value the log holds against the graph's, run as it is: name, verdict
    values: list[tuple[str, str]] = field(default_factory=list)
    # --check-accuracy: name, "agrees"/"disagrees", largest difference (None: not comparable),
    # tolerance, and what it is (an output, an input changed in place, a logged value)
    accuracy: list[Check] = field(default_factory=list)
    accuracy_backend: str | None = None  # what eager was compared with
    accuracy_via: str | None = None  # "backend": the graph handed to it; "dynamo": torch.compile
    compared: dict[str, int] = field(default_factory=dict)  # what --check-accuracy compared
    fallback: str | None = None  # why the backend could not take the graph handed to it

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
            "verdicts": [{"output": n, "verdict": v} for n, v in self.verdicts],
            **(
                {"values": [{"value": n, "verdict": v} for n, v in self.values]}
                if self.values
                else {}
            ),
            **(
                {
                    "accuracy_backend": self.accuracy_backend,
                    "accuracy_via": self.accuracy_via,
                    "compared": self.compared,
                    "accuracy": [
                        {"output": n, "what": w, "verdict": v, "max_difference": d, "tolerance": t}
                        for n, v, d, t, w in self.accuracy
                    ],
                }
                if self.accuracy_backend
                else {}
            ),
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
    world: str = "gloo"  # a collective graph's world: N gloo processes, or torch's fake group
    timeout: float | None = DEFAULT_TIMEOUT  # seconds each repro may run (--timeout)
    allow_import: tuple[str, ...] = ()  # packages whose ops and tensor subclasses it may import
    check_accuracy: bool = False  # run eagerly and under the backend, and compare the values
    via: str = "backend"  # hand the graph to the backend, or go through torch.compile ("dynamo")


@dataclass(slots=True)
class ReproBudget:
    """--max-bytes over everything a run of repros writes: each graph's inputs (every rank's)
    are measured before they are built (what is allocated is what inputs.pt holds), and what is
    written counts against the graphs after it."""

    limit: int
    used: int = 0  # bytes the repros written so far hold on disk
    held: int = 0  # bytes of the inputs built for the graph being written

    def check(self, c: Compile) -> None:
        """Refuse (before allocating anything) the inputs of a compile that do not fit."""
        from tlview.tensors.plans import plans_for, real_bytes

        need = real_bytes(plans_for(c)[1], saved=True)
        if self.used + self.held + need > self.limit:
            taken = [f"{nbytes(self.used)} of it taken by the repros before"] if self.used else []
            if self.held:
                taken.append(f"{nbytes(self.held)} by the other ranks' inputs of this graph")
            raise TlviewError(
                f"they need {nbytes(need)} of memory and as much on disk, over --max-bytes "
                f"{nbytes(self.limit)}{''.join(', ' + t for t in taken)}",
                EXIT_REFUSED,
            )
        self.held += need

    def settle(self, d: Path | None) -> None:
        """The graph is done: what its files in D hold (none if not written) counts from now."""
        self.held = 0
        if d is None:
            return
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


def rebuilder(opts: ReproOptions, budget: ReproBudget) -> Callable[[Compile], Rebuilt]:
    from tlview.tensors.dtypes import need_torch
    from tlview.tensors.options import RebuildOptions
    from tlview.tensors.real import build_real

    need_torch("writing a repro")  # exit 5, as for every command that needs torch

    how = RebuildOptions(
        mode=opts.mode,
        seed=opts.seed,
        device=opts.device,
        max_bytes=1 << 62,
        allow_import=opts.allow_import,
    )

    def build(c: Compile) -> Rebuilt:
        budget.check(c)  # a TlviewError: the plan says "inputs not rebuilt: <why>"
        return build_real(c, how)

    return build


MAX_LOCAL_WORLD = 16  # gloo processes a repro starts on this machine, each with its own torch


def world(p: Plan, report: Report, opts: ReproOptions, budget: ReproBudget) -> None:
    """A collective graph's world: N gloo processes here, each with the inputs of its own
    rank's log where the report has it, or one process on torch's fake process group."""
    if not p.collectives or p.fatal or _one_process(p, opts):
        return
    n = p.world
    c_rank = p.compile.rank if p.compile.rank is not None else 0
    missing = _rank_inputs(p, report, opts, budget)
    if missing is None:
        return
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


def _one_process(p: Plan, opts: ReproOptions) -> bool:
    """A world that runs in one process (torch's fake group, a group of one) or not here
    (too many ranks): say so; False for a gloo world of N processes."""
    n = p.world
    if opts.world == "fake":
        p.notes.append(
            f"the graph runs collectives: here in one process on torch's fake process group of "
            f"{n} rank(s) (--world fake): shapes only, no communication, so values are not the "
            "job's"
        )
        return True
    if n == 1:
        p.notes.append(
            "the graph runs collectives on a process group of one rank: values differ from "
            "the job's"
        )
        return True
    if n > MAX_LOCAL_WORLD:
        p.blockers.append(
            f"the graph's collectives ran on {n} ranks: more gloo processes than a repro starts "
            f"here ({MAX_LOCAL_WORLD}); --world fake runs it in one process on shapes alone"
        )
        return True
    return False


def _rank_inputs(
    p: Plan, report: Report, opts: ReproOptions, budget: ReproBudget
) -> list[int] | None:
    """Each rank's inputs into the plan, from its own log where the report has it: the ranks
    that have none (they run on this compile's); None when a rank's failed (the plan fatal)."""
    own = p.compile.rank if p.compile.rank is not None else 0
    logs = {lg.process: lg for lg in report.logs if lg.process}
    missing = []
    for r in range(p.world):
        if r == own:
            p.ranks.append((r, p.rebuilt))
            continue
        lg = logs.get(f"rank{r}")
        c = next((x for x in lg.compiles if x.key == p.compile.key), None) if lg else None
        if c is None or not c.inputs:
            missing.append(r)
            p.ranks.append((r, p.rebuilt))
            continue
        try:
            p.ranks.append((r, rebuilder(replace(opts, seed=opts.seed + r), budget)(c)))
        except TlviewError as e:
            p.fatal = f"inputs of rank {r} not rebuilt: {e.message}"
            p.rebuilt, p.ranks = None, []
            return None
    return missing


def make_one(report: Report, compile_id: str, out: Path | None, opts: ReproOptions) -> Outcome:
    """The repro of one compile: written to OUT, and run with --run."""
    ref, c, moved = select(report, compile_id)
    budget = ReproBudget(default_bytes(out) if opts.max_bytes is None else opts.max_bytes)
    p = plan(ref, c, report, rebuilder(opts, budget), opts.device, opts.mode, opts.allow_import)
    world(p, report, opts, budget)
    if moved:
        p.notes.insert(0, moved)
    outcome = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
    if p.fatal:
        return outcome
    with _directory(out) as d:
        try:
            write_files(
                p, d, opts.backend, opts.force, opts.mode, opts.world, opts.check_accuracy, opts.via
            )
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
            res = run_scripts([d], echo=True, timeout=opts.timeout).get(d, {})
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
        budget.settle(None)  # what a graph skipped before it built is no longer held
        o, p = _planned(ref, c, report, rebuild, opts, budget)
        outcomes.append(o)
        if p is None or p.fatal:
            continue
        d = out / folders.take(ref)
        if _write(o, p, d, opts, budget):
            made.append((o, d))
    if opts.run and made:
        if opts.warn:
            print(WARNING.format(script=out / "*" / SCRIPT), file=sys.stderr, flush=True)
        results = run_scripts([d for _, d in made], timeout=opts.timeout)
        for o, d in made:
            _apply(o, results.get(d, {}))
    write_summary(report, out, outcomes, opts)
    return outcomes


def _planned(
    ref: str,
    c: Compile,
    report: Report,
    rebuild: Callable[[Compile], Rebuilt],
    opts: ReproOptions,
    budget: ReproBudget,
) -> tuple[Outcome, Plan | None]:
    """One graph's plan and its outcome so far (skipped, with the reason, when it failed)."""
    try:
        p = plan(ref, c, report, rebuild, opts.device, opts.mode, opts.allow_import)
        world(p, report, opts, budget)
    except TlviewError:
        raise
    except Exception as e:  # a bug for one graph must not lose the others' repros
        reason = f"internal error in tlview: {type(e).__name__}: {e}"[:300]
        return Outcome(ref, c.log, c.key, None, "skipped", reason), None
    return Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes)), p


def _write(o: Outcome, p: Plan, d: Path, opts: ReproOptions, budget: ReproBudget) -> bool:
    """Write one graph's repro into D (its outcome says what became of it): whether it is one
    to run."""
    written = False
    try:
        write_files(
            p, d, opts.backend, opts.force, opts.mode, opts.world, opts.check_accuracy, opts.via
        )
        written = True
    except TlviewError as e:  # a file in the way, a hostile graph's script refused
        o.reason = e.message
        return False
    except OSError as e:  # a name or a disk this file system refuses
        o.reason = f"{d}: cannot write: {e.strerror or e}"
        return False
    finally:
        p.rebuilt, p.ranks = None, []  # free the tensors before the next graph
        budget.settle(d if written else None)
    o.dir = d.name
    o.status = "blocked" if p.blockers else "written"
    return not p.blockers


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
    ran = ("ran", "mismatch", "inaccurate", "unchecked", "failed")
    o.status = status if status in ran else "failed"
    o.reason = res.get("reason") if o.status != "ran" else None
    if o.status == "failed" and not o.reason:
        o.reason = "the repro did not report a result"
    outs = res.get("outputs")
    o.outputs = [str(x) for x in outs] if isinstance(outs, list) else []
    o.verdicts = _verdicts(res.get("verdicts"))
    o.values = _verdicts(res.get("values"))
    _apply_accuracy(o, res)
    if isinstance(res.get("fallback"), str):
        o.fallback = res["fallback"]
        o.notes.append(o.fallback)


def _apply_accuracy(o: Outcome, res: dict[str, Any]) -> None:
    """--check-accuracy's result, as the child reported it, into the outcome."""
    acc = res.get("accuracy")
    named = res.get("accuracy_backend")
    o.accuracy_backend = named if isinstance(named, str) and isinstance(acc, list) else None
    via = res.get("accuracy_via")
    o.accuracy_via = via if isinstance(via, str) and o.accuracy_backend else None
    o.accuracy = _accuracy(acc)
    o.compared = _compared(o) if o.accuracy_backend else {}


def _verdicts(got: Any) -> list[tuple[str, str]]:
    """Each output's verdict as the child reported it: [name, verdict] pairs."""
    return [
        (str(v[0]), str(v[1]))
        for v in (got if isinstance(got, list) else [])
        if isinstance(v, list) and len(v) == 2
    ]


def _accuracy(acc: Any) -> list[Check]:
    """--check-accuracy's verdicts as the child reported them: [name, verdict, worst, tol,
    what]."""
    return [
        (str(a[0]), str(a[1]), a[2] if isinstance(a[2], float) else None, float(a[3]), str(a[4]))
        for a in (acc if isinstance(acc, list) else [])
        if isinstance(a, list) and len(a) == 5 and isinstance(a[3], int | float)
    ]


def _compared(o: Outcome) -> dict[str, int]:
    """How many values of each kind --check-accuracy compared (the logged values the run
    checked too)."""
    out = {key: sum(a[4] == what for a in o.accuracy) for what, key in COMPARED.items()}
    out["logged_values"] += len(o.values)
    return out


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
        **({"compared": _total(items)} if opts.check_accuracy and opts.run else {}),
        "graphs": [o.as_json() for o in items],
    }
    make_dir(out)
    with open_output(str(out / SUMMARY), opts.force) as f:
        f.write(json.dumps(obj, indent=1).encode("utf-8") + b"\n")


def _total(items: list[Outcome]) -> dict[str, int]:
    """What --check-accuracy compared over all graphs, by kind."""
    return {key: sum(o.compared.get(key, 0) for o in items) for key in COMPARED.values()}


def summary_lines(outcomes: list[Outcome], ran: bool) -> list[str]:
    """The summary a person reads: one line per graph, then the counts."""
    width = max((len(o.ref) for o in outcomes), default=7)
    lines = []
    for o in outcomes:
        lines += _outcome_lines(o, width)
    counts = {s: sum(o.status == s for o in outcomes) for s in OUTCOMES}
    total = len(outcomes)
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    head = f"{total} graph(s): " + ", ".join(parts) if total else "no graphs in the log"
    if ran and total:
        head += f"; {counts['ran']}/{total} ran and match the logged shapes"
    lines.append(head)
    return lines


def _outcome_lines(o: Outcome, width: int) -> list[str]:
    """One graph's lines: its status and reason, each output's verdict, the accuracy check's."""
    pad = f"{'':<{width}}    "
    lines = [f"{o.ref:<{width}}  {o.status:<8}  {o.reason or ''}".rstrip()]
    lines += [f"{pad}output {n}: {v}" for n, v in o.verdicts]
    lines += [f"{pad}value {n}: {v}" for n, v in o.values]
    if o.accuracy_backend:
        lines.append(
            f"{pad}accuracy: eager against {o.accuracy_backend}{via_words(o.accuracy_via)}"
        )
    lines += [
        f"{pad}accuracy {n}{'' if w == 'output' else f' ({w})'}: {v} "
        f"(largest difference {d}, tolerance {t})"
        for n, v, d, t, w in o.accuracy
    ]
    return lines
