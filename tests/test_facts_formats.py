"""What every format shows of issue 48's facts (where compile time went, run-time work, CUDA
graphs, guard origins, missing artifacts, records without a compile id), on logs torch wrote:
the figures are the log's own (read again here from its raw records), each format says the
same of a compile, a report split in two processes is the one process's, and text from a
crafted log stays inert in text, page and Markdown."""

from __future__ import annotations

import html
import io
import re
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from helpers import FIXTURES, corpus, run_cli
from test_ci import assert_inert, headings, tables
from test_compile_facts import raw_metrics, raw_spans

import tlview
from tlview.analyze.compiles import analysed
from tlview.inert import clean
from tlview.model import Report
from tlview.parse import Reader
from tlview.units import seconds

ITEM, AUTOTUNE = FIXTURES / "item_float.log", FIXTURES / "autotune.log"
EXPORT_AOTI, PRECOMPILE = FIXTURES / "export_aoti.log", FIXTURES / "precompile.log"


def wide(*args: object) -> Result:
    """`tlview ARGS` piped 400 columns wide: a table's rows unwrapped."""
    from tlview.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"})


@cache
def text(path: Path, *args: str) -> str:
    r = wide("report", path, *args)
    assert r.exit_code == 0, r.output
    return r.stdout


@cache
def doc(path: Path) -> dict[str, Any]:
    got: dict[str, Any] = orjson.loads(run_cli("report", path, "--format", "json").stdout_bytes)
    return got


@cache
def page(path: Path) -> str:
    """The page's text as a reader sees it: tags gone, entities read, spaces collapsed."""
    raw = run_cli("report", path, "--format", "html").stdout
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


@cache
def markdown(path: Path) -> str:
    return run_cli("report", path, "--format", "markdown").stdout


def compile_of(path: Path, key: str) -> dict[str, Any]:
    got: dict[str, Any] = next(c for c in doc(path)["compiles"] if c["key"] == key)
    return got


# -- the figures are the log's own -----------------------------------------------------------------


def test_the_aotinductor_build_is_compile_time_in_every_format() -> None:
    """An export then aoti_compile_and_package: 0/0 logs no compilation_metrics time, its
    spans the build's minutes; no format says "not logged"."""
    raw = raw_spans(EXPORT_AOTI)
    build = raw[("0/0", "compile_fx_aot")] / 1e6
    c = compile_of(EXPORT_AOTI, "0/0")
    assert c["compile_time_s"] is None and c["time"]["from_spans"]
    outer = raw[("0/0", "compile_fx_aot")] + raw[("0/0", "compile_attempt_0")]
    assert c["time"]["seconds"] == pytest.approx(outer / 1e6, abs=1e-5) and build > 100
    run = doc(EXPORT_AOTI)["stats"]["time"]["spans_s"]
    capture = raw[("-/-", "fullgraph_capture")] / 1e6
    assert run == pytest.approx(c["time"]["spans_s"] + capture, abs=1e-5)
    t = text(EXPORT_AOTI)
    assert f"| {run:.2f} s compiling (from spans: no compilation_metrics time) |" in t
    assert re.search(rf"^0/0 +\| ok .*\| ~{re.escape(seconds(c['time']['seconds']))} ", t, re.M)
    assert "not logged" not in t
    assert f"{run:.2f} s (spans)" in page(EXPORT_AOTI) and "not logged" not in page(EXPORT_AOTI)
    figures = tables(markdown(EXPORT_AOTI))[0]
    assert figures[0][-1] == f"{run:.2f} s (spans)"


