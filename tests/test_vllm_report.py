"""What every report format shows of issue 45's facts, on logs torch wrote (vllm.log and
vllm_tp/ stand in for vLLM, regional.log, passes.log, demo.log): vLLM's calls and pieces, a
job's ranks side by side, regions beside artifacts, pass stages and their diffs, bytecode
pairs; that every format says the same; and that a log's words stay inert in each."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from crafted import record
from helpers import FIXTURES, report_json, run_cli
from listing import table_rows

import tlview
from tlview.render.html.budget import page_keep
from tlview.render.html.report import render
from tlview.units import count

VLLM = FIXTURES / "vllm.log"
TP = FIXTURES / "vllm_tp"
REGIONAL = FIXTURES / "regional.log"
PASSES = FIXTURES / "passes.log"
DEMO = FIXTURES / "demo.log"


def text(*args: object) -> str:
    result = run_cli("report", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def page(path: Path) -> str:
    """The page, from what reading keeps for it (as `--format html` reads)."""
    return render(tlview.read(path, keep=page_keep(False)))


def visible(s: str) -> str:
    """A page's text as a reader sees it: tags dropped, entities read, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())


def section(doc: str, start: str, end: str = "</section>") -> str:
    i = doc.index(start)
    return doc[i : doc.index(end, i)]


def markdown(path: Path) -> str:
    result = run_cli("report", path, "--format", "markdown")
    assert result.exit_code == 0, result.output
    return result.stdout


# -- text ---------------------------------------------------------------------------------------


def test_text_lists_each_call_with_its_config_and_pieces_by_range() -> None:
    out = text(VLLM)
    lines = out.splitlines()
    k = lines.index("vLLM: 2 compile calls, 4 piece compiles, 4 FX graph cache hits")
    assert lines[k + 1] == "call 1 of vllm.log: backbone, compile 0/0, fresh_compile"
    config = " | ".join(x.removeprefix("  config: ") for x in lines[k + 2 : k + 4])
    assert "model: tlview/toy-llm | mode: 3 | backend: inductor" in config
    assert "splitting ops: tlv::attention" in config
    assert "enabled passes: eliminate_noops, enable_fusion" in config
    assert (
        "  graphs: split graph vllm_piecewise_split_graph; patterns vllm_patterns.FusionPass"
        in lines
    )
    # backbone: pieces compiled at run time (-/-), one range; eagle_head: a size, then the range
    assert [r[:4] for r in table_rows(out, "range [1, 16]")] == [
        ["range [1, 16]", "submod_0", "1/2", "-/-"],
        ["range [1, 16]", "submod_0", "1/1", "1/0"],
    ]
    assert [r[1:4] for r in table_rows(out, "")][0] == ["submod_2", "2/2", "-/-"]
    size = table_rows(out, "size 4 (cudagraph capture)")
    assert [r[1:4] for r in size] == [["submod_0", "1/1", "1/0"]]
    assert size[0][5] == "fx_graph hit, aotautograd hit"
    assert size[0][4] == "0.081 s (log times)"
    assert out.index("size 4 (cudagraph capture)") < out.rindex("range [1, 16]")
    assert "a piece's artifacts: tlview show PATH --compile-id -/-; its passes as diffs" in out


def test_text_puts_a_jobs_ranks_side_by_side_and_one_rank_in_full() -> None:
    whole = text(TP)
    out = whole[whole.index("vLLM calls by rank") :]  # the vLLM part: other tables come before
    assert "names tlview does not read" not in whole  # vLLM's records are read, in this part
    assert [r[:7] for r in table_rows(out, "1")] == [
        ["1", "backbone", "0", "2", "2", "0", "132.0 s"]
    ]
    assert [r[2:7] for r in table_rows(out, "") if len(r) == 8] == [["1", "2", "2", "0", "130.6 s"]]
    assert "call 1 of rank 0: backbone, compile rank0:0/0, fresh_compile" in out
    assert "call 1 of rank 1" not in out  # the ranks agree: rank 1's call is not repeated
    assert "... 1 more vLLM call (of other ranks, alike rank 0's)" in out
    pieces = table_rows(out, "range [1, 16]")
    assert [(r[1], r[3], r[6]) for r in pieces] == [("submod_0", "rank0:0/0", "2")]


