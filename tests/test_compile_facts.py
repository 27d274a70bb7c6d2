"""Where compile time went, run-time work, CUDA graphs, guard origins, missing artifacts and the
owners of records without a compile id (issue 48), asserted against the log's own numbers: each
figure is read again from the raw records here, independently of the index."""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import FIXTURES, corpus, run_cli

import tlview
from tlview.analyze.baseline import read_report
from tlview.analyze.gate import measure, parse_checks
from tlview.analyze.missing import capture_spans, missing_line
from tlview.analyze.origins import guard_text, origin_context, origins
from tlview.analyze.owners import owned_spans, owners
from tlview.analyze.phases import compile_phases, run_phases, span_totals
from tlview.analyze.runtime import cudagraph_counts, cudagraphs, runtime_work
from tlview.analyze.troubles import failure_line, troubles
from tlview.index.core import is_torch_file
from tlview.model import Compile, Report
from tlview.parse import Reader

# Logs whose spans all begin and end under one compile id (no restarts): spans by id match.
SPANNED = [
    FIXTURES / "aoti.log",
    FIXTURES / "autotune.log",
    FIXTURES / "export_aoti.log",
    FIXTURES / "custom_backend.log",
    FIXTURES / "pgo.log",
    corpus("tlparse-tests", "simple.log"),
    corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt"),
    corpus("tlparse-tests", "inductor_provenance_aot_cuda_log.txt"),
]


@cache
def read(path: Path) -> Report:
    return tlview.read(path)


def compiles(path: Path) -> dict[str, Compile]:
    return {c.key: c for c in read(path).attempts}


def raw_spans(path: Path) -> dict[tuple[str, str], float]:
    """Each (compile, span name)'s time in us, from the log's own begin and end events, a span
    inside one of its own name counted once."""
    begun: dict[tuple[str, str], list[float]] = defaultdict(list)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for rec in Reader(path):
        if rec.kind != "chromium_event" or rec.payload is None:
            continue
        ev = orjson.loads(rec.payload)
        cid = rec.compile_id
        named = (ev.get("args") or {}).get("compile_id")  # torch writes "None" for none
        key = str(cid) if cid is not None else named if named not in (None, "None") else "-/-"
        k = (key, ev["name"])
        if ev["ph"] == "B":
            begun[k].append(ev["ts"])
        elif ev["ph"] == "E" and begun[k]:
            t0 = begun[k].pop()
            if not begun[k]:
                out[k] += ev["ts"] - t0
        elif ev["ph"] == "X":
            out[k] += ev.get("dur", 0.0)
    return out


def raw_metrics(path: Path, kind: str) -> list[dict[str, Any]]:
    return [rec.body for rec in Reader(path) if rec.kind == kind]


@pytest.mark.parametrize("path", SPANNED, ids=lambda p: p.name)
def test_phase_sums_equal_the_spans(path: Path) -> None:
    raw = raw_spans(path)
    for key, c in compiles(path).items():
        cp = compile_phases(c)
        # every span's own time adds up to the time the outermost spans cover
        assert sum(s.exclusive_s for s in cp.spans) == pytest.approx(cp.spans_s, abs=1e-6)
        for s in cp.spans:
            assert s.inclusive_s * 1e6 == pytest.approx(raw[(key, s.name)], abs=0.01), s.name


@pytest.mark.parametrize("path", SPANNED[:5], ids=lambda p: p.name)
def test_spans_agree_with_the_metrics_columns_torch_times_them_in(path: Path) -> None:
    pairs = {
        "entire_frame_compile": "dynamo_cumulative_compile_time_us",
        "inductor_compile": "inductor_cumulative_compile_time_us",
        "_recursive_post_grad_passes": "post_grad_pass_time_us",
    }
    checked = 0
    for c in compiles(path).values():
        names = {s.name: s.inclusive_s for s in compile_phases(c).spans}
        for span, column in pairs.items():
            logged = (c.metrics or {}).get(column)
            if span in names and isinstance(logged, int):
                assert names[span] * 1e6 == pytest.approx(logged, abs=1000)  # 1 ms: us rounding
                checked += 1
    assert checked


