"""The terminal's lines for where compile time went, run-time work, CUDA graphs, guard origins,
missing artifacts and the records without a compile id (analyze/facts.py works them out).

No line starts with text from a log: each starts with a figure or with tlview's own words, and
a line feed inside a name from a log is written `\\n` (`one`), so no field starts a line."""

from __future__ import annotations

from rich.console import Console

from tlview.analyze.compiles import Analysis
from tlview.analyze.facts import metrics_line, phases_line, share
from tlview.analyze.owners import Owners
from tlview.analyze.phases import RunPhases, SpanNode, top
from tlview.analyze.runfacts import RunFacts
from tlview.analyze.summary import Overview
from tlview.render.text.console import T, table
from tlview.render.text.tables import footnote
from tlview.units import count, seconds

TOP_PHASES = 8  # rows of the run's phase table (-v: TOP_PHASES_V)
TOP_PHASES_V = 25
MAX_ORIGINS = 8  # origin lines under a compile (shown in full: MAX_ORIGINS_FULL)
MAX_ORIGINS_FULL = 200
MAX_SKIPS = 3  # skip reasons in the headline
MAX_GROUPS = 10  # writers of records without an id listed per log
MAX_OWNER_LOGS = 4  # logs whose records without an id are listed (-v: all)
MAX_NAMES = 6  # record names listed in one cell or line
TREE_DEPTH = 3  # levels of a compile's nesting shown in full
TREE_KIDS = 8  # spans listed under one

KIND_WORDS = {
    "guard": "failed guard",
    "scalar": "specialised scalar",
    "symbol": "dynamic size",
    "specialization": "specialised",
    "unbacked": "data-dependent",
    "autograd": "compiled autograd",
}


def one(text: object) -> str:
    """Text from a log kept on its line: a line feed in it written as `\\n`."""
    return str(text).replace("\n", "\\n")


def compile_time_text(o: Overview) -> str:
    """The headline's compile time: compilation_metrics' total, else the time the spans cover
    (an export's AOTInductor build logs spans and no compile time)."""
    if o.timed:
        return f"{o.compile_time_s:.2f} s compiling"
    time = o.facts.time
    if time is not None and time.spans_s > 0:
        return f"{time.spans_s:.2f} s compiling (from spans: no compilation_metrics time)"
    return "compile time not logged"


def skips_text(f: RunFacts) -> str | None:
    """The headline's CUDA graph skips, by reason: `2 CUDA graph skips (cpu device x2)`."""
    if not f.skipped:
        return None
    reasons = [f"{one(r)} x{n}" for r, n in list(f.skips.items())[:MAX_SKIPS]]
    if len(f.skips) > MAX_SKIPS:
        reasons.append(f"{len(f.skips) - MAX_SKIPS} more reasons")
    return f"{count(f.skipped, 'CUDA graph skip')} ({', '.join(reasons)})"


def spans_note(o: Overview) -> str | None:
    """What `~` in the compile table means, when a row has it."""
    n = o.facts.spans_only
    if not n:
        return None
    return (
        f"~: {count(n, 'compile')} whose compilation_metrics give no time: the time its spans "
        "cover (an export's AOTInductor build, a precompile)"
    )


def phase_table(o: Overview, console: Console, verbose: bool) -> None:
    """The phases that took the most time of their own over the run, with their inclusive
    time and count, then the metric times beside them."""
    run = o.facts.time
    if run is None or not run.spans:
        return
    most = TOP_PHASES_V if verbose else TOP_PHASES
    t = table("Compile time by phase", "own", "share", "inclusive", "count", "phase",
              console=console)  # fmt: skip
    for s in top(run.spans, most):
        t.add_row(
            T(seconds(s.exclusive_s)),
            T(share(s.exclusive_s, run.spans_s)),
            T(seconds(s.inclusive_s)),
            T(s.count),
            T(one(s.name)),
        )
    console.print(t)
    _run_notes(run, console, most)


def _run_notes(run: RunPhases, console: Console, most: int) -> None:
    outside = f", {seconds(run.outside_s)} of it without a compile id" if run.outside_s else ""
    of = f"the {most} of {len(run.spans)} phases" if len(run.spans) > most else "the phases"
    footnote(
        f"{of} with the most time of their own (the innermost open), of "
        f"{seconds(run.spans_s)} in spans{outside}; --compile-id ID nests a compile's",
        console,
    )
    line = metrics_line(run.metrics, run.caches)
    if line:
        console.print(T(f"compilation_metrics beside the phases: {line}", "dim"))
    if run.open:
        footnote(f"{count(run.open, 'span')} began and never ended (not counted)", console)


def compile_lines(a: Analysis, console: Console, full: bool) -> None:
    """What a compile's detail says of its time, run-time work, CUDA graphs, origins, what it
    lacks and its failure artifacts: one line each."""
    lines = [*_time_lines(a), *_origin_lines(a, full), *_gap_lines(a)]
    for text, style in lines:
        console.print(T(one(text), style))
    if full:
        _full(a, console)