def test_text_detail_names_regions_passes_and_bytecode() -> None:
    lines = text(REGIONAL).splitlines()
    k = lines.index(
        "  subgraphs: 2 regions of regional inductor "
        "(tlview show PATH --compile-id 0/0 'NAME[SUBGRAPH]' writes one)"
    )
    assert lines[k + 1 : k + 3] == [
        "    subgraph repeated_subgraph0: fx_graph_runnable, before_post_grad_graph, "
        "inductor_post_grad_graph, inductor_output_code",
        "    subgraph repeated_subgraph1: fx_graph_runnable#2, before_post_grad_graph#2, "
        "inductor_post_grad_graph#2, inductor_output_code#2",
    ]
    lines = text(PASSES).splitlines()
    k = lines.index(
        "  passes: 3 stages, 3 pass graphs "
        "(tlview show PATH --compile-id 0/0 --passes shows each as a diff)"
    )
    assert lines[k + 1 : k + 4] == [
        "    stage pre_grad, 1 pass graph: "
        "before_pre_grad_graph > merge_splits_pass > after_pre_grad_graph",
        "    stage joint, 0 pass graphs: before_joint_graph > after_joint_graph",
        "    stage post_grad, 2 pass graphs: before_post_grad_graph > "
        "optimus_BatchMulPostGradFusion > normalization_aten_pass > inductor_post_grad_graph",
    ]
    out = text(DEMO)
    assert "  bytecode: 1 function (tlview show PATH --compile-id 1/1 --bytecode diffs each)" in out
    assert "    function torch_dynamo_resume_in_forward_at_15: original and modified (1/1)" in out


def test_text_payload_table_names_each_payloads_region() -> None:
    out = text(REGIONAL, "--compile-id", "0/0")
    rows = [r for r in (line.split(" | ") for line in out.splitlines()) if len(r) == 5]
    assert [r[0].strip() for r in rows][0] == "kind"
    regions = [(r[0].strip(), r[4].strip()) for r in rows[1:] if r[4].strip()]
    assert regions[:2] == [
        ("fx_graph_runnable", "repeated_subgraph0"),
        ("before_post_grad_graph", "repeated_subgraph0"),
    ]
    assert [s for _, s in regions].count("repeated_subgraph1") == 4


# -- JSON ---------------------------------------------------------------------------------------

CALL_KEYS = [
    "log", "rank", "index", "prefix", "event", "cache_hit", "compile", "line", "config",
    "split_graph", "patterns", "frame", "submods", "seconds", "ranges",
]  # fmt: skip
PIECE_KEYS = [
    "submod", "index", "total", "start", "end", "single_size", "capture_size", "compile",
    "line", "graph", "artifacts", "pass_graphs", "cache", "seconds", "seconds_from",
]  # fmt: skip


def test_json_has_the_shape_of_docs_formats() -> None:
    doc = report_json(VLLM)
    calls = doc["vllm"]
    assert [list(c) for c in calls] == [CALL_KEYS, CALL_KEYS]
    assert "vllm_ranks" not in doc  # one log
    assert [(c["prefix"], c["compile"], c["submods"]) for c in calls] == [
        ("backbone", "0/0", ["submod_0", "submod_2"]),
        ("eagle_head", "1/0", ["submod_0"]),
    ]
    eagle = calls[1]
    assert eagle["config"]["compile_sizes"] == ["4"] and eagle["config"]["other"] == {}
    assert [(g["label"], g["capture_size"]) for g in eagle["ranges"]] == [
        ("size 4", True),
        ("range [1, 16]", False),
    ]
    piece = eagle["ranges"][0]["pieces"][0]
    assert list(piece) == PIECE_KEYS
    assert (piece["start"], piece["end"], piece["graph"]) == (4, 4, "vllm_submod_0")
    assert piece["cache"] == {"fx_graph": "hit", "aotautograd": "hit"}
    ranks = report_json(TP)["vllm_ranks"]
    assert ranks == [
        {
            "index": 0,
            "prefix": "backbone",
            "differs": [],
            "ranks": [
                {"rank": r, "log": log.name, "pieces": 2, "compiles": 2, "hits": 0, "seconds": s}
                for r, log, s in zip(
                    (0, 1), sorted(TP.glob("*.log")), (131.972, 130.579), strict=True
                )
            ],
        }
    ]