def test_the_aotinductor_build_logged_under_the_export_is_counted() -> None:
    """A strict export then aoti_compile_and_package: 0/0 logs no compile time, its spans hold
    the build (the issue's "compile time not logged" next to minutes of compiling)."""
    path = FIXTURES / "export_aoti.log"
    c = compiles(path)["0/0"]
    assert c.compile_time_s is None
    cp = compile_phases(c)
    build = next(s for s in cp.spans if s.name == "compile_fx_aot")
    (metrics,) = [m for m in raw_metrics(path, "compilation_metrics") if m.get("compile_id")]
    window = (metrics["end_time_us"] - metrics["start_time_us"]) / 1e6  # the build's metrics
    assert build.inclusive_s == pytest.approx(window, abs=0.05)
    assert cp.spans_s > 100 and cp.spans_s == pytest.approx(
        sum(
            v
            for (k, _), v in raw_spans(path).items()
            if k == "0/0" and _ in ("compile_fx_aot", "compile_attempt_0")
        )
        / 1e6,
        rel=1e-6,
    )


def test_run_totals_are_the_compiles_added_up_and_count_the_outside_work() -> None:
    path = FIXTURES / "aoti.log"
    per = [compile_phases(c) for c in read(path).attempts]
    run = run_phases(read(path).attempts)
    assert run.spans_s == pytest.approx(sum(cp.spans_s for cp in per))
    assert run.outside_s == pytest.approx(next(cp.spans_s for cp in per if cp.outside))
    assert sum(n.inclusive_s for n in run.tree) == pytest.approx(run.spans_s)
    totals = span_totals(read(path).attempts)
    raw = raw_spans(path)
    assert totals["inductor_compile"] * 1e6 == pytest.approx(
        sum(v for (_, name), v in raw.items() if name == "inductor_compile"), abs=0.1
    )


def test_spans_without_an_id_inside_a_compile_are_owned_by_it() -> None:
    path = FIXTURES / "aoti.log"
    (log,) = read(path).logs
    o = owners(log)
    assert [(p.name, k) for p, k in o.spans] == [("compile_file", "0/0")]
    wait = next(p for p in compiles(path)["0/0"].phases if p.name == "async_compile.wait")
    (inner,) = owned_spans(o, "0/0")
    assert wait.start_us <= inner.start_us and inner.start_us + (inner.dur_us or 0) <= (
        wait.start_us + (wait.dur_us or 0)
    )
    cp = compile_phases(compiles(path)["0/0"], owned_spans(o, "0/0"))
    assert any(s.name == "compile_file" and s.count == 2 for s in cp.spans)


def test_extra_metric_times_and_cache_counts_are_the_logged_fields() -> None:
    path = FIXTURES / "autotune.log"
    c = compiles(path)["0/0"]
    (logged,) = [m for m in raw_metrics(path, "compilation_metrics") if m["compile_id"] == "0/0"]
    got = {m.field: m.seconds for m in compile_phases(c).metrics}
    for field in ("compile_time_autotune_time_us", "triton_compile_time_us", "gc_time_us"):
        assert got[field] == logged[field] / 1e6
    assert got["compile_time_autotune_time_us"] > 1  # C++ GEMM benchmarked while compiling