def test_the_phase_table_is_the_spans_added_up() -> None:
    """The run's phases: count, inclusive and own time of each span name, as the log's begin
    and end events give them (a span inside one of its name counted once inclusive)."""
    raw = raw_spans(AUTOTUNE)
    begun = [
        orjson.loads(r.payload)["name"]
        for r in Reader(AUTOTUNE)
        if r.kind == "chromium_event" and r.payload and b'"ph": "B"' in r.payload
    ]
    spans = {s["name"]: s for s in doc(AUTOTUNE)["stats"]["time"]["spans"]}
    for name in ("compile_file", "GraphLowering.run", "inductor_compile"):
        incl = sum(v for (_, n), v in raw.items() if n == name) / 1e6
        assert spans[name]["inclusive_s"] == pytest.approx(incl, abs=1e-5)
        assert spans[name]["count"] == begun.count(name)
    total = doc(AUTOTUNE)["stats"]["time"]["spans_s"]
    assert sum(s["exclusive_s"] for s in spans.values()) == pytest.approx(total, abs=1e-4)
    # the text table's rows: most own time first, as the JSON has them
    t = text(AUTOTUNE)
    rows = t[t.index("Compile time by phase") :].splitlines()[3:11]
    top = sorted(spans.values(), key=lambda s: (-s["exclusive_s"], s["name"]))[:8]
    assert [r.split("|")[-1].strip() for r in rows] == [s["name"] for s in top]
    first = [x.strip() for x in rows[0].split("|")]
    assert first == [
        seconds(top[0]["exclusive_s"]),
        f"{100 * top[0]['exclusive_s'] / total:.0f}%",
        seconds(top[0]["inclusive_s"]),
        str(top[0]["count"]),
        top[0]["name"],
    ]
    # the page's table and Markdown's, the same rows
    assert f"{first[0]} {first[1]} {first[2]} {first[3]} {first[4]}" in page(AUTOTUNE)
    md = [t for t in tables(markdown(AUTOTUNE)) if len(t[0]) == 5 and t[0][1].endswith("%")]
    assert md[0][0] == first


def test_metric_times_are_the_logged_fields() -> None:
    (logged,) = [
        m for m in raw_metrics(AUTOTUNE, "compilation_metrics") if m["compile_id"] == "0/0"
    ]
    got = {m["field"]: m["seconds"] for m in compile_of(AUTOTUNE, "0/0")["time"]["metrics"]}
    assert got["compile_time_autotune_time_us"] == logged["compile_time_autotune_time_us"] / 1e6
    line = f"autotune {seconds(logged['compile_time_autotune_time_us'] / 1e6)}"
    assert line in text(AUTOTUNE, "--compile-id", "0/0")


def test_cuda_graph_skips_in_the_headline_and_per_compile() -> None:
    (logged,) = [
        m["cudagraph_skip_reason"]
        for m in raw_metrics(AUTOTUNE, "compilation_metrics")
        if m.get("cudagraph_skip_reason")
    ]
    assert "skipping cudagraphs due to cpu device (arg0_1). Found from" in logged
    stats = doc(AUTOTUNE)["stats"]["cudagraphs"]
    assert stats == {
        "used": 0,
        "skipped": 1,
        "asked": 0,
        "skipped_by_reason": {"cpu device (arg0_1)": 1},
    }
    assert "| 1 CUDA graph skip (cpu device (arg0_1) x1) |" in text(AUTOTUNE)
    said = compile_of(AUTOTUNE, "1/0")["cudagraphs"]["said"]
    assert said == "CUDA graphs skipped: cpu device (arg0_1) (at autotune.py:15)"
    assert f"  {said}" in text(AUTOTUNE).splitlines()
    assert "1 CUDA graph skip" in page(AUTOTUNE) and said in page(AUTOTUNE)
    md = markdown(AUTOTUNE)
    assert "CUDA graph skips (1 compile)" in headings(md)
    assert ["1", "cpu device (arg0_1)"] in [r for t in tables(md) for r in t]
    assert_inert(md)


def test_run_time_work_per_compile() -> None:
    path = FIXTURES / "custom_backend.log"
    fwd = raw_metrics(path, "compilation_metrics_runtime")[0]
    bwd = raw_metrics(path, "bwd_compilation_metrics_runtime")[0]
    words = [w["said"] for w in compile_of(path, "0/0")["runtime"]]
    assert words == [
        f"forward at run time: autotune {fwd['runtime_triton_autotune_time_us'] / 1e6:.3f} s",
        f"backward at run time: autotune {bwd['runtime_triton_autotune_time_us'] / 1e6:.3f} s",
    ]
    lines = text(path).splitlines()
    assert all(f"  {w}" in lines for w in words)
    assert all(w in page(path) for w in words)


