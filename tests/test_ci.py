"""CI formats on real logs: the Markdown summary (parsed by a CommonMark parser, for its
structure and that log text stays text), JUnit XML, annotations at the lines torch logged,
and `tlview diff` against a stored tlview.report/1 baseline."""

from __future__ import annotations

import io
import json
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import crafted
import pytest
from helpers import FIXTURES, corpus, run_cli
from markdown_it import MarkdownIt
from markdown_it.token import Token

import tlview
from tlview.analyze.baseline import read_report
from tlview.analyze.diff import compare
from tlview.analyze.phases import top
from tlview.analyze.summary import overview
from tlview.render.annotate import data, prop
from tlview.render.json.diff import to_dict
from tlview.render.json.report import stream
from tlview.render.markdown.md import text
from tlview.units import seconds

# What GitHub turns into a link or markup (a token kind of markdown-it's CommonMark and tables).
ACTIVE = {"link_open", "image", "html_inline", "html_block", "code_inline", "code_block",
          "fence", "em_open", "strong_open", "s_open", "autolink"}  # fmt: skip
# What GitHub links in rendered text by itself: mentions, issue refs, bare URLs.
LINKED = re.compile(r"@\w|#\d|://|\bwww\.", re.I)
HOSTILE = (
    "[click](https://evil.example/x) ![img](http://evil.example/i.png) <script>alert(1)</script>"
    " <https://evil.example> www.evil.example @octocat #12 GH-3 *em* __strong__ ~~gone~~ `code`"
    " a|b &amp; \\[x] \n# heading\n    indented\n> quote\n1. item <!-- c --> user@example.com"
)


def md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def tokens(doc: str) -> list[Token]:
    out: list[Token] = []
    for t in md().parse(doc):
        out.append(t)
        out.extend(t.children or [])
    return out


def assert_inert(doc: str) -> None:
    toks = tokens(doc)
    body = [t for t in toks if not (t.type == "html_block" and "written by tlview" in t.content)]
    assert not [t.type for t in body if t.type in ACTIVE]
    shown = " ".join(t.content for t in toks if t.type == "text")
    assert not LINKED.search(shown), shown


def tables(doc: str) -> list[list[list[str]]]:
    """Each table's body rows, as the cells' rendered text (as a reader sees it)."""
    out: list[list[list[str]]] = []
    row: list[str] | None = None
    in_body = False
    toks = md().parse(doc)
    for i, t in enumerate(toks):
        if t.type == "table_open":
            out.append([])
        elif t.type == "tbody_open":
            in_body = True
        elif t.type == "tbody_close":
            in_body = False
        elif t.type == "tr_open" and in_body:
            row = []
        elif t.type == "tr_close" and in_body and row is not None:
            out[-1].append(row)
        elif t.type == "inline" and in_body and row is not None and toks[i - 1].type == "td_open":
            cell = "".join(c.content for c in t.children or [] if c.type == "text")
            row.append(cell.replace("\u200b", ""))  # the zero-width spaces that unlink
    return out


def headings(doc: str) -> list[str]:
    toks = md().parse(doc)
    return [toks[i + 1].content for i, t in enumerate(toks) if t.type == "heading_open"]


def shown_text(doc: str) -> str:
    return "".join(t.content for t in tokens(doc) if t.type == "text").replace("\u200b", "")


def records(log: Path) -> list[dict[str, Any]]:
    """Every record torch wrote in LOG, as its JSON (payload lines skipped)."""
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if not line.startswith("\t") and "] {" in line:
            out.append(json.loads(line.partition("] ")[2]))
    return out


def markdown(*args: object) -> str:
    r = run_cli("report", *args, "--format", "markdown")
    assert r.exit_code in (0, 3), r.output
    return r.stdout


# -- Markdown ---------------------------------------------------------------------------------


