"""The job summary's tables of where compile time went and of CUDA graph skips, and where a
recompile's failed guard was made (analyze/facts.py works them out)."""

from __future__ import annotations

from tlview.analyze.compiles import Analysis
from tlview.analyze.facts import guard_origins, made_at, share
from tlview.analyze.phases import top
from tlview.analyze.summary import Overview
from tlview.render.markdown.md import MAX_ROWS, table, text
from tlview.units import count, seconds

TOP_PHASES = 8
MORE = "tlview report"


def compile_time(o: Overview) -> str:
    """The summary's compile time: compilation_metrics' (and the outside compiles'), else the
    time the spans cover."""
    if o.timed:
        return f"{o.compile_time_s + o.outside_s:.2f} s"
    if o.facts.time is not None and o.facts.time.spans_s > 0:
        return f"{o.facts.time.spans_s:.2f} s (spans)"
    return f"{o.outside_s:.2f} s" if o.outside_timed else "not logged"


def phases(o: Overview) -> list[str]:
    """The phases that took the most time of their own over the run."""
    run = o.facts.time
    if run is None or not run.spans:
        return []
    rows = [
        [seconds(s.exclusive_s), share(s.exclusive_s, run.spans_s), seconds(s.inclusive_s),
         str(s.count), text(s.name)]
        for s in top(run.spans, TOP_PHASES)
    ]  # fmt: skip
    out = [f"#### Compile time by phase ({seconds(run.spans_s)} in spans)", ""]
    out += table(("own", "share", "inclusive", "count", "phase"), rows, len(run.spans), "phases",
                 MORE + " --format json")  # fmt: skip
    return [*out, ""]


def skips(o: Overview) -> list[str]:
    """The CUDA graph skips, by reason."""
    f = o.facts
    if not f.skipped:
        return []
    rows = [[str(n), text(reason)] for reason, n in list(f.skips.items())[:MAX_ROWS]]
    out = [f"#### CUDA graph skips ({count(f.skipped, 'compile')})", ""]
    out += table(("compiles", "skipped because"), rows, len(f.skips), "reasons", MORE)
    return [*out, ""]


def guard(a: Analysis, first: str) -> tuple[str, str]:
    """A recompile's first failed guard in one line (what it checks), and where it was made;
    `first`: its reason's first line, for a recompile whose guards have no origin."""
    got = guard_origins(a.origins)
    if not got:
        return text(first), ""
    return text(got[0].subject), text(made_at(got[0]))
