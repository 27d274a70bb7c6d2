"""`tlview diff --format markdown`: what NEW does worse and better, for a job summary."""

from __future__ import annotations

from tlview.analyze.diff import Diff, change_words
from tlview.render import Options, Split
from tlview.render.markdown.md import MAX_ROWS, fit, marker, table, text
from tlview.render.markdown.report import verdict
from tlview.runtime.output import Output

MORE = "tlview diff"


def lines(d: Diff, opts: Options, to_file: bool) -> list[str]:
    """The comparison's lines: figures, the gate's verdict, the changes worst first."""
    out = marker(to_file)
    out += [f"### tlview diff: {text(d.base_path)} → {text(d.new_path)}", ""]
    for note in d.notes:
        out.append(f"- {text(note)}")
    if d.notes:
        out.append("")
    rows = []
    for f in d.figures:
        delta = f.delta
        shown = (
            ""
            if delta is None or not f.changed
            else f"{delta:+.2f}"
            if f.seconds
            else (f"{int(delta):+d}")
        )
        if shown and f.more_is_worse:
            shown += " (worse)" if (delta or 0) > 0 else " (better)"
        rows.append([text(f.name), f.value(f.base), f.value(f.new), shown])
    out += [*table(("measure", "base", "new", "change"), rows, len(rows), "", ""), ""]
    if opts.checks:
        from tlview.analyze.gate import evaluate_diff

        out += verdict(
            [(v.name, v.figures, v.failure is not None) for v in evaluate_diff(d, opts.checks)]
        )
    order = {True: 0, None: 1, False: 2}
    changes = sorted(d.changes, key=lambda c: order[c.worse])
    if changes:
        out += [f"#### Changes ({len(changes):,})", ""]
        rows = [
            [
                {True: "worse", False: "better", None: ""}[c.worse],
                text(c.kind),
                text(c.frame),
                text(change_words(c)),
            ]
            for c in changes[:MAX_ROWS]
        ]
        out += table(("", "kind", "frame", "change"), rows, len(changes), "changes", MORE)
        out.append("")
    else:
        out += ["No change beyond noise.", ""]
    return out


def write(d: Diff, out: Output, opts: Options, split: Split | None = None) -> None:
    """The comparison as Markdown (the renderer of `tlview diff --format markdown`)."""
    got = lines(d, opts, not out.is_stdout)
    with out.open() as f:
        f.write(fit(got).encode("utf-8"))