def test_a_guard_origin_is_the_logged_stacks_user_frame_in_every_format() -> None:
    (reason,) = [
        r.text()
        for r in Reader(ITEM)
        if r.kind == "artifact" and r.body["name"] == "recompile_reasons" and r.payload
    ]
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', reason)
    file, line, name = frames[-1]
    (o,) = [o for o in compile_of(ITEM, "1/1")["origins"] if o["kind"] == "scalar"]
    assert (o["where"]["file"], o["where"]["line"], o["where"]["name"]) == (file, int(line), name)
    said = o["said"]
    assert said.endswith(f"(used at item_float.py:{line})")
    # the Recompiles table: the guard in one line, and where it was made (7-9 rows before)
    t = text(ITEM)
    table = t[t.index("Recompiles") : t.index("0/0_1  scale")]
    row, *rest = table.splitlines()[3:]
    assert [c.strip() for c in row.split("|")][:4] == [
        "1/1", "torch_dynamo_resume_in_scale_at_6", "___stack0 == 0.2387000024318695", said
    ]  # fmt: skip
    assert all(not x.strip() for ln in rest for x in ln.split("|")[:4])  # "what changed" wraps
    assert f"  specialised scalar: {said}" in text(ITEM, "--compile-id", "1/1").splitlines()
    assert said in page(ITEM)
    (md_row,) = tables(markdown(ITEM))[2]
    assert md_row[2:] == ["___stack0 == 0.2387000024318695", said]


def test_profile_guided_dims_say_so() -> None:
    path = FIXTURES / "pgo.log"
    got = [o for o in compile_of(path, "0/0")["origins"] if o["kind"] == "symbol"]
    assert {o["dynamic_by"] for o in got} == {"profile-guided"}
    for o in got:
        assert f"  dynamic size: {o['said']}" in text(path).splitlines()
        assert o["said"] in page(path)


def test_why_an_artifact_is_missing_in_one_line() -> None:
    (m,) = compile_of(PRECOMPILE, "0/0")["missing"]
    assert m["artifact"] == "metrics" and m["why"].startswith("traced inside fullgraph_capture")
    line = f"  missing: no metrics: {m['why']}"
    assert line in text(PRECOMPILE).splitlines()
    assert f"Missing: no metrics: {m['why']}" in page(PRECOMPILE)


def test_failure_artifacts_beside_the_failure() -> None:
    path = FIXTURES / "fx_error.log"
    c = compile_of(path, "0/0")
    (t,) = c["troubles"]
    assert t["kind"] == "fx_interpreter_error" and t["fatal"]
    assert (
        c["failure"].startswith("BackendCompilerFailed: ")
        and "FX interpreter error" in c["failure"]
    )
    line = f"  FX interpreter error (log line {t['line']}): {t['text']}"
    assert line in text(path).splitlines()
    assert " ".join(f"FX interpreter error (log line {t['line']}): {t['text']}".split()) in page(
        path
    )


def test_records_without_a_compile_id_by_owner() -> None:
    path = FIXTURES / "custom_backend.log"
    owners = doc(path)["logs"][0]["owners"]
    plans = {a["name"] for a in owners["attached"] if a["name"].startswith("plan_")}
    assert plans == {"plan_forward_kernels", "plan_forward_tuned", "plan_backward_kernels",
                     "plan_backward_tuned"}  # fmt: skip
    t = text(path)
    assert "Records without a compile id" in t
    assert (
        "  of -/-, names tlview does not read: plan_forward_kernels x1, plan_forward_tuned x1" in t
    )
    assert "Names tlview does not read: plan_forward_kernels ×1" in page(path)
    aoti = text(FIXTURES / "aoti.log")
    assert re.search(r"\n1 +\| codecache\.py:\d+ in compile +\| inductor_aot_wrapper_code x1", aoti)
    # a log whose only such record is torch's version, made its compile's: no section
    assert "Records without a compile id" not in text(ITEM)
    assert doc(ITEM)["logs"][0]["owners"]["attached"][0]["name"] == "torch_version"


