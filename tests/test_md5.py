"""Payload md5s are checked where a payload's bytes are read, and `md5_ok` is null where not
(docs/formats.md): the JSON report measures inductor's graphs without hashing them, the page and
`tlview show` check what they may show, and a damaged payload that is read is a bad line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import only_log, run_cli

import tlview
from tlview.render.html import budget


def _payloads(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for c in doc["compiles"] for k in ("graphs", "guards", "artifacts") for p in c[k]]


def _json(log: Path) -> dict[str, Any]:
    r = run_cli("report", log, "--format", "json")
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_the_json_report_checks_what_it_reads_and_says_what_it_did_not() -> None:
    doc = _json(only_log("transformer_inductor"))
    state = {(p["kind"], p["md5_ok"]) for p in _payloads(doc)}
    # Read by the report, so checked: dynamo's graph (its placeholders), inductor's code (its
    # collectives), JSON artifacts; only measured: the AOT graphs and the guards.
    assert {("dynamo_output_graph", True), ("inductor_output_code", True)} <= state
    assert {("aot_forward_graph", None), ("dynamo_cpp_guards_str", None)} <= state
    assert not {k for k, ok in state if ok is False}
    assert all(p["bytes"] > 0 and p["md5"] for p in _payloads(doc) if p["md5_ok"] is None)


def test_sizes_are_the_same_checked_or_not() -> None:
    log = only_log("transformer_inductor")
    measured = tlview.read(log)
    checked = tlview.read(log, keep=budget.page_keep(full=True))
    a = [
        (p.kind, p.line, p.bytes, p.lines, p.checked)
        for c in measured.attempts
        for p in c.payloads()
    ]
    b = [
        (p.kind, p.line, p.bytes, p.lines, p.checked)
        for c in checked.attempts
        for p in c.payloads()
    ]
    assert [x[:4] for x in a] == [x[:4] for x in b]
    assert not all(x[4] for x in a) and all(x[4] for x in b)


def _damaged(tmp_path: Path, kind: bytes) -> Path:
    """The corpus log with one character of KIND's payload changed (damage torch never writes)."""
    data = only_log("transformer_inductor").read_bytes()
    at = data.index(b'{"' + kind + b'"')
    tab = data.index(b"\n\t", at) + 2
    edited = data[:tab] + (b"#" if data[tab : tab + 1] != b"#" else b"!") + data[tab + 1 :]
    log = tmp_path / "damaged.log"
    log.write_bytes(edited)
    return log


def test_a_damaged_payload_that_is_read_is_a_bad_line(tmp_path: Path) -> None:
    doc = _json(_damaged(tmp_path, b"dynamo_output_graph"))
    assert [b["reason"].split(";")[0] for b in doc["bad_lines"]] == [
        "payload of dynamo_output_graph does not match its md5 (cut short or altered)"
    ]
    assert [p["md5_ok"] for p in _payloads(doc) if p["kind"] == "dynamo_output_graph"] == [False]


def test_a_damaged_payload_only_measured_is_found_by_the_page_and_show(tmp_path: Path) -> None:
    log = _damaged(tmp_path, b"aot_forward_graph")
    doc = _json(log)
    assert doc["bad_lines"] == []
    assert [p["md5_ok"] for p in _payloads(doc) if p["kind"] == "aot_forward_graph"] == [None]
    page = tlview.read(log, keep=budget.page_keep(full=False))
    assert [b.reason.split(";")[0] for b in page.logs[0].bad_lines] == [
        "payload of aot_forward_graph does not match its md5 (cut short or altered)"
    ]
    listed = run_cli("show", log, "--compile-id", "0/0")
    assert listed.exit_code == 0, listed.output
    row = next(ln for ln in listed.stdout.splitlines() if ln.split()[0] == "aot_forward_graph")
    assert row.rstrip().endswith("md5 mismatch: cut short or altered")
