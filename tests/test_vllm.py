"""vLLM's compiles (analyze/vllm.py) on logs of tests/fixtures/vllm_standin.py, which stands in
for vLLM: compile calls by prefix, their configs, split graphs and pieces by range and size,
both ways vLLM logs pieces (no compile id, or the frame's), cache hits, ranks side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted import record
from helpers import FIXTURES, report_json, run_cli

import tlview
from tlview.analyze.vllm import by_rank, seconds_between, split_list, vllm_calls
from tlview.analyze.vllm_records import is_vllm
from tlview.model import LogIndex

VLLM = FIXTURES / "vllm.log"
TP = FIXTURES / "vllm_tp"


def _log(path: Path) -> LogIndex:
    return tlview.read(path).logs[0]


def test_each_compile_call_by_its_prefix_with_its_config() -> None:
    calls = vllm_calls(_log(VLLM))
    assert [c.prefix for c in calls] == ["backbone", "eagle_head"]
    assert [c.event for c in calls] == ["fresh_compile", "fresh_compile"]
    assert [c.compile for c in calls] == ["0/0", "1/0"]
    cfg = calls[1].config
    assert cfg is not None
    assert (cfg.model, cfg.mode, cfg.backend, cfg.cudagraph_mode) == (
        "tlview/toy-llm",
        "3",
        "inductor",
        "FULL_AND_PIECEWISE",
    )
    assert cfg.splitting_ops == ["tlv::attention"]
    assert cfg.compile_sizes == ["4"] and cfg.compile_ranges == ["16"]
    assert cfg.enabled_passes == ["eliminate_noops", "enable_fusion"]
    assert cfg.use_inductor_graph_partition is False
    assert cfg.dynamic_shapes_type == "DynamicShapesType.BACKED"
    first = calls[0].config
    assert first is not None and not first.same(cfg) and first.same(first)


def test_the_call_names_its_split_graph_patterns_and_frame_records() -> None:
    call = vllm_calls(_log(VLLM))[0]
    assert call.split_graph == "vllm_piecewise_split_graph"
    assert call.patterns == ["vllm_patterns.FusionPass"]
    assert call.frame == ["dynamo_output_graph", "dynamo_cpp_guards_str"]


def test_pieces_logged_without_a_compile_id_are_grouped_by_order() -> None:
    """vLLM before #35472: pieces compiled at run time, their records under no compile id."""
    call = vllm_calls(_log(VLLM))[0]
    assert call.submods == ["submod_0", "submod_2"]  # submod_1 is the attention between
    groups = call.by_range()
    assert [g.label for g in groups] == ["range [1, 16]"]
    pieces = groups[0].pieces
    assert [(p.submod, p.index, p.total, p.compile) for p in pieces] == [
        ("submod_0", 0, 2, "-/-"),
        ("submod_2", 1, 2, "-/-"),
    ]
    assert [p.graph for p in pieces] == ["vllm_submod_0", "vllm_submod_2"]
    # each piece's own inductor records, not the other's
    first = [n for n, _ in pieces[0].artifacts]
    assert "inductor_output_code" in first and "inductor_output_code#2" not in first
    assert "inductor_output_code#2" in [n for n, _ in pieces[1].artifacts]
    assert all(p.cache == {"fx_graph": "hit", "aotautograd": "hit"} for p in pieces)
    assert all(p.seconds is not None and p.seconds > 0 for p in pieces)


def test_pieces_under_the_frames_id_by_size_then_range() -> None:
    """vLLM since #35472: a compile size first (a cudagraph capture size), then the range."""
    call = vllm_calls(_log(VLLM))[1]
    groups = call.by_range()
    assert [(g.label, g.capture_size) for g in groups] == [
        ("size 4", True),
        ("range [1, 16]", False),
    ]
    size, rng = groups[0].pieces[0], groups[1].pieces[0]
    assert (size.start, size.end, size.single_size, size.compile) == (4, 4, True, "1/0")
    assert size.graph == rng.graph == "vllm_submod_0"  # logged with the first range only
    assert "vllm_submod_0" not in [n for n, _ in rng.artifacts]
    assert "dynamo_cpp_guards_str" not in [n for n, _ in rng.artifacts]  # the frame's own
    assert rng.seconds_from == "log times"


def test_pass_graphs_of_each_piece() -> None:
    call = vllm_calls(tlview.read(TP).logs[0])[0]
    assert [p.pass_graphs for p in call.pieces] == [
        ["vllm_post_grad.0.FusionPass", "vllm_post_grad.1.NoOpEliminationPass"],
        ["vllm_post_grad.0.FusionPass#2", "vllm_post_grad.1.NoOpEliminationPass#2"],
    ]