def test_records_without_an_id_show_only_when_some_are_unowned_or_unknown() -> None:
    """A healthy log's records without a compile id (torch's version, vLLM's compile event) are
    in JSON but in no section of text or page; records no compile owns (inductor's AOT code, by
    torch) or names tlview does not read (a user's own) still make one, in both."""
    tp = FIXTURES / "vllm_tp"
    for healthy in (tp, FIXTURES / "torch215.log"):
        assert "Records without a compile id" not in text(healthy)
        assert "by what wrote them" not in text(healthy)
        assert "Records without a compile id" not in page(healthy)
    logs = doc(tp)["logs"]
    assert [{n for g in log["owners"]["groups"] for n in g["names"]} for log in logs] == [
        {"torch_version", "vllm_compile_event"}
    ] * 2
    assert [log["owners"]["unknown"] for log in logs] == [{}, {}]
    # -v lists every log's, healthy or not
    assert "records of rank1:-/- by what wrote them" in text(tp, "-v")

    aoti = FIXTURES / "aoti.log"
    (log,) = doc(aoti)["logs"]
    assert log["owners"]["unknown"] == {}
    assert any("inductor_aot_wrapper_code" in g["names"] for g in log["owners"]["groups"])
    assert "records of -/- by what wrote them" in text(aoti)
    assert "Records without a compile id" in page(aoti)

    user = FIXTURES / "payloads.log"
    (log,) = doc(user)["logs"]
    assert log["owners"]["unknown"] == {"tabs_inside": 1, "odd_breaks": 1}
    t = text(user)
    assert "  of -/-, names tlview does not read: odd_breaks x1, tabs_inside x1" in t
    assert re.search(r"\n1 +\| \(no stack logged\) +\| torch_version x1 +\|", t)  # all its rows
    assert "Names tlview does not read: odd_breaks ×1, tabs_inside ×1" in page(user)


def test_a_compile_shown_in_full_nests_its_phases() -> None:
    c = compile_of(ITEM, "1/1")
    root = c["time"]["tree"][0]
    lines = text(ITEM, "--compile-id", "1/1").splitlines()
    at = lines.index("  phases nested (inclusive, own, count):")
    top = f"    {seconds(root['inclusive_s'])} incl, {seconds(root['exclusive_s'])} own, x1: dynamo"
    assert lines[at + 1] == top
    kid = root["children"][0]
    assert lines[at + 2].startswith(f"      {seconds(kid['inclusive_s'])} incl")
    assert "The phases nested, added up over the compiles" in page(ITEM)


def test_a_cuda_log_shows_its_phases_and_run_time_autotuning() -> None:
    path = corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt")
    (logged,) = raw_metrics(path, "compilation_metrics_runtime")
    tuned = logged["runtime_triton_autotune_time_us"] / 1e6
    said = f"forward at run time: autotune {tuned:.3f} s"
    assert f"  {said}" in text(path).splitlines() and said in page(path)
    raw = raw_spans(path)
    spans = {s["name"]: s for s in compile_of(path, "0/0")["time"]["spans"]}
    incl = raw[("0/0", "backend_compile")] / 1e6
    assert spans["backend_compile"]["inclusive_s"] == pytest.approx(incl, abs=1e-5)
    md = markdown(path)
    total = doc(path)["stats"]["time"]["spans_s"]
    assert f"Compile time by phase ({seconds(total)} in spans)" in headings(md)
    assert "fx_remote_miss 1" in text(path)  # the cache lookups its metrics count


