"""Launches in one folder (issue 49): logs of different programs, or of one program run again
long after, added to a reused TORCH_TRACE folder are refused with a hint, not added up; the
ranks of one job still read as one. Fixtures: tests/fixtures/launches (train_step.py, then
infer.py) and relaunch (infer.py twice, 65 s apart), by make_fixtures.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FIXTURES, corpus, run_cli

import tlview
from tlview.analyze.launches import GAP_S, launches, seconds_of
from tlview.errors import EXIT_USAGE, TlviewError

TWO = FIXTURES / "launches"
AGAIN = FIXTURES / "relaunch"


def _functions(data: dict[str, object]) -> set[str]:
    compiles = data["compiles"]
    assert isinstance(compiles, list)
    return {c["function"] for c in compiles if c.get("function")}


def test_two_programs_in_one_folder_are_refused_in_one_line_naming_both() -> None:
    res = run_cli("report", TWO)
    assert res.exit_code == EXIT_USAGE and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert "2 launches in one folder, not one job (another program)" in line
    assert "1: train_step.py at " in line and "2: infer.py at " in line
    assert "(1 log)" in line and "--launch N" in line and "--latest" in line


def test_launch_n_reads_that_launch_alone() -> None:
    first = json.loads(run_cli("report", TWO, "--launch", "1", "--format", "json").stdout)
    second = json.loads(run_cli("report", TWO, "--launch", "2", "--format", "json").stdout)
    assert len(first["logs"]) == len(second["logs"]) == 1
    assert _functions(first) >= {"step"} and "infer" not in _functions(first)
    assert _functions(second) == {"infer"}
    assert any(n.startswith("launch 2 of 2 in this folder: infer.py at ") for n in second["notes"])
    text = run_cli("report", TWO, "--launch", "2").stdout
    assert "note: launch 2 of 2 in this folder: infer.py" in text
    res = run_cli("report", TWO, "--launch", "3")
    assert res.exit_code == EXIT_USAGE and "no launch 3: the folder holds 2" in res.stderr
    res = run_cli("report", FIXTURES / "demo.log", "--launch", "2")
    assert res.exit_code == EXIT_USAGE and "a file is one launch" in res.stderr


def test_every_command_that_reads_a_folder_takes_launch() -> None:
    rep = tlview.read(TWO, launch=2)
    assert [c.function for c in rep.attempts if c.function] == ["infer", "infer"]
    with pytest.raises(TlviewError) as e:
        tlview.read(TWO)
    assert e.value.exit_code == EXIT_USAGE
    listed = run_cli("show", TWO, "--launch", "2", "--compile-id", "0/0")
    assert listed.exit_code == 0 and "dynamo_output_graph" in listed.stdout
    assert run_cli("show", TWO, "--compile-id", "0/0").exit_code == EXIT_USAGE
    latest = run_cli("report", TWO, "--latest", "-q")
    assert latest.exit_code == 0 and "tlview: reading the newest log" in latest.stderr


def test_one_program_run_again_long_after_is_another_launch() -> None:
    res = run_cli("report", AGAIN)
    assert res.exit_code == EXIT_USAGE
    assert "2 launches in one folder" in res.stderr and "after the one before ended" in res.stderr
    assert "1: infer.py at " in res.stderr and "2: infer.py at " in res.stderr
    rep = tlview.read(AGAIN, launch=1)
    assert len(rep.logs) == 1
    found = launches(tlview.read(AGAIN, launch=2).logs)
    assert len(found) == 1


@pytest.mark.parametrize(
    "folder",
    [
        corpus("multirank_gloo"),
        corpus("tlparse-tests", "multi_rank_logs"),  # four ranks from months and programs apart
        FIXTURES / "ranks",
        FIXTURES / "ranks_restart",
        FIXTURES / "collectives",
        FIXTURES / "dtensor",
    ],
    ids=lambda p: p.name,
)
def test_the_ranks_of_one_job_are_one_launch(folder: Path) -> None:
    rep = tlview.read(folder)
    assert len(rep.logs) == len(list(folder.glob("*.log"))) and len(rep.ranks) == len(rep.logs)
    assert not any(n.startswith("launch ") for n in rep.notes)


def test_processes_of_one_program_started_one_after_another_are_one_launch() -> None:
    """The corpus's compile_error: one program run twice by its driver (suppress_errors on,
    then off), the second started 5 s after the first ended, no rank. One launch, as a driver
    that runs its processes in turn writes them; two programs, or the same program GAP_S and
    more apart, would be two."""
    folder = corpus("compile_error")
    rep = tlview.read(folder)
    assert len(rep.logs) == 2 and len(launches(rep.logs)) == 1
    starts = sorted(seconds_of(lg.first_time) or 0.0 for lg in rep.logs)
    ends = sorted(seconds_of(lg.last_time) or 0.0 for lg in rep.logs)
    assert 0 < starts[1] - ends[0] < GAP_S


def test_glog_times_read_as_seconds() -> None:
    assert seconds_of("1129 18:01:31.574000") == pytest.approx(
        ((11 * 31 + 29) * 24 + 18) * 3600 + 60 + 31.574
    )
    assert seconds_of("junk") is None and seconds_of(None) is None