def test_json_names_regions_pass_stages_and_bytecode() -> None:
    c = report_json(REGIONAL)["compiles"][0]
    assert [(g["subgraph"], g["artifacts"][0]) for g in c["subgraphs"]] == [
        ("repeated_subgraph0", "fx_graph_runnable"),
        ("repeated_subgraph1", "fx_graph_runnable#2"),
    ]
    tagged = [(p["kind"], p["subgraph"]) for p in c["graphs"] + c["artifacts"] if "subgraph" in p]
    assert len(tagged) == 8 and tagged[0] == ("fx_graph_runnable", "repeated_subgraph0")
    assert "passes" not in c  # its regions' stages hold no pass graph
    c = report_json(PASSES)["compiles"][0]
    post = c["passes"][2]
    assert (post["stage"], post["subgraph"], post["passes"]) == ("post_grad", None, 2)
    assert [(s["name"], s["role"], s["pass"]) for s in post["steps"]] == [
        ("before_post_grad_graph", "before", "before_post_grad_graph"),
        ("optimus_BatchMulPostGradFusion", "pass", "optimus_BatchMulPostGradFusion"),
        ("normalization_aten_pass_post_grad", "pass", "normalization_aten_pass"),
        ("inductor_post_grad_graph", "after", "inductor_post_grad_graph"),
    ]
    tp = report_json(TP)["compiles"][0]
    fusion = tp["passes"][2]["steps"][1]
    assert (fusion["name"], fusion["pass"], fusion["index"]) == (
        "vllm_post_grad.0.FusionPass",
        "FusionPass",
        0,
    )
    demo = {c["key"]: c for c in report_json(DEMO)["compiles"]}
    assert demo["1/1"]["bytecode"] == [
        {
            "co_name": "torch_dynamo_resume_in_forward_at_15",
            "original": "torch_dynamo_resume_in_forward_at_15_ORIGINAL_BYTECODE",
            "modified": "torch_dynamo_resume_in_forward_at_15_MODIFIED_BYTECODE",
            "compiles": ["1/1"],
        }
    ]
    assert not {"vllm", "vllm_ranks"} & set(report_json(DEMO))
    assert not {"subgraphs", "passes", "bytecode"} & set(demo["2/0"])


# -- the page -----------------------------------------------------------------------------------


def test_page_has_a_vllm_section_with_the_same_tables() -> None:
    doc = page(VLLM)
    assert '<a href="#vllm">vLLM</a>' in doc
    seen = visible(section(doc, '<section id="vllm"'))
    assert seen.startswith("vLLM 2 compile calls, 4 piece compiles, 4 FX graph cache hits")
    assert "call 1 of vllm.log: backbone 2 pieces, 2 compiles, 2 FX graph cache hits" in seen
    assert "splitting ops tlv::attention" in seen
    rows = re.findall(r"(range \[1, 16\]|size 4 cudagraph capture) submod_0 (\d/\d) (\S+)", seen)
    assert rows == [("range [1, 16]", "1/2", "-/-"), ("size 4 cudagraph capture", "1/1", "1/0"),
                    ("range [1, 16]", "1/1", "1/0")]  # fmt: skip
    assert seen.count("fx_graph hit , aotautograd hit") == 4  # a tag between: a space
    tp = visible(section(page(TP), '<section id="vllm"'))
    assert "Calls by rank call prefix rank pieces compiles cache hits time differs" in tp
    assert "1 backbone 0 2 2 0 132.0 s 1 2 2 0 130.6 s" in tp
    assert "1 more call of other ranks, alike those above" in tp