def test_markdown_report_structure_on_a_real_log() -> None:
    doc = markdown(corpus("mlp_aot_eager"))
    assert headings(doc)[0].startswith("tlview: ")
    run = overview(tlview.read(corpus("mlp_aot_eager"))).facts.time
    assert run is not None
    assert headings(doc)[1:] == [
        "Graph breaks (2, 1 reason)",
        "Recompiles (2)",
        "Slowest compiles",
        f"Compile time by phase ({seconds(run.spans_s)} in spans)",
    ]
    figures, breaks, recompiles, slowest, phases = tables(doc)
    # 4 compiles, as torch logged compilation_metrics: the 2 attempts that restarted apart
    assert figures == [["4", "2", "2", "0", "2", "1.71 s"]]
    # The break's title and what torch says it is about, and its hint: as text and page say.
    assert breaks == [
        [
            "2",
            "Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None",
            "mlp_aot_eager.py:13 ×2",
            "Remove the `torch._dynamo.graph_break()` call.",
        ]
    ]
    assert [r[0] for r in recompiles] == ["0/1_1", "1/1"]
    assert recompiles[0][2] == "tensor 'x' size mismatch at index 0. expected 8, actual 12"
    assert recompiles[0][3] == "0/0 at mlp_aot_eager.py:11"  # the frame's line: its input
    assert len(slowest) == 4
    # the phases with the most time of their own, as the spans add up
    assert [(r[0], r[4]) for r in phases] == [
        (seconds(s.exclusive_s), s.name) for s in top(run.spans, 8)
    ]
    assert_inert(doc)


def test_markdown_report_failures_and_the_gate_verdict() -> None:
    r = run_cli("report", corpus("compile_error"), "--format", "markdown",
                "--fail-on", "failures:7,recompiles:1")  # fmt: skip
    assert r.exit_code == 3
    doc = r.stdout
    assert "Failures (7)" in headings(doc)
    failures = tables(doc)[-3]  # then the slowest compiles and the phases
    assert len(failures) == 7 and {row[2] for row in failures} == {
        "BackendCompilerFailed",
        "TorchRuntimeError",
    }
    items = [t.content for t in tokens(doc) if t.type == "text" and "passed" in t.content
             or t.type == "text" and "failed:" in t.content]  # fmt: skip
    assert "✅ passed: failures:7: 7 (limit 7)" in items
    assert "❌ failed: recompiles:1: 2 (limit 1)" in items
    assert "--fail-on: failed" in shown_text(doc)
    assert_inert(doc)


def _hostile_log(tmp_path: Path, n: int = 1) -> Path:
    parts = [crafted.interned("/src/" + HOSTILE.replace("\n", " ").replace("/", "_") + ".py")]
    for k in range(n):
        parts += [
            crafted.start((k, 0), name=f"fn_{k}_@evil"),
            crafted.metrics((k, 0), fail_type=f"Boom{k} [x](http://e.x)", fail_reason=HOSTILE,
                            fail_user_frame_filename="/src/user.py", fail_user_frame_lineno=40 + k),
        ]  # fmt: skip
    log = tmp_path / "hostile.log"
    log.write_bytes(b"".join(parts))
    return log


def test_markdown_text_from_a_log_is_inert(tmp_path: Path) -> None:
    doc = markdown(_hostile_log(tmp_path))
    assert_inert(doc)
    failures = tables(doc)[-2]  # then the slowest compiles
    assert failures[0][2] == "Boom0 [x](http://e.x)"  # shown as the log wrote it, as text
    assert failures[0][3].startswith("[click](https://evil.example/x) ![img]")
    assert "<script>alert(1)</script>" in failures[0][3]
    assert headings(doc)[1:] == ["Failures (1)", "Slowest compiles"]  # "# heading": no heading


def test_markdown_escape_keeps_the_text_and_links_nothing() -> None:
    line = HOSTILE.replace("\n", " ")
    doc = f"| a |\n|---|\n| {text(line, 10_000)} |\n\n{text(line, 10_000)}\n"
    assert_inert(doc)
    got = shown_text(doc)
    assert got.count(re.sub(r"\s+", " ", line).strip()) == 2