def test_phase_gate_on_report_with_a_stored_baseline(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    assert run_cli("report", FIXTURES / "aoti.log", "--format", "json", "-o", base).exit_code == 0
    slower = run_cli(
        "report", FIXTURES / "export_aoti.log", "-q", "--baseline", base,
        "--fail-on", "phase:inductor_compile:+0%",
    )  # fmt: skip
    b = span_totals(read_report(base).attempts)["inductor_compile"]
    n = span_totals(read(FIXTURES / "export_aoti.log").attempts)["inductor_compile"]
    assert slower.exit_code == 3
    assert f"phase:inductor_compile: {b:.2f} s -> {n:.2f} s (allowed +0%)" in slower.output
    same = run_cli(
        "report", FIXTURES / "aoti.log", "-q", "--baseline", base,
        "--fail-on", "phase:inductor_compile:+0%,compile-time",
    )  # fmt: skip
    assert same.exit_code == 0
    md = run_cli(
        "report", FIXTURES / "export_aoti.log", "--format", "markdown", "--baseline", base,
        "--fail-on", "phase:inductor_compile:+0%",
    )  # fmt: skip
    assert (
        r"phase\:inductor\_compile\:\+0\%: " in md.output and "failed (1 of 1 check)" in md.output
    )


def test_a_stored_report_keeps_each_compiles_spans(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    run_cli("report", FIXTURES / "autotune.log", "--format", "json", "-o", base)
    stored = {c.key: c.phases for c in read_report(base).attempts}
    for key, c in compiles(FIXTURES / "autotune.log").items():
        assert stored[key] == c.phases


def test_phase_gate_in_diff_and_its_words() -> None:
    d = tlview.diff(FIXTURES / "aoti.log", FIXTURES / "export_aoti.log")
    f = d.spans["inductor_compile"]
    assert f.changed and (f.new or 0) > 100 > (f.base or 0)
    got = run_cli(
        "diff", FIXTURES / "aoti.log", FIXTURES / "export_aoti.log",
        "--fail-on", "phase:inductor_compile:+20%,phase:no_such_phase",
    )  # fmt: skip
    assert got.exit_code == 3
    assert "phase:inductor_compile:" in got.output and "phase:no_such_phase" not in got.output


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("phase", "name the phase"),
        ("phase:inductor_compile:3", "give"),
        ("phase:x:+5%", "relative"),
    ],
)
def test_bad_phase_checks_are_usage_errors(spec: str, says: str) -> None:
    from tlview.errors import TlviewError

    if says == "give":  # a bare number is seconds: allowed, like compile-time's
        assert parse_checks([spec], False)[0].limit == 3.0
        return
    with pytest.raises(TlviewError) as e:
        parse_checks([spec], False)
    assert says in e.value.message


def test_measure_fills_phases_and_baseline_figures() -> None:
    checks = parse_checks(["phase:inductor_compile:+10%", "graph-breaks"], True)
    got = measure(checks, read(FIXTURES / "export_aoti.log").attempts, read(FIXTURES / "aoti.log"))
    assert got[0].new == pytest.approx(
        span_totals(read(FIXTURES / "export_aoti.log").attempts)["inductor_compile"]
    )
    assert got[0].base is not None and got[1].base == 0


# -- run time and CUDA graphs -------------------------------------------------------------------


def test_run_time_work_is_read_for_forward_and_backward() -> None:
    path = FIXTURES / "custom_backend.log"
    assert "bwd_compilation_metrics_runtime" not in read(path).logs[0].unknown_kinds
    work = runtime_work(compiles(path)["0/0"])
    fwd = raw_metrics(path, "compilation_metrics_runtime")
    bwd = raw_metrics(path, "bwd_compilation_metrics_runtime")
    assert [w.backward for w in work] == [False, True]
    for w, logged in zip(work, fwd + bwd, strict=True):
        (part,) = w.parts
        assert part.name == "autotune"
        assert part.seconds == logged["runtime_triton_autotune_time_us"] / 1e6
        assert w.words.endswith(f"at run time: autotune {part.seconds:.3f} s")


def test_run_time_autotuning_of_a_cuda_log() -> None:
    path = corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt")
    (w,) = runtime_work(compiles(path)["0/0"])
    assert (w.backward, [(p.name, p.seconds) for p in w.parts]) == (False, [("autotune", 0.238633)])


