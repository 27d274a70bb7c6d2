"""The benchmarks' floors do the work they stand for: benchmarks/floor_parse.py, which the
round tables of benchmarks/RESULTS.md put beside tlview, reads every record tlview reads and
checks every payload's md5."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import CORPUS, FIXTURES, ROOT, report_json

LOGS = [
    FIXTURES / "demo.log",
    CORPUS / "transformer_inductor" / "dedicated_log_torch_trace_s52t4836.log",
]


def _floor() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "floor_parse", ROOT / "benchmarks" / "floor_parse.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.parent.name + "/" + p.name)
def test_the_parse_floor_reads_every_record_and_md5_tlview_reads(log: Path) -> None:
    doc = report_json(log)
    records, bad = _floor().read(str(log), 0, log.stat().st_size)
    assert records == doc["logs"][0]["records"] > 100
    assert bad == 0 == doc["logs"][0]["bad_lines"]


def test_the_parse_floor_in_two_processes_reads_both_halves() -> None:
    log = LOGS[1]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "floor_parse.py"), str(log), "--processes", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    records = report_json(log)["logs"][0]["records"]
    assert done.stdout == f"{records} records, 0 payloads not matching their md5\n"