def test_ranks_side_by_side() -> None:
    rows = by_rank(tlview.read(TP))
    assert [(r.index, r.prefix) for r in rows] == [(0, "backbone")]
    cells = rows[0].cells
    assert [(c.rank, c.pieces, c.compiles, c.hits) for c in cells] == [(0, 2, 2, 0), (1, 2, 2, 0)]
    assert rows[0].differs == []


def test_a_log_without_vllm_has_no_calls() -> None:
    log = _log(FIXTURES / "demo.log")
    assert not is_vllm(log) and vllm_calls(log) == []
    assert is_vllm(_log(VLLM))


def test_lists_and_times_as_vllm_writes_them() -> None:
    assert split_list("8, 4") == ["8", "4"] and split_list("") == [] and split_list(None) == []
    assert seconds_between("0127 17:17:47.308000", "0127 17:17:48.746000") == 1.438
    assert seconds_between("0127 17:17:48", "0127 17:17:47.0") is None  # not a log time
    assert seconds_between("0128 00:00:01.000000", "0127 23:59:59.000000") is None


def _crafted(tmp_path: Path, *records: bytes) -> Path:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"".join(records))
    return log


def test_fields_of_the_wrong_type_are_bad_lines(tmp_path: Path) -> None:
    """Damage vLLM never writes: each a bad line naming the field, the rest still read."""
    log = _crafted(
        tmp_path,
        record(
            "artifact",
            {"name": "vllm_compilation_config", "encoding": "json"},
            payload='{"prefix": "backbone", "compile_sizes": [8]}',
        ),
        record(
            "artifact",
            {"name": "vllm_piecewise_compile_start", "encoding": "json"},
            payload='{"submod_name": "submod_0", "compile_range_start": "1"}',
        ),
        record("artifact", {"name": "vllm_compile_event", "encoding": "json"}, None, payload="[1]"),
    )
    report = tlview.read(log)
    reasons = [b.reason for b in report.logs[0].bad_lines]
    assert reasons == [
        "artifact: vllm_compilation_config: compile_sizes is not a string, number or bool: [8]",
        "artifact: vllm_piecewise_compile_start: compile_range_start is not what vLLM writes: '1'",
        "artifact: vllm_compile_event is not a JSON object: [1]",
    ]
    calls = vllm_calls(report.logs[0])
    assert [c.prefix for c in calls] == ["backbone", None]  # the event opens a call of its own
    piece = calls[0].pieces[0]
    assert (piece.submod, piece.start, piece.label) == ("submod_0", None, "range ?")


def test_a_compile_event_belongs_to_the_config_after_it(tmp_path: Path) -> None:
    """tlparse's rule: the event comes first; an `aot_cache_hit` call is a cache hit."""
    event = {"name": "vllm_compile_event", "encoding": "json"}
    config = {"name": "vllm_compilation_config", "encoding": "json"}
    log = _crafted(
        tmp_path,
        record("artifact", event, None, payload='{"type": "aot_cache_hit"}', stack=[]),
        record("artifact", config, (0, 0), payload='{"prefix": "backbone"}'),
        record("artifact", config, (1, 0), payload='{"prefix": "eagle_head"}'),
    )
    calls = vllm_calls(tlview.read(log).logs[0])
    assert [(c.prefix, c.event, c.cache_hit, c.compile) for c in calls] == [
        ("backbone", "aot_cache_hit", True, "0/0"),
        ("eagle_head", None, False, "1/0"),
    ]


@pytest.mark.slow  # twelve reports
def test_every_report_format_reads_the_new_fixtures() -> None:
    """The renderers take vLLM's, regional inductor's and the passes' logs as any other; the
    JSON gives each vLLM record's fields in its payload's meta."""
    logs = [VLLM, TP, FIXTURES / "regional.log", FIXTURES / "passes.log"]
    for log in logs:
        for fmt in ("text", "html", "markdown"):
            result = run_cli("report", log, "--format", fmt)
            assert result.exit_code == 0, (log, fmt, result.stderr)
    doc = report_json(VLLM)
    metas = [
        a["meta"]
        for c in doc["compiles"]
        for a in c["artifacts"]
        if a["kind"] == "vllm_compilation_config"
    ]
    assert [m["prefix"] for m in metas] == ["backbone", "eagle_head"]
