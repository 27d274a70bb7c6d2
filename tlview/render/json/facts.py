"""`tlview.report/2`'s keys for where compile time went, run-time work, CUDA graphs, guard
origins, missing artifacts, failure artifacts and the owners of records without a compile id
(docs/formats.md, "Compile facts"): each fact as `analyze/facts.py` works it out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tlview.analyze.compiles import Analysis
from tlview.analyze.origins import Origin
from tlview.analyze.owners import Owners
from tlview.analyze.phases import CompilePhases, MetricTime, RunPhases, SpanNode, SpanTime
from tlview.analyze.runfacts import RunFacts
from tlview.model import StackFrame

Ref = Callable[[str | None], Any]


def _s(v: float) -> float:
    return round(v, 6)


# span and node round as _s does, inline: they run for every span of every compile.
def span(s: SpanTime) -> dict[str, Any]:
    return {
        "name": s.name,
        "count": s.count,
        "inclusive_s": round(s.inclusive_s, 6),
        "exclusive_s": round(s.exclusive_s, 6),
    }


def node(n: SpanNode) -> dict[str, Any]:
    return {
        "name": n.name,
        "count": n.count,
        "inclusive_s": round(n.inclusive_s, 6),
        "exclusive_s": round(n.exclusive_s, 6),
        "children": [node(k) for k in n.children] if n.children else [],
    }


def metric(m: MetricTime) -> dict[str, Any]:
    return {"name": m.name, "field": m.field, "seconds": _s(m.seconds)}


def compile_time(cp: CompilePhases) -> dict[str, Any]:
    return {
        "spans_s": _s(cp.spans_s),
        "open": cp.open,
        "spans": [span(s) for s in cp.spans],
        "tree": [node(n) for n in cp.tree],
        "metrics": [metric(m) for m in cp.metrics],
        "caches": cp.caches,
    }


def origin(o: Origin, r: Ref) -> dict[str, Any]:
    return {
        "kind": o.kind,
        "subject": o.subject,
        "compile": o.compile,
        "where": _frame(o.where, r),
        "said": o.said,
        "dynamic_by": o.dynamic_by,
    }


def _frame(f: StackFrame | None, r: Ref) -> dict[str, Any] | None:
    if f is None:
        return None
    return {"file": r(f.file), "line": f.line, "name": f.name, "loc": f.loc}


def compile_facts(a: Analysis, r: Ref) -> dict[str, Any]:
    """A compile's facts: the keys `compile_dict` adds."""
    g = a.cudagraphs
    took, from_spans = a.took
    return {
        "time": {**compile_time(a.phases), "from_spans": from_spans, "seconds": took},
        "runtime": [
            {
                "line": w.line,
                "backward": w.backward,
                "seconds": w.seconds,
                "parts": [metric(p) for p in w.parts],
                "said": w.words,
            }
            for w in a.runtime
        ],
        "cudagraphs": {
            "state": g.state,
            "reason": g.reason,
            "where": g.where,
            "cudagraphify_s": g.cudagraphify_s,
            "said": g.words,
        },
        "origins": [origin(o, r) for o in a.origins],
        "missing": [{"artifact": m.artifact, "why": m.why} for m in a.missing],
        "troubles": [
            {"kind": t.kind, "what": t.what, "text": t.text, "line": t.line, "fatal": t.fatal}
            for t in a.troubles
        ],
        "failure": a.failure_line,
    }


def run_time(run: RunPhases | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "spans_s": _s(run.spans_s),
        "outside_s": _s(run.outside_s),
        "compiles": run.compiles,
        "open": run.open,
        "spans": [span(s) for s in run.spans],
        "tree": [node(n) for n in run.tree],
        "metrics": [metric(m) for m in run.metrics],
        "caches": run.caches,
    }


def stats_facts(f: RunFacts) -> dict[str, Any]:
    """The run's facts: the keys `stats` adds."""
    return {
        "time": run_time(f.time),
        "cudagraphs": {
            "used": f.cudagraphs.get("used", 0),
            "skipped": f.skipped,
            "asked": f.cudagraphs.get("asked", 0),
            "skipped_by_reason": f.skips,
        },
        "timed_by_spans": f.spans_only,
    }


def owners(o: Owners) -> dict[str, Any]:
    """Who a log's records without a compile id belong to."""
    return {
        "attached": [
            {"compile": x.compile, "name": x.name, "count": x.count, "how": x.how}
            for x in o.attached
        ],
        "groups": [
            {
                "writer": g.writer,
                "torch": g.torch,
                "count": g.count,
                "names": g.names,
                "user": g.user,
            }
            for g in o.groups
        ],  # fmt: skip
        "unknown": o.unknown,
        "spans": [
            {"name": p.name, "start_us": p.start_us, "dur_us": p.dur_us, "compile": key}
            for p, key in o.spans
        ],
    }


def log_owners(f: RunFacts) -> dict[int, dict[str, Any]]:
    """Each log's owners, by the log's place in the report."""
    return {li: owners(o) for li, _, o in f.owners}