# -- one answer in every format --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "key"),
    [(ITEM, "1/1"), (AUTOTUNE, "1/0"), (FIXTURES / "custom_backend.log", "0/0"),
     (PRECOMPILE, "0/0"), (EXPORT_AOTI, "0/0"), (FIXTURES / "pgo.log", "0/0")],
)  # fmt: skip
def test_every_format_says_the_same_for_a_compile(path: Path, key: str) -> None:
    """The words of the one analysis: the JSON's, and the text's and the page's lines."""
    from tlview.analyze.facts import phases_line

    (a,) = [a for a in analysed(tlview.read(path)) if a.compile.key == key]
    c = compile_of(path, key)
    said = [w["said"] for w in c["runtime"]] + [o["said"] for o in c["origins"]]
    assert said == [w.words for w in a.runtime] + [o.said for o in a.origins]
    missing = "; ".join(f"no {m['artifact']}: {m['why']}" for m in c["missing"])
    assert missing == (a.missing_line or "")
    if c["cudagraphs"]["state"] != "not asked":
        said.append(c["cudagraphs"]["said"])
    line = phases_line(a.phases)
    assert line is not None and line.startswith(f"{seconds(c['time']['spans_s'])} in spans")
    said += [x for x in (missing, line) if x]
    shown = text(path, "--compile-id", key)
    on_page = page(path)
    for x in said:
        assert x in shown, x
        assert x in on_page, x


# -- a report in two processes is the report of one -------------------------------------------------


