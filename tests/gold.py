"""Golden outputs: what tlview writes for a few real logs, kept in tests/gold/<case>/<file>.

    python tests/gold.py --update           # rewrite every golden file (inputs.txt needs torch)
    python tests/gold.py --update ranks     # only these cases
    python tests/gold.py                    # compare them all, as tests/test_gold.py does

Each output is one tlview command run in-process (click's CliRunner) in the log's folder, piped
at 160 columns, then made comparable: a JSON report indented (a changed value is a changed line),
the page's own style and script as their digests and the page as its visible text and element
structure (`visible`), `scrub` applied. JSON and the page are kept whole: a report
over WHOLE characters as `report.json` with each compile in a file of its own under
`report.compiles/` (`003_0_1.json`, in order). Text and the trace are `fit`: kept whole up to WHOLE
characters, else their first KEEP and a digest of all of it. A mismatch shows the first lines of
the diff; when the new output is meant, run --update and read `git diff tests/gold`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import difflib
import gzip
import hashlib
import html
import itertools
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import CORPUS, FIXTURES, ROOT

from tlview import __version__
from tlview.cli import main as tlview

GOLD = ROOT / "tests" / "gold"
UPDATE = "python tests/gold.py --update"
# Piped at a fixed width, as a terminal of 160 columns would show it, with no colour forced.
ENV = {"COLUMNS": "160", "FORCE_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None}
WHOLE = 100_000  # an output up to this many characters is kept whole,
KEEP = 48_000  # a longer one as its first lines up to this many, and a digest of all of it
DIFF_LINES = 40  # of a mismatch's unified diff shown

RANK0 = "ranks/dedicated_log_torch_trace_rank_0_tw8thpg0.log"
RANK1 = "ranks/dedicated_log_torch_trace_rank_1_0u4w42ca.log"
REPORTS = {
    "report.txt": ("report", "LOG", "-v"),
    "report.json": ("report", "LOG", "--format", "json"),
    "report.html": ("report", "LOG", "--format", "html"),
}
TRACE = {"trace.json": ("report", "LOG", "--format", "perfetto")}
INPUTS = {"inputs.txt": ("inputs", "LOG", "--check")}  # needs torch
# Case: (where its log is, the log, its outputs: file name -> tlview's arguments).
CASES: dict[str, tuple[str, str, dict[str, tuple[str, ...]]]] = {
    # A graph break, restarts, a recompile, parameters, views and aliased inputs; AOT graphs.
    "demo": ("fixtures", "demo.log", {**REPORTS, **TRACE, **INPUTS}),
    # Dims marked dynamic and made dynamic by a recompile: symbols in the shapes.
    "dynamic": ("fixtures", "dynamic.log", {**REPORTS, **INPUTS}),
    # Inductor: kernels, output code, cache events.
    "kernels": ("fixtures", "kernels.log", REPORTS),
    # A directory: two ranks that break their graphs in different places.
    "ranks": (
        "fixtures",
        "ranks",
        {
            **REPORTS,
            **TRACE,
            "diff.txt": ("diff", RANK0, RANK1),
            "diff.json": ("diff", RANK0, RANK1, "--format", "json"),
        },
    ),
    # Backends that raise, a runtime error, a recompile: failed compiles with their reasons.
    "compile_error": ("corpus", "compile_error/dedicated_log_torch_trace_y1oz5uyn.log", REPORTS),
    # torch 2.5: no torch_version record, a recompile limit inferred; and the same program
    # under torch 2.13 (limit.log), which diff finds no change in.
    "torch25": ("fixtures", "torch25.log", {**REPORTS, "diff.txt": ("diff", "LOG", "limit.log")}),
}


@dataclass(frozen=True)
class Output:
    """One golden file: what one tlview command writes for a case's log."""

    case: str
    name: str
    args: tuple[str, ...]

    @property
    def file(self) -> Path:
        return GOLD / self.case / self.name

    @property
    def slow(self) -> bool:
        return self.args[0] == "inputs"  # imports torch

    @property
    def top(self) -> Path:
        """The folder tlview runs in: the fixtures' or the corpus's, whichever holds the log."""
        where, log, _ = CASES[self.case]
        top = FIXTURES if where == "fixtures" else CORPUS
        if not (top / log).exists():
            pytest.fail(f"{top / log} not found")
        return top

    @property
    def argv(self) -> list[str]:
        """tlview's arguments, LOG the case's log: logs are named from `top`, as a user in that
        folder would, so no line holds a path as long as the checkout's (rich wraps long lines)."""
        return [CASES[self.case][1] if a == "LOG" else a for a in self.args]

    def command(self) -> str:
        return f"cd {self.top} && COLUMNS=160 tlview {' '.join(self.argv)}"