def step_text(doc: str, name: str) -> str:
    """What a pass step on the page shows when opened: its diff, unpacked when packed."""
    i = doc.index(f"<summary><code>{name}</code>")
    body = doc[i : doc.index("</details>", i)]
    packed = re.search(r'data-gz="([^"]+)"', body)
    if packed:
        return gzip.decompress(base64.b64decode(packed.group(1))).decode()
    got = re.search(r"<code data-lang=\"text\">(.*?)</code>", body, re.S)
    assert got is not None, body
    return html.unescape(got.group(1))


def test_page_shows_each_pass_as_a_diff_folded_until_opened() -> None:
    doc = page(TP)
    sec = section(doc, 'aria-label="compile rank0:0/0"')
    assert '<h3>Passes <span class="count">6 stages, 4 pass graphs</span></h3>' in sec
    assert "tlview show PATH --compile-id rank0:0/0 --passes" in sec
    first = sec.index("<summary><code>before_post_grad_graph</code>")
    assert "the graph before its passes" in sec[first : first + 300]
    diff = step_text(sec, "vllm_post_grad.0.FusionPass").splitlines()
    assert diff[:2] == ["--- before_post_grad_graph", "+++ vllm_post_grad.0.FusionPass"]
    assert any(x.startswith("-") and "sin.default" in x for x in diff)
    assert any(x.startswith("+") and "fused_sincos" in x for x in diff)
    same = sec.index("<summary><code>vllm_post_grad.1.NoOpEliminationPass</code>")
    assert "unchanged from <code>vllm_post_grad.0.FusionPass</code>" in sec[same : same + 300]
    assert '<details class="step" open' not in sec  # each step folded until opened


def test_page_names_each_payloads_region_and_the_bytecode() -> None:
    doc = page(REGIONAL)
    kind = '<code class="kind">fx_graph_runnable</code> <span class="dim">subgraph</span> '
    assert re.findall(kind + "<code>([^<]*)</code>", doc) == [
        "repeated_subgraph0",
        "repeated_subgraph1",
    ]
    assert '<h3>Subgraphs <span class="count">2 regions of regional inductor</span></h3>' in doc
    demo = visible(section(page(DEMO), 'aria-label="compile 1/0"'))
    assert "Bytecode 1" in demo
    assert "torch_dynamo_resume_in_forward_at_15 : original modified (1/0)" in demo


# -- Markdown -----------------------------------------------------------------------------------


def test_markdown_has_a_short_vllm_table() -> None:
    doc = markdown(VLLM)
    assert "#### vLLM (2 compile calls, 4 piece compiles, 4 cache hits)" in doc
    assert "| 1 | vllm\\.log | backbone | fresh\\_compile | 2 | 2 | 2 | 10.7 s |" in doc
    assert "| 2 | vllm\\.log | eagle\\_head | fresh\\_compile | 1 | 2 | 2 | 0.297 s |" in doc
    tp = markdown(TP)
    assert "| 1 | rank 0 | backbone | fresh\\_compile | 2 | 2 | 0 | 132.0 s |" in tp
    assert "| 1 | rank 1 | backbone | fresh\\_compile | 2 | 2 | 0 | 130.6 s |" in tp
    assert "vLLM" not in markdown(DEMO)


# -- every format says the same -----------------------------------------------------------------


def facts(doc: dict[str, Any]) -> list[str]:
    """What each format must say, from the JSON: each call's prefix and figures, each piece's
    range, each region and its artifacts, each pass stage's passes, each bytecode function."""
    out = []
    for call in doc.get("vllm", []):
        out.append(call["prefix"])
        out += [g["label"] for g in call["ranges"]]
        out += [p["submod"] for g in call["ranges"] for p in g["pieces"]]
    for c in doc["compiles"]:
        for g in c.get("subgraphs", []):
            out += [g["subgraph"], *g["artifacts"]]
        for s in c.get("passes", []):
            out += [x["pass"] for x in s["steps"]]
        out += [b["co_name"] for b in c.get("bytecode", [])]
    return out