def _time_lines(a: Analysis) -> list[tuple[str, str]]:
    """Where its time went (an attempt that restarted: in its compile's), what it did at run
    time, its CUDA graphs."""
    cp = a.phases
    said = phases_line(cp) if a.counted or a.compile.id is None else None
    out = [(f"  phases: {said}", "dim")] if said else []
    if cp.open:
        out.append((f"  never ended: {', '.join(cp.open[:MAX_NAMES])}", "magenta"))
    out += [(f"  {w.words}", "") for w in a.runtime]
    if a.cudagraphs.state != "not asked":
        out.append((f"  {a.cudagraphs.words}", "yellow" if a.cudagraphs.reason else ""))
    return out


def _gap_lines(a: Analysis) -> list[tuple[str, str]]:
    """What it lacks, and the failures torch logged as artifacts beside it."""
    out = [(f"  missing: {a.missing_line}", "dim")] if a.missing_line else []
    for t in a.troubles:
        out.append((f"  {t.what} (log line {t.line}): {t.text}", "red" if t.fatal else "yellow"))
    return out


def _origin_lines(a: Analysis, full: bool) -> list[tuple[str, str]]:
    most = MAX_ORIGINS_FULL if full else MAX_ORIGINS
    got = a.origins
    out = [(f"  {KIND_WORDS.get(o.kind, o.kind)}: {o.said}", "") for o in got[:most]]
    if len(got) > most:
        more = "" if full else " (--compile-id ID lists them all)"
        out.append((f"  ... {len(got) - most} more origins{more}", "dim"))
    return out


def _full(a: Analysis, console: Console) -> None:
    """A compile shown in full: its metric times and its spans' nesting, TREE_DEPTH deep."""
    cp = a.phases
    line = metrics_line(cp.metrics, cp.caches)
    if line:
        console.print(T(f"  compilation_metrics beside the phases: {line}", "dim"))
    if cp.tree and (a.counted or a.compile.id is None):
        console.print(T("  phases nested (inclusive, own, count):", "dim"))
        console.print(T("\n".join(tree_lines(cp.tree, 2, TREE_DEPTH)), "dim"))


def tree_lines(nodes: list[SpanNode], indent: int, depth: int) -> list[str]:
    """Spans as torch nested them, `depth` levels, at most TREE_KIDS under one."""
    out: list[str] = []
    pad = " " * (indent + 2)
    for n in nodes[:TREE_KIDS]:
        out.append(
            f"{pad}{seconds(n.inclusive_s)} incl, {seconds(n.exclusive_s)} own, x{n.count}: "
            f"{one(n.name)}"
        )
        if depth > 1 and n.children:
            out += tree_lines(n.children, indent + 2, depth - 1)
    if len(nodes) > TREE_KIDS:
        out.append(f"{pad}... {len(nodes) - TREE_KIDS} more")
    return out


def owners_section(o: Overview, console: Console, verbose: bool) -> None:
    """Who the records without a compile id belong to: the compile where torch's order makes
    it certain, else the code that wrote them; the names tlview does not read. Of the logs
    where some are unowned or unknown (`Owners.unexplained`); -v: of every log."""
    shown = [x for x in o.facts.owners if verbose or x[2].unexplained]
    if not shown:
        return
    console.print(T("Records without a compile id", "bold"))
    console.print(
        T(
            "  of each log: the compile they belong to where torch's order makes it "
            "certain, else the code that wrote them",
            "dim",
        )
    )
    most = len(shown) if verbose else MAX_OWNER_LOGS
    for _, ref, ow in shown[:most]:
        _owners(ref, ow, console)
    if len(shown) > most:
        footnote(f"... {len(shown) - most} more logs with such records: -v lists them", console)


def _names(counts: dict[str, int]) -> str:
    """Record names with their counts, at most MAX_NAMES: `a x2, b x1, 3 more`."""
    out = [f"{n} x{k}" for n, k in list(counts.items())[:MAX_NAMES]]
    if len(counts) > MAX_NAMES:
        out.append(f"{len(counts) - MAX_NAMES} more")
    return one(", ".join(out))


def _owners(ref: str, ow: Owners, console: Console) -> None:
    by: dict[str, dict[str, int]] = {}
    for x in ow.attached:
        got = by.setdefault(x.compile, {})
        got[x.name] = got.get(x.name, 0) + x.count
    for key, names in by.items():
        console.print(T(f"  of {one(ref)}, belonging to compile {key}: {_names(names)}", "dim"))
    if ow.groups:
        t = table(f"records of {one(ref)} by what wrote them", "count", "written by",
                  "records", "user line", console=console)  # fmt: skip
        for g in ow.groups[:MAX_GROUPS]:
            t.add_row(T(g.count), T(one(g.writer)), T(_names(g.names)), T(one(g.user or "")))
        console.print(t)
        if len(ow.groups) > MAX_GROUPS:
            footnote(f"... {len(ow.groups) - MAX_GROUPS} more writers", console)
    if ow.unknown:
        console.print(
            T(f"  of {one(ref)}, names tlview does not read: {_names(ow.unknown)}", "dim")
        )