def test_cudagraphs_skipped_and_why() -> None:
    path = FIXTURES / "autotune.log"
    (logged,) = [
        m["cudagraph_skip_reason"]
        for m in raw_metrics(path, "compilation_metrics")
        if m.get("cudagraph_skip_reason")
    ]
    line = re.search(r'File "[^"]*/([^/"]+)", line (\d+)', logged)
    assert line is not None
    g = cudagraphs(compiles(path)["1/0"])
    assert (g.state, g.reason, g.where) == (
        "skipped",
        "cpu device (arg0_1)",
        f"{line[1]}:{line[2]}",
    )
    assert "\n" not in g.words
    assert cudagraph_counts(read(path).attempts) == {
        "skipped": 1,
        "skipped: cpu device (arg0_1)": 1,
    }


# -- guard origins --------------------------------------------------------------------------------


def _origins(path: Path) -> dict[str, list[Any]]:
    cs = list(read(path).attempts)
    ctx = origin_context(cs)
    return {c.key: origins(c, ctx) for c in cs}


def test_a_float_from_item_specialised_into_a_guard_is_one_line() -> None:
    path = FIXTURES / "item_float.log"
    (text,) = [
        r.text()
        for r in Reader(path)
        if r.kind == "artifact" and r.body["name"] == "recompile_reasons" and r.payload
    ]
    user = [
        m
        for m in re.finditer(r'File "([^"]+)", line (\d+), in (\S+)', text)
        if not is_torch_file(m[1])
    ]
    scalar = next(o for o in _origins(path)["1/1"] if o.kind == "scalar")
    assert scalar.said == (
        "the float from `.item()` at item_float.py:6 was specialised to 0.2387 "
        "(used at item_float.py:7)"
    )
    assert scalar.where is not None
    assert (scalar.where.file, scalar.where.line) == (user[-1][1], int(user[-1][2]))
    assert scalar.compile == "1/0" and "\n" not in scalar.said


def test_symbol_origins_are_the_logged_user_frame_and_say_profile_guided() -> None:
    path = FIXTURES / "pgo.log"
    logged = {
        r.body["source"]: r.body["user_stack"] for r in Reader(path) if r.kind == "create_symbol"
    }
    got = {o.subject: o for o in _origins(path)["0/0"] if o.kind == "symbol"}
    assert {o.dynamic_by for o in got.values()} == {"profile-guided"}
    x, y = got["s77"], got["s17"]
    assert x.said.endswith("profile-guided: an earlier run saw it change (get_local_code_state)")
    assert "an earlier run saw 3, this run 4" in y.said
    frame = logged["L['x'].size()[0]"][-1]
    assert x.where is not None and (x.where.line, x.where.name) == (frame["line"], frame["name"])


def test_failed_guard_origins_and_automatic_dynamic() -> None:
    got = _origins(corpus("dynamic_shapes"))
    first = got["0/1"][0]
    assert first.subject == "2 <= y.size()[0] <= 4"
    assert first.where is not None and first.where.line == 7  # the place its comment names
    size = got["1/1"][0]
    assert size.said == "w was compiled with size[0] = 3 in 1/0; this call had 5"
    rec = _origins(FIXTURES / "recomp.log")
    assert any(o.said.startswith("the int `n` was specialised to 2") for o in rec["1/1"])


def test_compiled_autograd_says_why_it_captured_again() -> None:
    got = _origins(FIXTURES / "compiled_autograd.log")
    (why,) = [o for o in got["!1"] if o.kind == "autograd"]
    assert why.said.startswith("captured again: new autograd node: torch::autograd::AccumulateGrad")
    assert compiles(FIXTURES / "compiled_autograd.log")["!1"].recompile_reasons == [
        why.subject.join(["!1: ", ""])
    ]


def test_guard_text_reads_every_recompile_reason_of_the_corpus() -> None:
    for path in (corpus("dynamic_shapes"), corpus("mlp_aot_eager"), FIXTURES / "recomp.log"):
        for c in read(path).attempts:
            for r in c.recompile_reasons:
                g = guard_text(r)
                assert g.check and "\n" not in g.check and not g.check.startswith(("#", " "))