def test_markdown_cells_and_documents_are_bounded() -> None:
    from tlview.render.markdown.md import MAX_CELL, MAX_CHARS, fit

    cell = text("a" * 1000 + "_" * 1000)
    assert cell == "a" * (MAX_CELL - 1) + "…"
    wide = text("_" * 1000)  # escaping at most doubles a cut cell
    assert wide.count("\\_") == MAX_CELL - 1
    doc = fit([f"| {text('x' * 1000)} |"] * 1000)
    assert len(doc) < MAX_CHARS and doc.endswith("… cut at 60,000 characters\n")


def test_markdown_cuts_long_lists_with_a_count(tmp_path: Path) -> None:
    doc = markdown(_hostile_log(tmp_path, 14))
    assert len(tables(doc)[-2]) == 10
    assert "… and 4 more failures (tlview report lists them all)" in shown_text(doc)
    assert len(doc) < 65_536
    assert_inert(doc)


def test_markdown_diff_figures_changes_and_verdict() -> None:
    r = run_cli("diff", corpus("mlp_aot_eager"), FIXTURES / "demo.log", "--format", "markdown",
                "--fail-on", "graph-breaks,compiles")  # fmt: skip
    assert r.exit_code == 3
    doc = r.stdout
    figures = tables(doc)[0]
    assert figures[0] == ["compiles", "4", "5", "+1 (worse)"]
    assert figures[1][:3] == ["graph breaks", "2", "2"]
    assert "❌ failed: compiles: 4 -> 5 (no more than BASE)" in shown_text(doc)
    assert "✅ passed: graph-breaks: 2 -> 2 (no more than BASE)" in shown_text(doc)
    changes = tables(doc)[1]
    assert changes and changes[0][0] == "worse"
    assert_inert(doc)


