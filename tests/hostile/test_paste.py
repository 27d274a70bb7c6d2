"""Commands tlview suggests: every one is safe to paste. Each word that comes from a log (an
artifact's name, a log's file name in `LOG:ID`) is quoted with `shlex.quote`, on the page (the
left-out table, each payload's note, a job's sections), in shell completion and in terminal
notes; a suggested command split by a shell gives back the words tlview meant. Artifacts are
named by their position, which no name in a log can forge.
"""

from __future__ import annotations

import html
import random
import re
import shlex
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete
from crafted import artifact, compile_of
from damage import EXIT_OK, assert_clean_exit, run

import tlview
from tlview.cli import main
from tlview.inert import command
from tlview.render.html import budget, pick

# Names a log may give that a shell would obey if pasted raw.
HOSTILE = [
    "NAME; touch x #",
    "$(touch x)",
    "`touch x`",
    "a'b\"c",
    "x && rm -rf ~",
    "*",
    "~root",
    "-rf",
    "a\nb",
    "",
    "'",
    "\\",
    "!!",
    "a b\tc",
    "${HOME}",
    "é ü ٣",
]


def test_each_suggested_command_splits_back_to_its_words() -> None:
    """Fuzz: whatever words a log gives, the shell reads the command tlview prints as those
    words (shlex.split is what a POSIX shell does with quotes), and nothing else."""
    rng = random.Random(34)
    alphabet = "ab ;|&$`'\"\\*?~#!(){}[]<>\t\n=%^-é٣"
    cases = [["tlview", "show", "PATH", "--compile-id", w, "x"] for w in HOSTILE]
    for _ in range(2000):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(4)]
        cases.append(["tlview", "show", *words])
    for words in cases:
        line = command(*words)
        assert shlex.split(line) == words, (words, line)
    assert command("tlview", "show", "PATH", "--compile-id", "0/0", "NAME") == (
        "tlview show PATH --compile-id 0/0 NAME"  # plain words are unchanged
    )


def _page(tmp: Path, log: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    out = tmp / "page.html"
    res = run("report", str(log), "--format", "html", "-o", str(out))
    assert_clean_exit(res, EXIT_OK, str(log))
    return out.read_text()


def _commands(page: str) -> list[list[str]]:
    """Every `tlview ...` command the page prints in <code>, as the shell would split it."""
    found = re.findall(r"<code>(tlview (?:show|report) [^<]*)</code>", page)
    return [shlex.split(html.unescape(c)) for c in found]


def test_page_commands_quote_artifact_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The left-out table and each payload's note name the artifact as one word."""
    monkeypatch.setattr(budget, "PAGE_PAYLOAD_BYTES", 0)  # every payload left out
    evil = "NAME; touch x #"
    log = tmp_path / "a.log"
    log.write_bytes(compile_of((0, 0), [("L['x']", [4], "torch.float32")]) + artifact(evil, "hi"))
    page = _page(tmp_path, log, monkeypatch)
    cmds = [c for c in _commands(page) if c[:2] == ["tlview", "show"]]
    assert ["tlview", "show", "PATH", "--compile-id", "0/0", evil] in cmds
    assert all(len(c) == 6 for c in cmds), cmds  # every one: PATH, --compile-id, ID, NAME
    notes = re.findall(r"`(tlview show [^`]*)` writes it whole", html.unescape(page))
    assert notes and all(len(shlex.split(n)) == 6 for n in notes)
    assert [*shlex.split(next(n for n in notes if "touch" in n))][-1] == evil


def test_job_page_commands_quote_log_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's page names a compile LOG:ID: a log named `b$(touch x).log` is one quoted word."""
    monkeypatch.setattr(pick, "DETAIL_COMPILES", 0)  # every section says how to see it whole
    job = tmp_path / "job"
    job.mkdir()
    names = ["a.log", "b$(touch x).log", "c'; touch y; '.log"]
    for n in names:
        (job / n).write_bytes(compile_of((0, 0), [("L['x']", [4], "torch.float32")]))
    page = _page(tmp_path, job, monkeypatch)
    refs = {c[4] for c in _commands(page) if c[:2] == ["tlview", "report"] and len(c) == 5}
    assert refs == {f"{n}:0/0" for n in names}
    assert not (tmp_path / "x").exists()


def complete(words: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("COMP_WORDS", words)
    args = shlex.split(words)[1:]
    incomplete = "" if words.endswith(" ") else args.pop()
    sc = ShellComplete(main, {}, "tlview", "_TLVIEW_COMPLETE")
    return [c.value for c in sc.get_completions(args, incomplete)]


def test_completion_offers_quoted_names_and_no_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`show`'s completion inserts each artifact name as one quoted word, and offers none that
    holds a character a terminal obeys (completions go to the terminal's stdout)."""
    log = tmp_path / "a.log"
    names = ["$(touch x)", "b;c", "plain", "\x1b]52;c;aGk=\x07osc", "two\nlines"]
    log.write_bytes(
        compile_of((0, 0), [("L['x']", [4], "torch.float32")])
        + b"".join(artifact(n, "t") for n in names)
    )
    got = complete(f"tlview show {log} --compile-id 0/0 ", monkeypatch)
    split = [shlex.split(g) for g in got]
    assert ["$(touch x)"] in split and ["b;c"] in split and ["plain"] in split
    assert all(len(s) == 1 for s in split)
    assert not any("\x1b" in g or "\n" in g for g in got)
    assert "'$(touch x)'" in got


def test_terminal_notes_quote_log_names(tmp_path: Path) -> None:
    """`show`'s listing ends with the command that writes one artifact, its words quoted."""
    job = tmp_path / "j"
    job.mkdir()
    for n in ("a.log", "b;$(touch x).log"):
        (job / n).write_bytes(compile_of((0, 0), [("L['x']", [4], "torch.float32")]))
    res = run("show", str(job), "--compile-id", "b;$(touch x).log:0/0")
    assert_clean_exit(res, EXIT_OK, "show")
    last = res.stdout.splitlines()[-1]
    words = shlex.split(last.removesuffix(" NAME writes one whole"))
    assert words == ["tlview", "show", str(job), "--compile-id", "b;$(touch x).log:0/0"]


def test_an_artifact_named_like_a_position_shadows_nothing(tmp_path: Path) -> None:
    """`KIND#2` is the second payload of KIND, whatever a log names its artifacts: one
    literally named `inductor_output_code#2` is `inductor_output_code#2#1`."""
    log = tmp_path / "a.log"
    log.write_bytes(
        compile_of((0, 0), [("L['x']", [4], "torch.float32")])
        + artifact("inductor_output_code", "first")
        + artifact("inductor_output_code#2", "forged")
        + artifact("inductor_output_code", "second")
    )
    named = {n: p.line for n, p in tlview.artifacts(str(log), "0/0")}
    assert "inductor_output_code#2#1" in named
    assert tlview.artifact(str(log), "0/0", "inductor_output_code#2").data == b"second"
    assert tlview.artifact(str(log), "0/0", "inductor_output_code#2#1").data == b"forged"
    assert tlview.artifact(str(log), "0/0", "inductor_output_code").data == b"first"
    res = run("show", str(log), "--compile-id", "0/0", "inductor_output_code#2")
    assert_clean_exit(res, EXIT_OK, "show")
    assert res.stdout == "second\n" or res.stdout == "second"
