"""`tlview report --format markdown`: one screen for a job summary or a pull-request comment."""

from __future__ import annotations

from dataclasses import dataclass, field

from tlview.analyze.compiles import Analysis, analysed
from tlview.analyze.summary import BreakSummary, Overview, Tally, short_place
from tlview.model import Report
from tlview.render import Options, Split
from tlview.render.markdown import facts
from tlview.render.markdown.md import MAX_ROWS, fit, marker, table, text
from tlview.render.markdown.vllm import vllm_lines
from tlview.runtime.output import Output
from tlview.units import count

MORE = "tlview report"


@dataclass(slots=True)
class Rows:
    """The first MAX_ROWS rows of a table, and how many there were."""

    rows: list[list[str]] = field(default_factory=list)
    total: int = 0

    def add(self, row: list[str]) -> None:
        self.total += 1
        if len(self.rows) < MAX_ROWS:
            self.rows.append(row)


def seconds(v: float) -> str:
    return f"{v:.2f} s"


def figures(o: Overview) -> list[str]:
    """The headline numbers as a one-row table."""
    time = facts.compile_time(o)
    failed = o.failures + o.incomplete + o.outside_failed
    return table(
        ("compiles", "graph breaks", "recompiles", "failed", "restarts", "compile time"),
        [[str(o.compiles), str(o.graph_breaks), str(o.recompiles), str(failed), str(o.restarts),
          time]],
        1, "", "",
    )  # fmt: skip


def verdict(checked: list[tuple[str, str, bool]]) -> list[str]:
    """The gate's verdict: each check (as written, its figures, failed) on a line."""
    if not checked:
        return []
    bad = sum(failed for _, _, failed in checked)
    n = count(len(checked), "check")
    lines = [f"--fail-on: failed ({bad} of {n})" if bad else f"--fail-on: passed ({n})", ""]
    for name, figs, failed in checked:
        lines.append(f"- {'❌ failed' if failed else '✅ passed'}: {text(name)}: {text(figs)}")
    return [*lines, ""]


def _recompile(a: Analysis, rows: Rows) -> None:
    r = a.recompile
    if r is None or not r.listed:
        return
    guard = r.guards[0].strip().partition("\n")[0] if r.guards else "(no reason logged)"
    more = f" (and {len(r.guards) - 1} more)" if len(r.guards) > 1 else ""
    check, made = facts.guard(a, guard)
    rows.add([text(a.ref), text(a.compile.function or ""), check + more, made])


def _failure(a: Analysis, rows: Rows) -> None:
    f = a.failure
    if f is None:
        return
    rows.add([text(a.ref), a.status, text(f.type or ""), text(f.first),
              text(short_place(f.where) if f.where else "")])  # fmt: skip


def _break_row(s: BreakSummary) -> list[str]:
    """A break's count, its title and what torch says it is about, where, and its hints."""
    where = ", ".join(
        text(short_place(w)) + (f" ×{n}" if n > 1 else "") for w, n in list(s.where.items())[:3]
    )
    if len(s.where) > 3:
        where += f" and {len(s.where) - 3} more"
    title = s.title + (f": {s.explanation}" if s.explanation else "")
    return [str(s.count), text(title), where, text("; ".join(s.hints))]


def lines(
    report: Report, opts: Options, to_file: bool, split: Split | None = None
) -> tuple[list[str], Overview]:
    """The summary's lines, and the figures counted on the way."""
    tally = Tally(report)
    recompiles, failures = Rows(), Rows()
    for a in analysed(report):
        tally.add(a)
        _recompile(a, recompiles)
        _failure(a, failures)
    o = tally.done()
    out = marker(to_file)
    out += [f"### tlview: {text(report.path)}", ""]
    head = [f"torch {text(report.torch_version or 'unknown')}", count(o.logs, "log")]
    head.append(f"{o.lines:,} lines, {o.bad_lines:,} bad")
    out += [" · ".join(head), ""]
    out += [*figures(o), ""]
    if opts.checks:
        from tlview.analyze.gate import evaluate_report

        out += verdict(
            [(v.name, v.figures, v.failure is not None) for v in evaluate_report(o, opts.checks)]
        )
    if o.breaks:
        out += [f"#### Graph breaks ({o.graph_breaks:,}, {count(len(o.breaks), 'reason')})", ""]
        rows = [_break_row(s) for s in o.breaks[:MAX_ROWS]]
        out += table(("count", "reason", "where", "what to change"), rows, len(o.breaks),
                     "reasons", MORE)  # fmt: skip
        out.append("")
    if recompiles.total:
        out += [f"#### Recompiles ({recompiles.total:,})", ""]
        out += table(("compile", "function", "failed guard", "made at"), recompiles.rows,
                     recompiles.total, "recompiles", MORE)  # fmt: skip
        out.append("")
    if failures.total:
        out += [f"#### Failures ({failures.total:,})", ""]
        out += table(("compile", "status", "type", "reason", "where"), failures.rows,
                     failures.total, "failures", MORE)  # fmt: skip
        out.append("")
    out += facts.skips(o)
    out += vllm_lines(o.vllm, MORE)
    if o.slowest:
        out += ["#### Slowest compiles", ""]
        rows = [[text(s.ref), text(s.function or ""), seconds(s.phases.get("total", 0.0))]
                for s in o.slowest]  # fmt: skip
        out += [*table(("compile", "function", "time"), rows, len(rows), "", ""), ""]
    out += facts.phases(o)
    return out, o


def write(report: Report, out: Output, opts: Options, split: Split | None = None) -> Overview:
    """The report as Markdown (the renderer of `--format markdown`): a few rows of each table,
    in one pass here."""
    got, o = lines(report, opts, not out.is_stdout)
    with out.open() as f:
        f.write(fit(got).encode("utf-8"))
    return o
