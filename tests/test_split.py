"""A log read in two halves by two processes gives exactly the report of one reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import corpus, only_log, run_cli

import tlview.split as split
import tlview.store as store
from tlview.index import read_log


def _json(path: Path) -> dict:
    result = run_cli("report", path, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "log",
    [
        lambda: only_log("mlp_aot_eager"),
        lambda: only_log("views_aliasing"),
        lambda: only_log("dynamic_shapes"),
        lambda: only_log("transformer_inductor"),
        lambda: only_log("truncated_log"),
        lambda: corpus("tlparse-tests", "multi_rank_logs", "dedicated_log_torch_trace_rank_1.log"),
        lambda: corpus("tlparse-tests", "simple_corrupted_json.log"),
    ],
)
def test_two_halves_equal_one_reader(log, monkeypatch: pytest.MonkeyPatch) -> None:
    path = log()
    whole = _json(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    assert split.worth_splitting(path)
    halves = _json(path)
    assert halves == whole


def test_halves_with_spilled_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both halves spill to disk; the second half's spill file changes hands on the way back.
    path = only_log("dtypes_zoo")
    whole = _json(path)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    monkeypatch.setattr(store, "IN_MEMORY", 2)
    assert _json(path) == whole


def test_split_point_is_a_record_line() -> None:
    path = only_log("transformer_inductor")
    data = path.read_bytes()
    at = split.record_start(path, len(data) // 2)
    assert at is not None and data[at - 1 : at] == b"\n" and data[at : at + 1] not in (b"\t", b"\n")
    lines, tables = split.prefix(path, at)
    assert lines == data[:at].count(b"\n")
    (table,) = tables.values()
    names = read_log(path)[0]
    assert table and all(isinstance(k, int) and v.startswith("/") for k, v in table.items())
    assert names.records == 348


def test_second_reader_starts_later_in_a_log_of_payloads() -> None:
    # Payload bytes read faster than record lines, so the second reader's scan of the lines
    # before its start weighs more there: it starts further in, and both end together.
    records = only_log("mlp_aot_eager")  # graph breaks and recompiles: mostly record lines
    payloads = only_log("transformer_inductor")  # inductor code: mostly payload
    by_records = split.split_at(records, records.stat().st_size)
    by_payloads = split.split_at(payloads, payloads.stat().st_size)
    assert 0.5 < by_records < by_payloads < 1 / (2 - split.PREFIX_NS / split.PAYLOAD_NS)