@pytest.mark.slow  # sixteen reports
@pytest.mark.parametrize("path", [VLLM, TP, REGIONAL, PASSES, DEMO], ids=lambda p: p.name)
def test_every_format_says_the_same(path: Path) -> None:
    doc = report_json(path)
    want = facts(doc)
    assert want
    terminal = text(path)
    shown = visible(page(path))
    for fact in want:
        assert fact in terminal, (fact, "text")
        assert fact in shown, (fact, "page")
    for call in doc.get("vllm", []):
        pieces = sum(len(g["pieces"]) for g in call["ranges"])
        hits = sum(p["cache"].get("fx_graph") == "hit" for g in call["ranges"] for p in g["pieces"])
        row = f"{count(len(call['submods']), 'piece')}, {count(pieces, 'compile')}, {hits} FX"
        if call["rank"] in (None, 0):
            assert row in shown, row
        md = markdown(path)
        assert f"| {len(call['submods'])} | {pieces} | {hits} |" in md


# -- hostile input ------------------------------------------------------------------------------

EVIL = "[bold]x[/bold] <script>alert(1)</script> \x1b[2J\x1b]0;t\x07 @octocat\n::error::owned"
OBEYED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def evil_log(tmp_path: Path) -> Path:
    """vLLM's records, a region and a pass whose every text a log controls is hostile."""
    art = {"encoding": "json"}
    config = {"prefix": EVIL, "model": EVIL, "splitting_ops": f"a, {EVIL}", "mode": EVIL}
    start = {"piecewise_index": 0, "submod_name": EVIL, "total_piecewise_compiles": 1,
             "compile_range_start": 1, "compile_range_end": 8}  # fmt: skip
    log = tmp_path / "evil.log"
    log.write_bytes(
        record("artifact", {"name": "vllm_compile_event", **art}, payload='{"type": "x"}')
        + record("artifact", {"name": "vllm_compilation_config", **art}, payload=json.dumps(config))
        + record(
            "artifact", {"name": "vllm_piecewise_compile_start", **art}, payload=json.dumps(start)
        )  # fmt: skip
        + record(
            "artifact",
            {"name": "before_post_grad_graph", "encoding": "string"},
            payload="def forward(self):\n    return 1",
        )  # fmt: skip
        + record(
            "graph_dump",
            {"name": "vllm_post_grad.0.::error::x<b>@octocat\x1b[2J"},
            payload=f"def forward(self):\n    return 2  # {EVIL}",
        )  # fmt: skip
        + record(
            "artifact",
            {"name": "fx_graph_runnable", "encoding": "string"},
            payload="x",
            subgraph_name=EVIL,
        )  # fmt: skip
    )
    return log


def test_hostile_vllm_region_and_pass_text_stays_inert(tmp_path: Path) -> None:
    log = evil_log(tmp_path)
    for args in ((), ("-v",), ("--compile-id", "0/0")):
        out = text(log, *args)
        assert not OBEYED.search(out), args
        assert "[bold]x[/bold]" in out  # rich's markup shown as written, not obeyed
        assert not [ln for ln in out.splitlines() if ln.lstrip().startswith("::")], args
        assert "error::owned" in out  # shown, inside a line of tlview's words
    doc = page(log)
    assert "<script>alert" not in doc and "<b>@octocat" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    assert visible(section(doc, '<section id="vllm"')).count("<script>alert(1)</script>") >= 4
    from test_ci import assert_inert

    md = markdown(log)
    assert_inert(md)
    assert "error\\:\\:owned" in md and "@\u200boctocat" in md
    assert not [ln for ln in md.splitlines() if ln.lstrip().startswith("::")]
    doc_json = report_json(log)
    assert doc_json["vllm"][0]["prefix"] == EVIL  # JSON keeps the log's text exactly


# -- bounds -------------------------------------------------------------------------------------


def many_passes(tmp_path: Path, n: int, lines: int) -> Path:
    """One compile whose post-grad stage has N pass graphs, each rewriting LINES lines."""
    out = [
        record(
            "artifact",
            {"name": "before_post_grad_graph", "encoding": "string"},
            payload="\n".join(f"    x{i} = 0" for i in range(lines)),
        )
    ]
    for k in range(n):
        graph = "\n".join(f"    x{i} = {k + 1}" for i in range(lines))
        out.append(record("graph_dump", {"name": f"vllm_post_grad.{k}.Pass{k}"}, payload=graph))
    log = tmp_path / f"passes{n}.log"
    log.write_bytes(b"".join(out))
    return log


