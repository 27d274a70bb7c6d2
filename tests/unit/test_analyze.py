"""analyze/: the names every command takes, the figures over a run, the --fail-on gate."""

from __future__ import annotations

import pytest
from helpers import FIXTURES

from tlview.analyze.gate import check_report, parse_checks
from tlview.analyze.names import Refs, check_named, find_compile, is_named, picker
from tlview.analyze.summary import overview
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.load import read as load


def test_one_log_names_compiles_by_their_ids() -> None:
    rep = load(FIXTURES / "demo.log")
    refs = Refs.of(rep)
    assert [refs(c) for c in rep.attempts][:3] == ["-/-", "0/0", "0/0_1"]
    assert find_compile(rep, "0/1_1").key == "0/1_1"
    pick = picker("1/0")
    assert pick is not None and [c.key for c in rep.attempts if pick(c)] == ["1/0"]


def test_a_job_names_compiles_by_rank() -> None:
    rep = load(FIXTURES / "ranks")
    refs = Refs.of(rep)
    assert {refs(c).split(":")[0] for c in rep.attempts if c.id is not None} == {"rank0", "rank1"}
    c = next(c for c in rep.attempts if c.rank == 1 and c.key == "0/0")
    assert is_named(c, "rank1:0/0") and is_named(c, f"{c.log}:0/0")


def test_an_unknown_id_is_a_usage_error_that_lists_the_ids() -> None:
    rep = load(FIXTURES / "demo.log")
    with pytest.raises(TlviewError) as e:
        check_named(rep, "9/9")
    assert e.value.exit_code == EXIT_USAGE
    assert "no compile '9/9'; the log has: -/-, 0/0, 0/0_1" in e.value.message


def test_figures_and_gate_over_the_demo() -> None:
    o = overview(load(FIXTURES / "demo.log"))
    assert (o.compiles, o.graph_breaks, o.recompiles, o.restarts, o.failures) == (5, 2, 2, 2, 0)
    failed = check_report(o, parse_checks(("graph-breaks:1,recompiles:2",), against_base=False))
    assert failed == ["graph-breaks: 2 (limit 1)"]