def outputs(cases: list[str] | None = None) -> list[Output]:
    return [
        Output(case, name, args)
        for case, (_, _, outs) in CASES.items()
        if not cases or case in cases
        for name, args in outs.items()
    ]


def files(out: Output) -> dict[Path, str]:
    """The golden files of OUT and what each holds: one, or a JSON report and its compiles."""
    text = run(out)
    if out.name.endswith(".html"):  # its visible text and structure: whole
        return {out.file: text}
    if not out.name.endswith(".json") or out.name == "trace.json":
        return {out.file: fit(text)}
    doc = json.loads(text)
    if len(text) <= WHOLE or not isinstance(doc, dict) or not isinstance(doc.get("compiles"), list):
        return {out.file: text}
    folder = compiles_folder(out)
    got: dict[Path, str] = {}
    names = []
    for i, c in enumerate(doc["compiles"]):
        key = str(c.get("compile_id") or c.get("key") or "") if isinstance(c, dict) else ""
        name = f"{i:03d}_{re.sub(r'[^A-Za-z0-9]+', '_', key).strip('_') or 'outside'}.json"
        got[folder / name] = _json(c)
        names.append(f"[gold: {folder.name}/{name}]")
    return {out.file: _json({**doc, "compiles": names}), **got}


def compiles_folder(out: Output) -> Path:
    """Where a split JSON report keeps its compiles: `report.compiles/` beside `report.json`."""
    return out.file.parent / f"{out.file.stem}.compiles"


def _json(value: object) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def stale(out: Output, got: dict[Path, str]) -> list[Path]:
    """Golden files of OUT's split report that it no longer writes."""
    if not out.name.endswith(".json") or out.name == "trace.json":
        return []
    folder = compiles_folder(out)
    have = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [p for p in have if p not in got]


def run(out: Output) -> str:
    """What tlview writes to stdout for OUT, made comparable (see the module's docstring)."""
    with _inside(out.top):
        result = CliRunner().invoke(tlview, out.argv, env=ENV, catch_exceptions=False)
    assert result.exit_code == 0 and not result.stderr, (out.command(), result.stderr)
    text = result.stdout
    if out.name.endswith(".json") and out.name != "trace.json":  # the trace is an event a line
        text = _json(json.loads(text))
    if out.name.endswith(".html"):  # scrubbed first: a version is found in its markup
        page = scrub(PACKED.sub(_unpacked, ASSET.sub(_asset, text)))
        return visible(page.replace("<VERSION>", "&lt;VERSION&gt;"))
    return scrub(text)