def test_pass_diffs_on_the_page_and_terminal_are_bounded(tmp_path: Path) -> None:
    from tlview.render.html import passes as page_passes
    from tlview.render.text import passes as text_passes

    log = many_passes(tmp_path, 40, 600)
    doc = page(log)
    diffs = re.findall(r'<code data-lang="text"( data-gz="([^"]+)")?>(.*?)</code>', doc, re.S)
    shown = sum(
        len(gzip.decompress(base64.b64decode(gz))) if gz else len(body) for _, gz, body in diffs
    )
    assert 0 < shown <= page_passes.PASS_BYTES
    assert doc.count(page_passes.SPENT) == 40 - len(diffs)
    assert f"the first {page_passes.MAX_STEP_LINES} of 1,203 lines of the diff" in doc
    out = text(log, "--compile-id", "0/0")
    steps = " > ".join(["before_post_grad_graph", *(f"Pass{k}" for k in range(11))])
    assert f"    stage post_grad, 40 pass graphs: {steps} > ... 29 more" in out
    assert text_passes.MAX_STEPS == 12


def many_calls(tmp_path: Path, calls: int, pieces: int) -> Path:
    """CALLS compile calls, the first of PIECES piece compiles (each a compile start)."""
    config = {"name": "vllm_compilation_config", "encoding": "json"}
    out = []
    for c in range(calls):
        out.append(record("artifact", config, (c, 0), payload=f'{{"prefix": "p{c}"}}'))
        for k in range(pieces if c == 0 else 0):
            start = {"piecewise_index": k, "submod_name": f"submod_{2 * k}",
                     "compile_range_start": 1, "compile_range_end": 16}  # fmt: skip
            out.append(
                record(
                    "artifact",
                    {"name": "vllm_piecewise_compile_start", "encoding": "json"},
                    None,
                    payload=json.dumps(start),
                    stack=[],
                )
            )
    log = tmp_path / "calls.log"
    log.write_bytes(b"".join(out))
    return log


def test_vllm_tables_are_capped_with_a_count(tmp_path: Path) -> None:
    from tlview.render.html import vllm as page_vllm
    from tlview.render.text import vllm as text_vllm

    assert (text_vllm.MAX_PIECES, text_vllm.MAX_CALLS) == (40, 8)
    assert (page_vllm.MAX_PIECES, page_vllm.MAX_CALLS) == (200, 20)
    log = many_calls(tmp_path, 22, 205)
    terminal = text(log)
    assert "... 165 more piece compiles: --format json lists them" in terminal
    assert len(table_rows(terminal, "")) == 40 - 1
    assert "... 14 more vLLM calls: --format json lists them" in terminal
    assert terminal.count("\ncall ") == 8
    seen = visible(section(page(log), '<section id="vllm"'))
    assert "... 5 more piece compiles" in seen and "... 2 more calls:" in seen
    assert seen.count(" submod_") == 200
    doc = report_json(log)
    assert len(doc["vllm"]) == 22 and len(doc["vllm"][0]["ranges"][0]["pieces"]) == 205


def test_a_job_shows_the_first_ranks_calls_and_those_that_differ() -> None:
    from tlview.analyze.vllm import RankCell, RankRow, VllmCall, VllmReport

    calls = [VllmCall(i, f"r{r}.log", 1, r) for r in (0, 1) for i in (0, 1)]
    for c in calls:
        c.config = None
    cell = RankCell(0, "r0.log", 2, 2, 0, None, None)
    ranks = [
        RankRow(0, None, [cell, RankCell(1, "r1.log", 2, 2, 0, None, None)]),
        RankRow(1, None, [cell, RankCell(1, "r1.log", 3, 3, 0, None, None)]),
    ]
    assert ranks[1].differs == ["pieces", "compiles"]
    shown = VllmReport(calls, ranks).distinct()
    assert [(c.rank, c.index) for c in shown] == [(0, 0), (0, 1), (1, 1)]
    assert VllmReport(calls, []).distinct() == calls  # one log: every call
