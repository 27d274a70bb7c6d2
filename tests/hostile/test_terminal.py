"""Terminal and CI text: what tlview prints to a terminal, a pipe or a CI job's log. No text of a
log becomes a workflow command a CI runner obeys, and a one-line field never starts a line.

A CI runner reads a step's output line by line: GitHub's obeys `::NAME props::data` at a line's
start after white space and the legacy `##[NAME props]data` anywhere in a line (docs.github.com,
"Workflow commands for GitHub Actions"; its runner's ActionCommand parser), Azure Pipelines'
`##vso[...]` anywhere, GitLab's collapsible sections need ESC and CR, and a problem matcher
(GitHub's `add-matcher`, editors) reads `file:line: level: message` at a line's start.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from crafted import (
    ESC,
    OBEYED,
    arg_name,
    graph,
    interned,
    metrics,
    one_input,
    record,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from damage import (
    EXIT_OK,
    assert_clean_exit,
    doc_of,
    run,
)
from helpers import FIXTURES
from planted import DEMO, ESCAPES, Hostile, planted
from rich.console import Console
from rich.text import Text

from tlview.analyze.baseline import every_attempt
from tlview.inert import clean, line

# GitHub's documented workflow commands (the deprecated ones too: a runner may still obey them)
# and the problem matchers' two: written out here, not taken from tlview's own list.
DOCUMENTED = {
    "debug", "notice", "warning", "error", "group", "endgroup", "add-mask", "stop-commands",
    "echo", "set-output", "save-state", "set-env", "add-path", "add-matcher", "remove-matcher",
}  # fmt: skip
# What .NET's TrimStart takes off a line (Char.IsWhiteSpace), which Python's isspace includes.
_DOTNET_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # fmt: skip
FORGED = re.compile(r"^\W*evil\.py:\d+:")  # a problem matcher's `file:line:` from the log


def obeyed(output: str) -> list[str]:
    """The lines of OUTPUT a CI runner would obey as a workflow command, as GitHub's runner
    parses them (v2 `::`, then the legacy `##[`), Azure's `##vso[`, and GitLab's section marks."""
    got = []
    for ln in re.split(r"\r\n|\r|\n", output):
        v2 = ln.lstrip(_DOTNET_SPACE)
        end = v2.find("::", 2)
        if v2.startswith("::") and end > 0 and v2[2:end].split(" ")[0].lower() in DOCUMENTED:
            got.append(ln)
            continue
        at = ln.find("##[")
        end = ln.find("]", at) if at >= 0 else -1
        legacy = end > 0 and ln[at + 3 : end].split(" ")[0].lower() in DOCUMENTED
        if legacy or "##vso[" in ln.lower() or "\x1b" in ln:
            got.append(ln)
    return got


def test_the_runner_model_sees_what_it_must_forbid() -> None:
    """The check above finds each form the runners document."""
    for ln in ("::error file=a.py,line=1::x", "  \t::add-mask::s", "\u3000::STOP-COMMANDS::t",
               "text ##[set-output name=x;]v", "x ##vso[task.setvariable variable=a]b",
               "\x1b[0Ksection_start:1:s\r\x1b[0Kx", "::endgroup::"):  # fmt: skip
        assert obeyed(ln), ln
    for ln in ("aten::add", "x[:, ::2]", "c10::Error: what", "::not-a-command::x", "a ::error::x"):
        assert not obeyed(ln), ln


COMMANDS = ["::error file=evil.py,line=1::forged", "::add-mask::WORD", "::stop-commands::TOKEN",
            "::set-output name=x::v", "##[add-mask]WORD", "##[set-output name=x;]v",
            "##vso[task.setvariable variable=a]b", "::ERROR::upper", " \t::warning::spaced"]  # fmt: skip


@pytest.mark.parametrize("cmd", COMMANDS)
def test_clean_breaks_every_command_wherever_a_line_starts(cmd: str) -> None:
    """At the text's start, after a line feed, in the middle of a word, and wherever rich wraps
    or folds the text at any width: no line is obeyed; the text reads the same."""
    for text in (cmd, f"a\n{cmd}", f"word{cmd}tail", "x" * 37 + cmd + " y"):
        got = clean(text)
        assert got.replace("\u200b", "") == text
        assert not obeyed(got), got
        for width in range(8, 60):
            lines = Text(got).wrap(Console(width=200), width, overflow="fold")
            assert not obeyed("\n".join(x.plain for x in lines)), (width, got)


def test_clean_leaves_ordinary_text_alone() -> None:
    for text in ("aten::add.Tensor", "torch::ops::aten::mm", "x[:, ::2]", "c10::Error: bad",
                 "## heading", "a #[x]", "ratio 2::1", "L['x']"):  # fmt: skip
        assert clean(text) == text


def test_a_one_line_field_keeps_its_line_feed_as_text() -> None:
    assert line("/src/a.py\nevil.py:1: error: x") == "/src/a.py\\nevil.py:1: error: x"
    assert not obeyed(line("a\n::error::x"))


FILE = "/src/a.py\n::error file=evil.py,line=1::forged\nevil.py:1: error: forged"
REASON = "::stop-commands::TOKEN\n  ::warning::x ##[add-mask]WORD"
SOURCE = "L['\n::add-path::/evil\nevil.py:9: error: source']"


def ci_log(tmp: Path) -> Path:
    """Workflow commands and forged `file:line:` lines in every field a CI run prints: a file
    name, function names, a source, break and failure reasons, guards, a payload."""
    parts = [interned(FILE)]
    names = ["f##[add-mask]WORD", "##[set-output name=x;]v", "::notice::fn"]
    for k, fn in enumerate(names):
        cid = (k, 0)
        parts += [
            start(cid, name=fn),
            storage(0, 64, cid),
            tensor(0, [4, 4], [4, 1], 0, cid=cid),
            source(0, SOURCE, cid),
            graph([(arg_name(SOURCE), "f32[4, 4][4, 1]cpu")], cid=cid),
            record("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, cid,
                   payload=f"Graph break in user code at {FILE}:3\nGraph Break Reason: {REASON}"),
            record("artifact", {"name": "::error::art", "encoding": "string"}, cid,
                   payload="::error::payload\n##[add-mask]P"),
            metrics(cid, co_name=fn, fail_type="X ::set-output name=a::b",
                    fail_reason="boom\n::error::boom\n##[add-mask]B",
                    fail_user_frame_filename=FILE, fail_user_frame_lineno=5),
        ]  # fmt: skip
    guards = '["::debug::guard", "L[\'x\'] ##[group]g"]'
    parts += [
        start((0, 1), name="g"),
        record("artifact", {"name": "recompile_reasons", "encoding": "json"}, (0, 1),
               payload=guards),
        metrics((0, 1)),
    ]  # fmt: skip
    log = tmp / "ci.log"
    log.write_bytes(b"".join(parts))
    return log


def outputs(log: Path, *commands: tuple[str, ...]) -> dict[str, str]:
    """What a CI step prints of LOG (stdout and stderr) by each command, at two widths."""
    got = {}
    for args in commands:
        for width in ("40", "160"):
            res = run(*args, env={"COLUMNS": width, "NO_COLOR": "1"})
            assert_clean_exit(res, EXIT_OK, " ".join(args))
            got[f"{' '.join(args[:1] + args[2:])} (COLUMNS={width})"] = res.stdout + res.stderr
    return got


def commands_of(log: Path) -> list[tuple[str, ...]]:
    """Every command that prints text of a log without torch."""
    demo = str(FIXTURES / "demo.log")
    return [
        ("report", str(log)),
        ("report", str(log), "-v"),
        ("report", str(log), "-q"),
        ("report", str(log), "--compile-id", "0/0"),
        ("report", str(log), "--format", "json"),
        ("report", str(log), "--format", "markdown"),
        ("report", str(log), "--format", "perfetto"),
        ("report", str(log), "-o", "/dev/null", "--annotations", "plain"),
        ("diff", demo, str(log)),
        ("diff", demo, str(log), "-v"),
        ("diff", demo, str(log), "--format", "json"),
        ("diff", demo, str(log), "-o", "/dev/null", "--annotations", "plain"),
        ("show", str(log), "--compile-id", "0/0"),
        ("show", str(log), "--compile-id", "0/0", "::error::art"),
    ]


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    log = ci_log(tmp_path_factory.mktemp("ci"))
    return outputs(log, *commands_of(log))


def test_no_output_line_of_a_hostile_log_is_a_workflow_command(printed: dict[str, str]) -> None:
    """Before this rule `report` printed 28 such lines, `--compile-id` 4, `diff` 6."""
    for what, text in printed.items():
        assert not obeyed(text), (what, obeyed(text))
    shown = printed["report -v (COLUMNS=160)"].replace("\u200b", "")
    assert "::error::boom" in shown and "##[add-mask]B" in shown  # still shown, only broken


@pytest.mark.slow  # torch: the inputs listing and repro's notes
def test_no_line_of_inputs_or_repro_is_a_workflow_command(tmp_path: Path) -> None:
    log = ci_log(tmp_path)
    got = outputs(
        log,
        ("inputs", str(log)),
        ("repro", str(log), "--compile-id", "0/0", "-o", str(tmp_path / "r")),
    )
    for what, text in got.items():
        assert not obeyed(text), (what, obeyed(text))
        assert not [x for x in text.splitlines() if FORGED.match(x)], what


def test_a_file_name_never_starts_a_line(printed: dict[str, str], tmp_path: Path) -> None:
    """A line feed in a file name is shown as `\\n`: no line starts with the log's forged
    `evil.py:1:`, and the name is there, whole, on one line."""
    for what, text in printed.items():
        if what.startswith(("report --format", "diff --format")):
            continue  # JSON and Markdown: no line feed is written raw (test_markdown.py)
        assert not [x for x in text.splitlines() if FORGED.match(x)], what
    res = run("report", str(ci_log(tmp_path)), "-v", env={"COLUMNS": "400"})
    assert "/src/a.py\\n:\u200b:error file=evil.py,line=1::forged\\nevil.py:1: error: forged" in (
        res.stdout
    )


def test_plain_annotations_are_one_line_a_problem(tmp_path: Path) -> None:
    """`--annotations plain`: each line is one problem, starting with the file tlview names."""
    res = run("report", str(ci_log(tmp_path)), "-o", "/dev/null", "--annotations", "plain")
    assert_clean_exit(res, EXIT_OK, "annotations plain")
    lines = res.stdout.splitlines()
    assert len(lines) == 7, lines  # 3 failures, 3 graph breaks (one per function), a recompile
    for ln in lines:
        assert ln.startswith("/src/a.py\\n:\u200b:error file=evil.py,line=1::forged\\nevil.py:1:")
        assert re.search(r":[35]: (error|warning): ", ln), ln


def test_github_annotations_are_tlviews_own_commands_only(tmp_path: Path) -> None:
    """`--annotations github`: the runner obeys tlview's own lines, one per problem, as
    error, warning or notice; nothing of the log in them is a command of its own."""
    res = run("report", str(ci_log(tmp_path)), "-o", "/dev/null", "--annotations", "github")
    assert_clean_exit(res, EXIT_OK, "annotations github")
    lines = res.stdout.splitlines()
    assert obeyed(res.stdout) == lines and len(lines) == 7
    assert sorted({x.split(" ")[0] for x in lines}) == ["::error", "::warning"]
    for ln in lines:
        data = ln.split("::", 2)[2]
        assert "%0A" not in data or not obeyed(data.replace("%0A", "\n")), ln


def test_json_writes_no_legacy_command_and_keeps_the_value(tmp_path: Path) -> None:
    """`##[` in JSON text is written `##\\u005b`: the same string to any JSON reader."""

    res = run("report", str(ci_log(tmp_path)), "--format", "json")
    assert "##[" not in res.stdout and "##\\u005b" in res.stdout
    doc = json.loads(res.stdout)
    assert every_attempt(doc)[0]["function"] == "f##[add-mask]WORD"


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_nothing_prints_but_through_the_sanitiser() -> None:
    """Every line a command prints goes through funnel.say (render/clean.py's rule), rich's
    text through console.T: no click.echo, print or stream write of its own elsewhere."""
    allowed = {
        ("commands/funnel.py", "say"),  # the one way out
        ("commands/funnel.py", "run"),  # its flush at exit
        ("commands/funnel.py", "invoke"),  # "tlview: interrupted" and "terminated"
        ("commands/funnel.py", "_warned"),  # a warning, cleaned
        ("replay/make.py", "make_one"),  # the --run warning: tlview's text and the user's DIR
        ("replay/make.py", "make_all"),
        ("replay/run.py", "_pump"),  # what repros print, cleaned, as it comes
        ("replay/child.py", "run_one"),  # the repro's child: its stdout is run_scripts' pipe
        ("replay/child.py", "_say"),  # run_one's lines, on the same pipe (cleaned by _pump)
        ("runtime/halves.py", "result"),  # TLVIEW_DEBUG only
    }
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = (
                    f.id
                    if isinstance(f, ast.Name)
                    else f"{ast.unparse(f.value)}.{f.attr}"
                    if isinstance(f, ast.Attribute)
                    else ""
                )
                if name in ("print", "click.echo", "sys.stdout.write", "sys.stderr.write"):
                    where = (str(path.relative_to(PACKAGE)), fn.name)
                    if where not in allowed:
                        found.append(f"{where[0]}:{node.lineno} in {fn.name}: {name}")
    assert not found, "\n".join(found)


PACKAGE = Path(__file__).resolve().parents[2] / "tlview"


@pytest.mark.slow  # over a second
def test_messages_of_every_command_are_inert(tmp_path: Path) -> None:
    """A command's one-line failures and notes name the log's text escaped, tty or pipe."""
    bad = write_log(tmp_path, f"x{ESC}.log", b"")
    for env in ({"NO_COLOR": "1"}, {"FORCE_COLOR": "1", "NO_COLOR": None}):
        for args in (
            ("report", str(bad)),
            ("inputs", str(bad)),
            ("repro", str(bad), "--all", "-o", str(tmp_path / "o")),
            ("diff", str(bad), str(FIXTURES / "demo.log")),
        ):
            res = run(*args, env=env)
            assert res.exit_code == 1, res.output
            assert not OBEYED.search(res.stderr), (args, res.stderr)
            assert "\\x1b]0;TITLE\\x07" in res.stderr, res.stderr


def test_json_printed_from_a_log_is_inert_and_exact(tmp_path: Path) -> None:
    """JSON writers escape C0 controls but not C1 controls or bidi overrides: tlview's JSON
    (report, diff, trace) writes those as \\uXXXX too, the values unchanged."""
    name = "L['x\u202eevil\u2066\x85\x9b2J']"
    log = write_log(tmp_path, "bidi\u202e.log", interned("/m\u2028.py"), one_input(name=name))
    for args in (
        ("report", str(log), "--format", "json"),
        ("report", str(log), "--format", "perfetto"),
        ("diff", str(log), str(FIXTURES / "demo.log"), "--format", "json"),
    ):
        res = run(*args)
        assert_clean_exit(res, EXIT_OK, args[0])
        assert not OBEYED.search(res.stdout_bytes.decode("utf-8")), args
    doc = doc_of(log)
    assert every_attempt(doc)[0]["inputs"][0]["sources"] == [name]


EXIT_NO_REPRO = 6


@pytest.mark.slow
def test_repro_notes_and_summary_lines_are_inert(tmp_path: Path) -> None:
    """A source holding OSC and clear-screen escapes: repro's notes (stderr) and --all's
    summary lines (stdout) show them escaped."""
    pytest.importorskip("torch")
    src = "L['x\x1b[\x07\x9b']"  # dynamo's name for it is still L_x_
    refused = f"L['{ESC}']"  # a quantized input: its repro is skipped, the reason names it
    cid = (1, 0)
    quantized = start(cid) + storage(0, 16, cid)
    quantized += tensor(0, [4], [1], 0, dtype="torch.qint8", cid=cid) + source(0, refused, cid)
    quantized += graph([(arg_name(refused), "f32[4][1]cpu")], cid=cid) + metrics(cid)
    log = write_log(
        tmp_path, "esc.log", interned("/m.py"), one_input(name=src, is_inference=True), quantized
    )
    one = run("repro", str(log), "--compile-id", "0/0", "-o", str(tmp_path / "one"))
    assert_clean_exit(one, EXIT_OK, "repro one")
    assert "inference tensor" in one.stderr and "\\x1b[\\x07\\x9b" in one.stderr, one.stderr
    every = run("repro", str(log), "--all", "-o", str(tmp_path / "all"))
    assert every.exit_code == EXIT_NO_REPRO, every.output
    assert "\\x1b]0;TITLE\\x07" in every.stdout, every.stdout  # 1/0's reason quotes its source
    for stream in (one.stdout, one.stderr, every.stdout, every.stderr):
        assert not OBEYED.search(stream), stream


# Bytes a terminal may obey: anything but rich's own colour codes (SGR) is a failure.
_OBEYED = re.compile(
    r"\x1b(?!\[[0-9;]*m)"
    r"|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    yield from planted(tmp_path, monkeypatch)


def _obeyed(text: str) -> list[str]:
    return sorted(
        {repr(m.group()) for m in _OBEYED.finditer(text.replace("\n", "").replace("\t", ""))}
    )


@pytest.mark.parametrize("color", [False, True], ids=["piped", "colour"])
def test_no_escape_sequence_from_the_log_reaches_the_terminal(evil: Hostile, color: bool) -> None:
    env = {"FORCE_COLOR": "1", "NO_COLOR": None} if color else {"NO_COLOR": "1"}
    cases = [
        ("report", str(evil.log)),
        ("report", str(evil.log), "-v"),
        ("report", str(evil.log), "--compile-id", "0/0"),
        ("report", str(evil.log), "-q"),
        ("diff", str(DEMO), str(evil.log)),
        ("diff", str(DEMO), str(evil.log), "-v"),
        ("report", str(evil.log), "--format", "markdown"),
        ("report", str(evil.log), "-o", os.devnull, "--annotations", "github"),
        ("report", str(evil.log), "-o", os.devnull, "--annotations", "plain"),
        ("diff", str(DEMO), str(evil.log), "--format", "markdown"),
    ]
    for args in cases:
        res = run(*args, env=env)
        assert_clean_exit(res, EXIT_OK, " ".join(args))
        for stream in (res.stdout, res.stderr):
            assert _obeyed(stream) == [], (args, _obeyed(stream))
        if args[0] == "report" and "-q" not in args and len(args) < 4:
            # the text is shown, its control characters as escapes
            assert "\\x1b]0;TITLE" in res.stdout and "REVERSED" in res.stdout, args


@pytest.mark.slow
def test_no_escape_sequence_in_the_inputs_listing(evil: Hostile) -> None:
    res = run("inputs", str(evil.log), env={"FORCE_COLOR": "1", "NO_COLOR": None})
    assert_clean_exit(res, EXIT_OK, "inputs")
    assert _obeyed(res.stdout) == [] and _obeyed(res.stderr) == []


def test_file_names_are_cleaned_too(tmp_path: Path) -> None:
    """A log (and a decoy) named with escapes, in a directory: the notes and ids stay inert."""
    d = tmp_path / "trace"
    d.mkdir()
    (d / f"rank{ESCAPES}.log").write_bytes(DEMO.read_bytes())
    (d / "b.log").write_bytes(DEMO.read_bytes())
    (d / f"decoy{ESCAPES}.txt").write_bytes(b"x")
    (d / f"empty{ESCAPES}.log").write_bytes(b"")
    for args in ((), ("-v",)):
        res = run(
            "report", str(d), "--jobs", "1", *args, env={"FORCE_COLOR": "1", "NO_COLOR": None}
        )
        assert_clean_exit(res, EXIT_OK, "directory")
        assert _obeyed(res.stdout) == [] and _obeyed(res.stderr) == []
    bad = tmp_path / f"x{ESCAPES}.log"
    bad.write_bytes(b"")
    res = run("report", str(bad))
    assert res.exit_code == 1 and _obeyed(res.stderr) == [], res.stderr