class _Visible(HTMLParser):
    """A page as its structure and what a reader sees: one line per element (`<tag#id.class>`)
    and per text, indented by depth; text in `pre` keeps its lines, elsewhere its words."""

    VOID = frozenset(
        [
            "area",
            "base",
            "br",
            "col",
            "embed",
            "hr",
            "img",
            "input",
            "link",
            "meta",
            "source",
            "track",
            "wbr",
        ]
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.depth = 0
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name = tag + (f"#{a['id']}" if a.get("id") else "")
        name += "".join(f".{c}" for c in (a.get("class") or "").split())
        self.lines.append(" " * self.depth + f"<{name}>")
        if tag not in self.VOID:
            self.depth += 1
            self.pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID:
            self.depth = max(0, self.depth - 1)
            self.pre -= tag == "pre" and self.pre > 0

    def handle_data(self, data: str) -> None:
        pad = " " * self.depth
        if self.pre:
            self.lines += [pad + ln.rstrip() for ln in data.split("\n") if ln.strip()]
        elif data.strip():
            self.lines.append(pad + " ".join(data.split()))


def visible(page: str) -> str:
    """The page's structure and visible text (see _Visible), as its golden file keeps it."""
    v = _Visible()
    v.feed(page)
    v.close()
    return "\n".join(v.lines) + "\n"


# The page's own style and script (the same on every page): kept as their size and digest.
ASSET = re.compile(r"<(style|script)>(.*?)</\1>", re.S)


def _asset(m: re.Match[str]) -> str:
    digest = base64.b64encode(hashlib.sha256(m[2].encode("utf-8")).digest()).decode()
    return f"<{m[1]}>[gold: {len(m[2]):,} characters, sha256-{digest}]</{m[1]}>"


# A payload the page holds gzip-compressed, in base64: kept as its size and the text the page's
# script shows, so that a golden file reads as the page does.
PACKED = re.compile(r'data-gz="([A-Za-z0-9+/=]*)">[^<]*</code>')


def _unpacked(m: re.Match[str]) -> str:
    text = gzip.decompress(base64.b64decode(m[1])).decode("utf-8")
    shown = html.escape(text, quote=False)
    return f'data-gz="[gold: {len(m[1]):,} characters of base64]">{shown}</code>'


def scrub(text: str) -> str:
    """Leave out what differs between machines and releases, and nothing the log says.

    tlview's version (the headers, the JSON's tlview_version, the page's and the trace's
    generator), and where the fixtures and the corpus are: run() names logs from their folder,
    so no path to them is written today, but one that tlview resolved would be this machine's.
    Paths in the logs themselves (/tmp/..., /home/user/...) and every figure are facts: kept.
    """
    for path, name in sorted(((FIXTURES, "<FIXTURES>"), (CORPUS, "<CORPUS>")), reverse=True):
        text = text.replace(str(path), name)  # the longer first: one may hold the other
    for words in VERSIONED:
        text = text.replace(words.format(__version__), words.format("<VERSION>"))
    return text


VERSIONED = (  # where tlview's version is written: in these words, not wherever its digits are
    "tlview {}",
    '"tlview_version": "{}"',
    "<dt>tlview</dt><dd>{}</dd>",
)


def fit(text: str) -> str:
    """TEXT if small, else its first lines up to KEEP characters and a digest of all of it."""
    if len(text) <= WHOLE:
        return text
    head = text[: text.rfind("\n", 0, KEEP) + 1]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return (
        f"{head}[gold: {len(head):,} of {len(text):,} characters kept; sha256 of all: {digest}]\n"
    )


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8") if path.exists() else ""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def mismatch(out: Output, got: dict[Path, str], keep: Path) -> str | None:
    """None when OUT's golden files hold GOT; else what differs, each new file under KEEP."""
    problems = [
        _differs(out, path, text, keep / path.relative_to(GOLD)) for path, text in got.items()
    ]
    problems += [
        f"{p.relative_to(ROOT)} is no longer written by `{out.command()}`\n"
        f"If that is right: {UPDATE} {out.case}"
        for p in stale(out, got)
    ]
    found = [p for p in problems if p]
    return "\n\n".join(found) if found else None


def _differs(out: Output, path: Path, got: str, keep: Path) -> str | None:
    """None when the golden file PATH holds GOT; else what differs, with all of GOT in KEEP."""
    want = read(path)
    if got == want:
        return None
    rel = path.relative_to(ROOT)
    lines = difflib.unified_diff(
        want.splitlines(keepends=True), got.splitlines(keepends=True), str(rel), "now", n=2
    )
    shown = "".join(
        s if s.endswith("\n") else s + "\n" for s in itertools.islice(lines, DIFF_LINES)
    )
    head = want.rpartition("\n[gold: ")[0]
    if head and head == got.rpartition("\n[gold: ")[0]:
        shown += "(the part kept here is the same: what differs is past it)\n"
    write(keep, got)
    return (
        f"{rel} is not what `{out.command()}` writes now"
        f"{'' if want else ' (no golden file)'}:\n{shown}"
        f"(the whole output now: {keep})\nIf the new output is right: {UPDATE} {out.case}"
    )


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    was = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(was)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the golden files")
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"of {', '.join(CASES)}")
    args = parser.parse_args(argv)
    if set(args.cases) - set(CASES):
        parser.error(f"no case {', '.join(sorted(set(args.cases) - set(CASES)))}")
    differ = written = 0
    made: set[Path] = set()
    for out in outputs(args.cases):
        got = files(out)
        made |= set(got)
        if args.update:
            for path, text in got.items():
                if text != read(path):
                    write(path, text)
                    written += 1
                    print(f"wrote {path.relative_to(ROOT)} ({len(text):,} characters)")
            for path in stale(out, got):
                path.unlink()
                print(f"removed {path.relative_to(ROOT)}")
            continue
        keep = Path(tempfile.gettempdir()) / "tlview-gold"
        problem = mismatch(out, got, keep)
        if problem:
            differ += 1
            print(problem, end="\n\n")
    if args.update and not args.cases:  # a case or an output no longer made goes away
        kept = (p for p in GOLD.rglob("*") if p.is_file() and not p.name.startswith("."))
        for path in sorted(p for p in kept if p not in made):
            path.unlink()
            print(f"removed {path.relative_to(ROOT)}")
    if args.update:
        print(f"{written} golden file(s) written")
    else:
        print(f"{differ} golden file(s) differ" if differ else "every golden file matches")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