# -- missing artifacts, failures, owners ---------------------------------------------------------


def _missing(path: Path) -> dict[str, str | None]:
    out = {}
    for log in read(path).logs:
        outside = next((c for c in log.compiles if c.id is None), None)
        out.update({c.key: missing_line(c, capture_spans(outside)) for c in log.compiles})
    return out


def test_why_metrics_are_missing_in_one_line() -> None:
    pre = _missing(FIXTURES / "precompile.log")["0/0"]
    assert pre is not None and pre.startswith("no metrics: traced inside fullgraph_capture")
    assert _missing(FIXTURES / "export_strict.log")["0/0"] == pre
    assert (
        _missing(corpus("truncated_log"))["0/1"]
        == "no metrics: the run stopped during this compile"
    )
    assert _missing(FIXTURES / "demo.log")["0/0"] == (
        "no metrics: restarted: the attempt after it logged the metrics"
    )
    # torch 2.13 logs inductor's graph and code on an FX graph cache hit: nothing to explain
    hit = compiles(FIXTURES / "cache_hit.log")["0/0"]
    assert ("fx_graph", "hit") in [(e.cache, e.outcome) for e in hit.cache]
    assert _missing(FIXTURES / "cache_hit.log")["0/0"] is None
    ca = _missing(FIXTURES / "compiled_autograd.log")
    assert ca["!0"] is not None and ca["!0"].startswith("no metrics: compiled autograd's capture")
    assert ca["!0/0/0"] is None


def test_failure_artifacts_feed_the_failure_text() -> None:
    path = FIXTURES / "fx_error.log"
    (logged,) = [
        r.text()
        for r in Reader(path)
        if r.kind == "artifact" and r.body["name"] == "fx_interpreter_error" and r.compile_id
    ]
    c = compiles(path)["0/0"]
    (t,) = troubles(c)
    assert t.fatal and logged.startswith(t.text.removesuffix("...").split(" (while executing")[0])
    said = failure_line(c)
    assert (
        said is not None
        and said.startswith("BackendCompilerFailed: ")
        and "FX interpreter error" in said
    )
    outside = troubles(compiles(path)["-/-"])
    assert [x.kind for x in outside] == ["fx_interpreter_error"] and not outside[0].fatal


def test_records_without_an_id_go_to_their_compile_or_their_writer() -> None:
    (log,) = read(FIXTURES / "custom_backend.log").logs
    o = owners(log)
    got = {(a.compile, a.name): a.how for a in o.attached}
    assert got[("0/0", "plan_forward_kernels")] == "written while its span alone was open"
    assert ("0/0", "plan_backward_tuned") in got
    # the backend's own names: not torch's, counted apart
    assert {k: v for k, v in o.unknown.items() if k.startswith("plan_")} == {
        "plan_forward_kernels": 1, "plan_forward_tuned": 1,
        "plan_backward_kernels": 1, "plan_backward_tuned": 1,
    }  # fmt: skip
    (pre,) = read(FIXTURES / "precompile.log").logs
    got = {(a.compile, a.name): a.how for a in owners(pre).attached}
    assert got[("0/0", "inductor_output_code")] == "inside the fullgraph_capture that traced it"
    (aoti,) = read(FIXTURES / "aoti.log").logs
    groups = {g.writer: g for g in owners(aoti).groups}
    assert groups["meta_utils.py:514 in describe_tensor"].names == {"describe_tensor": 1}
    assert groups["meta_utils.py:514 in describe_tensor"].user == "aoti.py:13"


@pytest.mark.parametrize("name", ["item_float.log", "pgo.log", "recomp.log"])
def test_origins_built_compile_by_compile_are_the_same(name: str) -> None:
    """The per-compile analysis streams: the context a compile needs comes before it."""
    from tlview.analyze.origins import OriginContext

    whole = _origins(FIXTURES / name)
    ctx = OriginContext()
    for c in read(FIXTURES / name).attempts:
        ctx.add(c)
        assert origins(c, ctx) == whole[c.key]
