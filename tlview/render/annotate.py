"""CI annotations: GitHub's workflow commands (`::warning file=F,line=L,title=T::message`), or
`file:line: level: message` lines that other systems and editors read."""

from __future__ import annotations

import re

from tlview.analyze.sites import MAX_PER_LEVEL, Site, relative
from tlview.inert import clean, line
from tlview.units import count

STYLES = ("github", "plain")
_SPACE = re.compile(r"\s+")


def data(text: str) -> str:
    """A workflow command's message, escaped as the runner reads it (`%`, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def prop(text: str) -> str:
    """A workflow command's property (file, title): also `:` and `,` escaped."""
    return data(text).replace(":", "%3A").replace(",", "%2C")


def _message(s: Site) -> str:
    times = (
        f" ({count(s.count, 'time')}: {', '.join(s.compiles)})"
        if s.count > 1
        else (f" ({s.compiles[0]})" if s.compiles else "")
    )
    return clean(s.message) + times


def lines(found: list[Site], style: str, root: str | None = None) -> list[str]:
    """At most MAX_PER_LEVEL annotations of each level, and a last line for those left out."""
    out: list[str] = []
    kept: dict[str, int] = {}
    left = 0
    for s in found:
        if kept.get(s.level, 0) >= MAX_PER_LEVEL:
            left += 1
            continue
        kept[s.level] = kept.get(s.level, 0) + 1
        file = relative(s.file, root)
        if style == "github":
            out.append(
                f"::{s.level} file={prop(clean(file))},line={s.line},title={prop(clean(s.title))}"
                f"::{data(_message(s))}"
            )
        else:  # one line a problem: its file's own line feed shown as `\n`
            one = _SPACE.sub(" ", f"{clean(s.title)}: {_message(s)}").strip()
            out.append(f"{line(file)}:{s.line}: {s.level}: {one}")
    if left:
        more = f"{left} more problem place(s) not annotated (at most {MAX_PER_LEVEL} per level)"
        out.append(
            f"::notice title=tlview::{data(more)}" if style == "github" else f"tlview: {more}"
        )
    return out
