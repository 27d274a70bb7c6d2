"""Records torch writes that tlview once misread: payloads torch leaves out, guards in two
records, the torch version named late, AOTInductor's code and older provenance artifacts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from helpers import FIXTURES, ROOT, corpus, report_json, run_cli

from tlview.analyze.baseline import every_attempt

CACHE_HIT = FIXTURES / "cache_hit.log"
PROVENANCE = "inductor_provenance_tracking_node_mappings"
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"


def by_key(data: dict) -> dict[str, dict]:
    return {c["key"]: c for c in every_attempt(data)}


def test_a_run_that_hits_the_fx_graph_cache_passes_strict() -> None:
    # The second run of an inductor program under one TORCHINDUCTOR_CACHE_DIR: torch logs the
    # provenance artifacts of each cached graph with no payload (provenance tracking is off).
    result = run_cli("report", CACHE_HIT, "--strict")
    assert result.exit_code == 0, result.output
    data = report_json(CACHE_HIT, "--strict")
    assert data["stats"]["bad_lines"] == 0 and data["bad_lines"] == []
    c = by_key(data)["0/0"]
    assert c["status"] == "ok"
    cache = sorted((e["cache"], e["outcome"]) for e in c["cache"])
    assert cache == [("aotautograd", "hit"), ("fx_graph", "hit"), ("fx_graph", "hit")]
    # Each of the two cached graphs (forward, backward) logged both artifacts, empty: kept,
    # listed as they are, with no text and no md5.
    empty = [
        (p["kind"], p["line"], p["bytes"], p["md5"])
        for p in c["graphs"] + c["artifacts"]
        if p["kind"] in (PROVENANCE, STACK_TRACES)
    ]
    assert sorted(empty, key=lambda e: e[1]) == [
        (PROVENANCE, 666, 0, None),
        (STACK_TRACES, 667, 0, None),
        (PROVENANCE, 1010, 0, None),
        (STACK_TRACES, 1011, 0, None),
    ]
    assert c["kernels"] == []


def test_guards_of_both_records_are_kept() -> None:
    # torch 2.4 logs dynamo_guards, then dynamo_cpp_guards_str, for each compile.
    data = report_json(FIXTURES / "torch24.log")
    c = by_key(data)["1/0"]
    assert [(g["kind"], g["line"], g["bytes"]) for g in c["guards"]] == [
        ("dynamo_guards", 56, 4),
        ("dynamo_cpp_guards_str", 60, 2058),
    ]
    tlparse = report_json(corpus("tlparse-tests", "artifacts.log"))
    assert [g["kind"] for g in by_key(tlparse)["0/0"]["guards"]] == [
        "dynamo_guards",
        "dynamo_cpp_guards_str",
    ]


def test_torch_version_from_a_runnable_graph() -> None:
    # torch 2.8 logs no torch_version record: its runnable graph names the version, after its
    # configs.
    assert report_json(FIXTURES / "torch28.log")["torch_version"] == "2.8.0+cu128"


def test_torch_version_named_late_in_a_log_read_once() -> None:
    # A log whose first lines are gone (rotated, or cut by `tail`): its torch_version record
    # with them. The version is in each compile's metrics, 800 lines on; the log comes on
    # standard input, which is read once.
    lines = (FIXTURES / "demo.log").read_text().splitlines(keepends=True)
    start = next(k for k, ln in enumerate(lines) if k > 13 and ln.startswith("V"))
    rest = "".join(lines[start:])
    assert "torch_version" not in rest.split("compilation_metrics")[0]
    got = subprocess.run(
        [sys.executable, "-m", "tlview", "report", "-", "--format", "json", "--strict"],
        input=rest.encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert data["torch_version"] == "2.13.0+cpu"
    assert data["logs"][0]["torch_version"] == "2.13.0+cpu"
    # A log that names no version anywhere says so.
    assert report_json(FIXTURES / "torch26.log")["torch_version"] is None


def test_aot_inductor_code_is_named_by_what_it_is() -> None:
    data = report_json(corpus("tlparse-tests", "inductor_provenance_aot_cuda_log.txt"))
    dumps = [
        (g["kind"], g["line"], g["meta"]["type"])
        for g in by_key(data)["-/-"]["graphs"]
        if g.get("meta", {}).get("type")
    ]
    assert dumps == [
        ("inductor_aot_wrapper_code", 1203, "cpp"),
        ("inductor_aot_kernel_code", 2298, "cpp"),
    ]


def test_kernels_of_older_provenance_are_numbered() -> None:
    # torch 2.8's node mappings name each kernel without a debug handle ("name:N"): the
    # kernels are numbered in the order torch lists them, not all 0.
    data = report_json(corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt"))
    got = [(k["order"], k["kernel"], k["nodes"]) for k in by_key(data)["0/0"]["kernels"]]
    assert got == [
        (1, "triton_poi_fused_addmm_relu_sigmoid_0", ["sigmoid", "relu", "add_tensor_1"]),
        (2, "triton_poi_fused_mul_1", ["mul"]),
        (
            3,
            "triton_poi_fused_addmm_gelu_2",
            ["mul_3", "mul_1", "add_tensor", "add", "erf", "mul_2"],
        ),
        (4, "extern_kernels.mm", ["mm_default_1", "mm_default", "mul"]),
    ]
    # torch 2.13's debug handles are the numbers.
    new = report_json(FIXTURES / "kernels.log")
    forward = [
        (k["order"], k["kernel"]) for k in by_key(new)["0/0"]["kernels"] if k["graph"] == "forward"
    ]
    assert forward == [
        (1, "extern_kernels.addmm"),
        (2, "cpp_fused_mul_relu_threshold_backward_0"),
        (3, "extern_kernels.addmm"),
        (4, "cpp_fused__softmax_1"),
    ]


def test_both_guards_records_are_on_the_page() -> None:
    from test_html import page_payloads, render

    rep, text = render(FIXTURES / "torch24.log")
    shown = page_payloads(text)
    c = next(c for c in rep.attempts if c.key == "1/0")
    sec = text[text.index('<section class="compile" id="c-1/0"') :]
    sec = sec[: sec.index("</section>")]
    assert '<h3>Guards <span class="count">2</span></h3>' in sec
    kinds = re.findall(
        r'<details class="payload" id="(c-1/0-p\d+)">\s*<summary><code class="kind">(dynamo_\w*guards\w*)</code>',
        sec,
    )
    assert [k for _, k in kinds] == ["dynamo_guards", "dynamo_cpp_guards_str"]
    for (anchor, _), g in zip(kinds, c.guards, strict=True):
        assert shown[anchor] == g.text and g.text
