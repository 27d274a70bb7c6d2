"""`tlview diff` for the terminal: the figures side by side, then every change, worst first."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tlview.analyze.diff import CacheFigure, Diff, Figure, change_words
from tlview.render import Options, Split
from tlview.render.text.console import T, on_console, table
from tlview.runtime.output import Output
from tlview.version import __version__

ORDER = {True: 0, None: 1, False: 2}  # worse first, then neutral, then better


def _delta(f: Figure) -> Text:
    d = f.delta
    if d is None or d == 0:
        return T("")
    text = f"{d:+.2f}" if f.seconds else f"{int(d):+d}"
    if f.seconds and not f.changed:
        return T(f"{text} (noise)", "dim")
    if not f.more_is_worse:
        return T(text)
    return T(text, "red" if d > 0 else "green")


def _rate(counts: dict[str, int]) -> str:
    r = CacheFigure.rate(counts)
    if r is None:
        return "-"
    parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    return f"{r:.0%} ({parts})"


def draw(d: Diff, console: Console, verbose: int = 0) -> None:
    """Draw the comparison on CONSOLE: the figures, then every change, worst first."""
    console.print(T(f"tlview {__version__} diff", "bold"))
    console.print(T(f"BASE {d.base_path}  (torch {d.base_torch or 'unknown'})"))
    console.print(T(f"NEW  {d.new_path}  (torch {d.new_torch or 'unknown'})"))
    for n in d.notes:
        console.print(T(f"note: {n}", "yellow"))
    _figures(console, "Summary", "measure", d.figures)
    if d.phases:
        _figures(console, "Compile time per phase (s)", "phase", d.phases)
    if d.cache:
        t = table("Cache hit rate", "cache", "BASE", "NEW", console=console)
        for cf in d.cache:
            t.add_row(T(cf.cache), T(_rate(cf.base)), T(_rate(cf.new)))
        console.print(t)
    _changes(console, d)
    if verbose > 0 or len(d.frames) <= 30:
        _frames(console, d)


def _figures(console: Console, title: str, what: str, figures: list[Figure]) -> None:
    t = table(title, what, "BASE", "NEW", "change", console=console)
    for f in figures:
        t.add_row(T(f.name), T(f.value(f.base)), T(f.value(f.new)), _delta(f))
    console.print(t)


def _changes(console: Console, d: Diff) -> None:
    changes = sorted(d.changes, key=lambda c: ORDER[c.worse])
    if not changes:
        console.print(
            T(
                "No changes: the same frames, compiles, breaks and inputs (times within noise).",
                "bold green",
            )
        )
        return
    t = table(f"Changes ({len(changes)})", "", "kind", "frame", "what", console=console)
    for c in changes:
        mark = {True: T("worse", "red"), False: T("better", "green"), None: T("")}[c.worse]
        t.add_row(mark, T(c.kind), T(c.frame), T(change_words(c)))
    console.print(t)


def _frames(console: Console, d: Diff) -> None:
    t = table("Frames", "frame", "match", "BASE compiles", "NEW compiles", console=console)
    for p in d.frames:
        b = ", ".join(c.key for c in p.base.compiles) if p.base else ""
        n = ", ".join(c.key for c in p.new.compiles) if p.new else ""
        t.add_row(T(str(p.key)), T(p.match), T(b), T(n))
    console.print(t)


def write(d: Diff, out: Output, opts: Options, split: Split | None = None) -> None:
    """The comparison for the terminal (the renderer of `tlview diff --format text`)."""
    on_console(out, lambda console: draw(d, console, opts.verbosity))