@pytest.mark.parametrize(
    "name", ["custom_backend.log", "precompile.log", "item_float.log", "pgo.log", "aoti.log"]
)
@pytest.mark.parametrize("fmt", ["json", "html"])
def test_two_processes_write_what_one_writes(
    name: str, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked part builds the same log context (owners, origins, captures) as one process:
    the split falls between `-/-` and the compiles that read it."""
    import tlview.render.json.report as json_mod
    from tlview.index import compiles
    from tlview.load import read
    from tlview.render.html import budget as kept
    from tlview.render.html import report as html_mod
    from tlview.runtime import halves
    from tlview.write import forking

    monkeypatch.setattr(compiles, "IN_MEMORY", 1)  # on disk: read back by each process
    rep = read(FIXTURES / name, kept.page_keep(False) if fmt == "html" else None)

    def write(r: Report) -> bytes:
        out = io.BytesIO()
        if fmt == "html":
            html_mod.stream(r, out, split=forking(r))
        else:
            json_mod.stream(r, out, split=forking(r))
        return out.getvalue()

    monkeypatch.setattr(halves, "MIN_COST", 1 << 62)
    one = write(rep)
    forks: list[int] = []
    start = halves.Later.__init__

    def counted(self: halves.Later, job: Any) -> None:
        start(self, job)
        forks.append(1)

    monkeypatch.setattr(halves.Later, "__init__", counted)
    monkeypatch.setattr(halves, "MIN_COST", 0)
    fresh = read(FIXTURES / name, kept.page_keep(False) if fmt == "html" else None)
    assert write(fresh) == one
    assert forks


# -- text from a crafted log stays inert -----------------------------------------------------------

EVIL = "\x1b]0;T\x07<b>x</b>[l](http://e.x) @octocat ::error::pwn ##[add-mask]s"
EVIL_FILE = "/tmp/<img src=x>::error::@me ##[set-output name=x;]v.py"


def _span(name: str, ph: str, ts: float, cid: tuple[int, int] | None = (0, 0)) -> bytes:
    from crafted import record

    body = {"name": name, "ts": ts, "args": {"compile_id": "0/0"}, "ph": ph,
            "cat": "dynamo_timed", "tid": 0, "pid": 0}  # fmt: skip
    return record("chromium_event", {}, cid, payload=orjson.dumps(body).decode())


def _hostile(tmp: Path) -> Path:
    from crafted import interned, metrics, record, start

    reason = (
        f"0/0: L['n'] == 2  # y = n  # x.py:7 in f\nUser stack trace:\n"
        f'  File "{EVIL_FILE}", line 7, in f\n    y = n\n'
    )
    skip = f'skipping cudagraphs due to {EVIL}\n::error::two. Found from : \n File "{EVIL_FILE}", line 9'
    stack = [{"line": 1, "name": "w", "filename": 1}]
    parts = [
        interned("/m.py"),
        interned(EVIL_FILE, 1),
        record("artifact", {"name": EVIL, "encoding": "string"}, None, payload="x", stack=stack),
        start((0, 0)),
        _span("dynamo", "B", 0.0),
        _span(EVIL + "\n::error::line", "B", 10.0),
        _span(EVIL + "\n::error::line", "E", 50.0),
        _span("dynamo", "E", 100.0),
        metrics((0, 0), cudagraph_skip_reason=skip),
        start((0, 1)),
        record("artifact", {"name": "recompile_reasons", "encoding": "json"}, (0, 1),
               payload=orjson.dumps([reason]).decode()),
        metrics((0, 1)),
    ]  # fmt: skip
    log = tmp / "hostile.log"
    log.write_bytes(b"".join(parts))
    return log


OBEYED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_crafted_span_names_reasons_and_file_names_stay_inert(tmp_path: Path) -> None:
    log = _hostile(tmp_path)
    for args in ((), ("-v",), ("--compile-id", "0/1")):
        out = wide("report", log, *args).stdout
        assert not OBEYED.search(out.replace("\n", "").replace("\t", ""))
        for line in out.splitlines():  # nothing this report adds starts a workflow command
            assert not line.lstrip().startswith(("::", "##[")), line
        assert clean(EVIL) in out  # through the one rule, on one line
    t = wide("report", log, "-v").stdout
    # the span, its line feed shown, and the `::` after it broken as every `::` is
    assert f"| {clean(EVIL)}\\n:\u200b:error::line" in t
    assert f"CUDA graph skip ({clean(EVIL)} x1)" in t
    raw = run_cli("report", log, "--format", "html").stdout
    for bad in ("<b>x</b>", "<img src=x>"):
        assert bad not in raw
    assert "&lt;b&gt;x&lt;/b&gt;" in raw and "&lt;img src=x&gt;" in raw
    md = run_cli("report", log, "--format", "markdown").stdout
    assert_inert(md)
    assert "::" not in md and "##[" not in md  # each character escaped
    for line in md.splitlines():
        assert not line.lstrip().startswith(("::", "##[")), line


# -- bounded like the rest --------------------------------------------------------------------------


def test_skip_reasons_and_origins_are_bounded_in_each_format(tmp_path: Path) -> None:
    from crafted import compile_of as crafted_compile
    from crafted import interned
    from test_facts_growth import _compile, _guards

    log = tmp_path / "many.log"
    log.write_bytes(b"".join([interned("/u.py"), *(b for k in range(25) for b in _compile(k))]))
    cg = orjson.loads(run_cli("report", log, "--format", "json").stdout_bytes)["stats"][
        "cudagraphs"
    ]
    assert cg["skipped"] == 25 and len(cg["skipped_by_reason"]) == 21  # 20, then the rest
    assert cg["skipped_by_reason"]["(other reasons)"] == 5
    head = wide("report", log).stdout.splitlines()[2]
    assert "25 CUDA graph skips (reason 0 x1, reason 1 x1, reason 10 x1, 18 more reasons)" in head
    skips = [t for t in tables(markdown(log)) if t and t[0][1].startswith("reason ")]
    assert len(skips[0]) == 10  # MAX_ROWS, then "… and 11 more reasons"
    assert "… and 11 more reasons" in markdown(log)

    guards = tmp_path / "guards.log"  # a recompile of 12 failed guards, with an input
    whys = _guards(12)[3]  # its recompile_reasons record
    again = crafted_compile((0, 1), [("L['x0']", [6], "torch.float32")])
    at = again.index(b"\n") + 1  # after its dynamo_start
    first = crafted_compile((0, 0), [("L['x0']", [4], "torch.float32")])
    guards.write_bytes(interned("/u.py") + first + again[:at] + whys + again[at:])
    lines = wide("report", guards).stdout.splitlines()
    said = [ln for ln in lines if ln.startswith("  failed guard: ")]
    assert len(said) == 8 and "  ... 4 more origins (--compile-id ID lists them all)" in lines
    full = wide("report", guards, "--compile-id", "0/1").stdout.splitlines()
    assert len([ln for ln in full if ln.startswith("  failed guard: ")]) == 12
    assert page(guards).count("failed guard:") == 12  # 50 on the page
