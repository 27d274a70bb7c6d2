"""`tlview diff --format markdown`: what NEW does worse and better, for a job summary."""

from __future__ import annotations

from tlview.analyze.diff import Diff, Figure, change_words
from tlview.render import Options, Split
from tlview.render.markdown.md import MAX_ROWS, fit, marker, table, text
from tlview.render.markdown.report import verdict
from tlview.runtime.output import Output

MORE = "tlview diff"


def _shown(f: Figure) -> str:
    """A figure's change beyond noise, signed, and whether it is worse ("" when none)."""
    delta = f.delta
    if delta is None or not f.changed:
        return ""
    shown = f"{delta:+.2f}" if f.seconds else f"{int(delta):+d}"
    if f.more_is_worse:
        shown += " (worse)" if delta > 0 else " (better)"
    return shown


def _changes(d: Diff) -> list[str]:
    """The changes worst first, the first MAX_ROWS of them, or that there are none."""
    order = {True: 0, None: 1, False: 2}
    changes = sorted(d.changes, key=lambda c: order[c.worse])
    if not changes:
        return ["No change beyond noise.", ""]
    rows = [
        [
            {True: "worse", False: "better", None: ""}[c.worse],
            text(c.kind),
            text(c.frame),
            text(change_words(c)),
        ]
        for c in changes[:MAX_ROWS]
    ]
    out = [f"#### Changes ({len(changes):,})", ""]
    out += table(("", "kind", "frame", "change"), rows, len(changes), "changes", MORE)
    return [*out, ""]


def lines(d: Diff, opts: Options, to_file: bool) -> list[str]:
    """The comparison's lines: figures, the gate's verdict, the changes worst first."""
    out = marker(to_file)
    out += [f"### tlview diff: {text(d.base_path)} → {text(d.new_path)}", ""]
    out += [f"- {text(note)}" for note in d.notes] + ([""] if d.notes else [])
    rows = [[text(f.name), f.value(f.base), f.value(f.new), _shown(f)] for f in d.figures]
    out += [*table(("measure", "base", "new", "change"), rows, len(rows), "", ""), ""]
    if opts.checks:
        from tlview.analyze.gate import evaluate_diff

        out += verdict(
            [(v.name, v.figures, v.failure is not None) for v in evaluate_diff(d, opts.checks)]
        )
    return out + _changes(d)


def write(d: Diff, out: Output, opts: Options, split: Split | None = None) -> None:
    """The comparison as Markdown (the renderer of `tlview diff --format markdown`)."""
    got = lines(d, opts, not out.is_stdout)
    with out.open() as f:
        f.write(fit(got).encode("utf-8"))