def test_markdown_file_is_replaced_only_when_tlview_wrote_it(tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    out.write_text("mine\n")
    assert run_cli("report", FIXTURES / "demo.log", "-o", out).exit_code == 4
    out.unlink()
    assert run_cli("report", FIXTURES / "demo.log", "-o", out).exit_code == 0
    assert out.read_text().startswith("<!-- written by tlview ")
    assert run_cli("report", FIXTURES / "demo.log", "-o", out).exit_code == 0
    assert tables(out.read_text())[0] == [["5", "2", "2", "0", "2", "1.61 s"]]


# -- JUnit ------------------------------------------------------------------------------------


def _junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and len(root) == 1 and root[0].tag == "testsuite"
    suite = root[0]
    cases = list(suite)
    assert all(c.tag == "testcase" and c.get("classname") and c.get("name") for c in cases)
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == str(sum(c.find("failure") is not None for c in cases))
    return suite


def test_junit_report_one_case_per_check(tmp_path: Path) -> None:
    out = tmp_path / "gate.xml"
    r = run_cli("report", corpus("mlp_aot_eager"), "-q", "--junit-xml", out,
                "--fail-on", "graph-breaks:0,recompiles:3", "--fail-on", "compile-time:1s")  # fmt: skip
    assert r.exit_code == 3
    suite = _junit(out)
    cases = {c.get("name"): c for c in suite}
    assert list(cases) == ["graph-breaks:0", "recompiles:3", "compile-time:1s"]
    gb = cases["graph-breaks:0"].find("failure")
    assert gb is not None and gb.get("message") == "graph-breaks: 2 (limit 0)"
    assert cases["recompiles:3"].find("failure") is None
    assert cases["recompiles:3"].findtext("system-out") == "2 (limit 3)"
    ct = cases["compile-time:1s"].find("failure")
    assert ct is not None and ct.get("message") == "compile-time: 1.71 s (limit 1.00 s)"


def test_junit_diff_and_its_own_file(tmp_path: Path) -> None:
    out = tmp_path / "gate.xml"
    args = ("diff", corpus("mlp_aot_eager"), FIXTURES / "demo.log", "--junit-xml", out,
            "--fail-on", "compiles,failures")  # fmt: skip
    assert run_cli(*args).exit_code == 3
    cases = {c.get("name"): c for c in _junit(out)}
    failure = cases["compiles"].find("failure")
    assert failure is not None and failure.get("message") == "compiles: 4 -> 5 (no more than BASE)"
    assert cases["failures"].find("failure") is None
    assert run_cli(*args).exit_code == 3  # its own file is replaced
    out.write_text("<mine/>")
    assert run_cli(*args).exit_code == 4  # another's is not


def test_junit_needs_fail_on(tmp_path: Path) -> None:
    r = run_cli("report", FIXTURES / "demo.log", "--junit-xml", tmp_path / "x.xml")
    assert r.exit_code == 2
    assert "--junit-xml writes the --fail-on checks" in r.output
    assert not (tmp_path / "x.xml").exists()


# -- annotations ------------------------------------------------------------------------------

_GITHUB = re.compile(r"::(warning|error) file=([^,]+),line=(\d+),title=([^:]+)::(.*)")


def _annotations(*args: object) -> list[tuple[str, str, int, str, str]]:
    r = run_cli("report", *args, "-o", "/dev/null", "--annotations", "github")
    assert r.exit_code == 0, r.output
    out = []
    for line in r.stdout.splitlines():
        m = _GITHUB.fullmatch(line)
        assert m, line
        out.append((m[1], m[2], int(m[3]), m[4], m[5]))
    return out


def test_annotations_at_the_lines_torch_logged() -> None:
    log = next(corpus("mlp_aot_eager").glob("*.log"))
    got = _annotations(log)
    recs = records(log)
    # Graph breaks: where torch said "Graph break in user code at FILE:LINE".
    said = set(re.findall(r"Graph break in user code at (\S+:\d+)", log.read_text("utf-8")))
    breaks = [(f, n) for level, f, n, title, _ in got if title.startswith("graph break")]
    assert (
        [f"{f}:{n}" for f, n in breaks]
        == sorted(said)
        == ["/home/user/corpus/gen/mlp_aot_eager.py:13"]
    )
    # Recompiles: the innermost frame of the recompiled compile's dynamo_start stack.
    names = {r["str"][1]: r["str"][0] for r in recs if "str" in r}
    starts = {(r["frame_id"], r["frame_compile_id"]): r["dynamo_start"]["stack"][-1]
              for r in recs if "dynamo_start" in r}  # fmt: skip
    want = sorted((names[starts[k]["filename"]], starts[k]["line"]) for k in [(0, 1), (1, 1)])
    recompiles = sorted((f, n) for _, f, n, title, _ in got if title.startswith("recompile"))
    assert recompiles == want == [("/home/user/corpus/gen/mlp_aot_eager.py", 11),
                                  ("/home/user/corpus/gen/mlp_aot_eager.py", 13)]  # fmt: skip
    assert all(level == "warning" for level, *_ in got) and len(got) == 3
    # named by the compiles torch counts: the attempts that broke (0/0, 0/1) restarted into them
    assert "(2 times: 0/0_1, 0/1_1)" in got[0][4]


def test_annotations_of_failed_compiles_and_plain_lines() -> None:
    logs = corpus("compile_error")
    recs = [r for log in sorted(logs.glob("*.log")) for r in records(log)]
    want = set()
    for r in recs:
        m = r.get("compilation_metrics")
        if m and m.get("fail_type") and m.get("fail_user_frame_filename"):
            want.add((m["fail_user_frame_filename"], m["fail_user_frame_lineno"]))
    got = _annotations(logs)
    errors = {(f, n) for level, f, n, _, _ in got if level == "error"}
    assert ("/home/user/corpus/gen/compile_error.py", 59) in want & errors
    assert len(errors) == 3  # f, g and mm failed: each at one line, deduplicated over 7
    res = run_cli("report", logs, "-o", "/dev/null", "--annotations", "plain")
    plain = res.stdout.splitlines()
    assert "/home/user/corpus/gen/compile_error.py:59: error: compile of mm failed: " \
        "TorchRuntimeError: RuntimeError when making fake tensor call" in plain[2]  # fmt: skip


def test_a_guard_is_annotated_where_torch_says_it_came_from() -> None:
    log = FIXTURES / "recomp.log"
    got = _annotations(log)
    # torch 2.13 logs the guard's own stack under it: the line that made the guard.
    said = re.findall(r'File \\"([^\\]+)\\", line (\d+), in torch_dynamo_resume_in_f_at_8',
                      log.read_text("utf-8"))  # fmt: skip
    assert said == [("/tmp/tmp_b5cy83f/recomp.py", "9")]
    guard = [g for g in got if g[3] == "recompile of torch_dynamo_resume_in_f_at_8"]
    assert [(f, str(n)) for _, f, n, _, _ in guard] == said
    assert guard[0][4] == "failed guard: n == 2 (1/1)"
    # A compile torch logged no stack for (2/2 hit the recompile limit): its frame's line, as
    # the frame's first compile logged it.
    recs = records(log)
    names = {r["str"][1]: r["str"][0] for r in recs if "str" in r}
    start = next(r["dynamo_start"]["stack"][-1] for r in recs
                 if "dynamo_start" in r and (r["frame_id"], r["frame_compile_id"]) == (2, 0))  # fmt: skip
    assert not any("dynamo_start" in r and (r["frame_id"], r["frame_compile_id"]) == (2, 2)
                   for r in recs)  # fmt: skip
    failed = [g for g in got if g[0] == "error"]
    assert [(f, n) for _, f, n, _, _ in failed] == [(names[start["filename"]], start["line"])]


def test_annotations_are_escaped_and_capped(tmp_path: Path) -> None:
    assert data("50% done\r\n::error::x") == "50%25 done%0D%0A::error::x"
    assert prop("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    log = _hostile_log(tmp_path, 14)
    r = run_cli("report", log, "-o", "/dev/null", "--annotations", "github")
    lines = r.stdout.splitlines()
    assert len(lines) == 11  # 10 errors, then one line for the 4 left out
    assert all(_GITHUB.fullmatch(x) for x in lines[:10])
    assert lines[-1] == "::notice title=tlview::4 more problem place(s) not annotated " \
        "(at most 10 per level)"  # fmt: skip
    assert {int(_GITHUB.fullmatch(x)[3]) for x in lines[:10]} == set(range(40, 50))  # type: ignore[index]


def test_diff_annotates_only_what_new_brings(tmp_path: Path) -> None:
    def diff(base: Path, new: Path) -> list[str]:
        r = run_cli("diff", base, new, "-o", "/dev/null", "--annotations", "plain")
        assert r.exit_code == 0, r.output
        return r.stdout.splitlines()

    mlp = next(corpus("mlp_aot_eager").glob("*.log"))
    assert diff(mlp, mlp) == []
    assert diff(_stored(mlp, tmp_path), mlp) == []  # a stored BASE keeps its stacks and breaks
    # The same program under torch 2.8 and 2.13: the break, the failure and the tensor guards
    # are at the same lines; only 2.13 logs the stack of the guard on n, so its line (9) is new.
    assert diff(FIXTURES / "torch28.log", FIXTURES / "recomp.log") == [
        "/tmp/tmp_b5cy83f/recomp.py:9: warning: recompile of torch_dynamo_resume_in_f_at_8: "
        "failed guard: n == 2 (1/1)"
    ]


# -- a stored baseline ------------------------------------------------------------------------


def _stored(path: Path, tmp_path: Path) -> Path:
    buf = io.BytesIO()
    stream(tlview.read(path), buf)
    out = tmp_path / "base.json"
    out.write_bytes(buf.getvalue())
    return out


def _without_inputs(d: dict[str, Any]) -> dict[str, Any]:
    d["base"].pop("path")
    d["notes"] = [n for n in d["notes"] if "stored report" not in n]
    d["changes"] = [c for c in d["changes"] if c["kind"] != "input"]
    for f in d["frames"]:
        for c in f["compiles"]:
            c.pop("inputs_compared"), c.pop("input_changes")
    return d


@pytest.mark.parametrize(
    ("base", "new"),
    [
        (("mlp_aot_eager",), "demo.log"),
        (("compile_error",), "limit.log"),
        (("multirank_gloo",), None),
        (("transformer_inductor",), "kernels.log"),
        (None, "aoti.log"),
    ],
)
def test_diff_against_a_stored_report_is_the_diff_of_logs(
    base: tuple[str, ...] | None, new: str | None, tmp_path: Path
) -> None:
    b = corpus(*base) if base else FIXTURES / "cache_hit.log"
    n = FIXTURES / new if new else b
    rb, rn = tlview.read(b), tlview.read(n)
    stored = read_report(_stored(b, tmp_path))
    assert _without_inputs(to_dict(compare(stored, rn))) == _without_inputs(
        to_dict(compare(rb, rn))
    )


def test_diff_cli_with_a_stored_base(tmp_path: Path) -> None:
    base = _stored(corpus("mlp_aot_eager"), tmp_path)
    r = run_cli("diff", base, FIXTURES / "demo.log", "--fail-on", "graph-breaks")
    assert r.exit_code == 0, r.output
    assert "note: BASE is a stored report: input changes are not compared" in r.stdout
    r = run_cli("diff", base, FIXTURES / "demo.log", "--fail-on", "input-changes")
    assert r.exit_code == 2
    assert f"--fail-on 'input-changes': needs the log of {base}, not a stored report" in r.output


def test_a_partial_or_damaged_stored_report_is_refused(tmp_path: Path) -> None:
    part = tmp_path / "part.json"
    r = run_cli("report", FIXTURES / "demo.log", "--format", "json", "--compile-id", "2/0")
    part.write_text(r.stdout)
    r = run_cli("diff", part, FIXTURES / "demo.log")
    assert r.exit_code == 1 and "holds 1 of its 5 compiles (written with --compile-id?)" in r.output
    bad = tmp_path / "bad.json"
    for fmt in ("tlview.report/1", "tlview.report/2"):  # what tlview wrote before, and now
        bad.write_text(
            f'{{"format":"{fmt}","compiles":[{{"compile_id":"0/0","log":"a","graph_breaks":[7]}}]}}'
        )
        r = run_cli("diff", bad, FIXTURES / "demo.log")
        assert r.exit_code == 1 and f"{bad}: a damaged {fmt} file" in r.output
        assert len(r.output.strip().splitlines()) == 1


# -- growth -----------------------------------------------------------------------------------


@pytest.mark.slow  # over a second
def test_ci_formats_grow_linearly_with_compiles(tmp_path: Path) -> None:
    from growth import assert_linear

    from tlview.analyze.sites import sites
    from tlview.render import Options
    from tlview.render.annotate import lines as annotations
    from tlview.render.markdown.report import lines as summary

    def build(n: int) -> tuple[tlview.Report, Path]:
        # A folder of its own each time: assert_linear builds each size again when it retries.
        where = Path(tempfile.mkdtemp(prefix=f"{n}-", dir=tmp_path))
        rep = tlview.read(_hostile_log(where, n))
        return rep, _stored(where / "hostile.log", where)

    def run(got: tuple[tlview.Report, Path]) -> None:
        rep, stored = got
        summary(rep, Options(), False)
        annotations(sites(rep), "github")
        read_report(stored)

    assert_linear(build, run, 150, "markdown, annotations and a stored report")
