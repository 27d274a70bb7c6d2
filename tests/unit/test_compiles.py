"""analyze/compiles.py: what each compile means, worked out once for every format."""

from __future__ import annotations

from helpers import FIXTURES, corpus, only_log

from tlview.analyze.compiles import Analysis, analysed, is_library
from tlview.load import read as load
from tlview.model import STATUSES, severity


def _by_ref(path: object) -> dict[str, Analysis]:
    return {a.ref: a for a in analysed(load(path))}  # type: ignore[arg-type]


def test_a_compile_is_its_last_attempt_with_the_breaks_of_those_that_restarted() -> None:
    """demo.log: 0/0 broke at demo.py:15 and restarted; 0/0_1 compiled the partial graph."""
    got = _by_ref(FIXTURES / "demo.log")
    first, final = got["0/0"], got["0/0_1"]
    assert not first.counted and final.counted and final.earlier == [first]
    assert first.status == "restarted" and final.status == "graph_break"
    (b,) = final.breaks
    assert (b.title, b.attempt) == ("Call to `torch._dynamo.graph_break()`", "0/0")
    assert b.where == "/tmp/tmps3otvy77/demo.py:15"
    assert b.explanation == "User-inserted graph break. Message: None"
    assert b.hints == ("Remove the `torch._dynamo.graph_break()` call.",)
    assert final.status_text == "graph_break, 1 restart"
    assert final.reason == "graph break: Call to `torch._dynamo.graph_break()`"
    assert first.reason == "restarted: Call to `torch._dynamo.graph_break()`"
    (r,) = final.restarts
    assert (r.text, r.before) == ("Call to `torch._dynamo.graph_break()`", "0/0")
    assert not got["-/-"].counted  # the records outside any compile are no compile


def test_a_recompile_in_words() -> None:
    rc = _by_ref(FIXTURES / "demo.log")["0/1_1"].recompile
    assert rc is not None and rc.listed and rc.previous == "0/0_1"
    assert rc.guards == ("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6",)
    assert rc.changed() == ["L['x'] size[0]: 4 -> 6", "L['x'] dim 0 became dynamic: 4 -> s77"]
    assert rc.changed(1) == ["L['x'] size[0]: 4 -> 6", "... 1 more"]


def test_a_failure_in_a_few_lines_with_where_the_rest_is() -> None:
    for a in analysed(load(corpus("compile_error"))):
        if a.failure is not None and len(a.failure.reason.splitlines()) > 4:
            assert len(a.failure.lines) <= 4
            assert a.failure.lines[-1].endswith("shows them")
            assert a.failure.first == a.failure.reason.splitlines()[0]
            return
    raise AssertionError("compile_error has a failure of more than four lines")


def test_an_unfinished_compile_says_where_the_process_stopped() -> None:
    (a,) = [a for a in analysed(load(only_log("truncated_log"))) if a.status == "incomplete"]
    assert a.failure is not None and a.failure.first.startswith(
        "no compilation_metrics: the run stopped during this compile"
    )
    assert a.problem == 0 and a.reason.startswith("never finished")


def test_one_severity_for_every_table_diff_and_gate() -> None:
    assert [severity(s) for s in STATUSES] == sorted(severity(s) for s in STATUSES)
    assert severity("failed") < severity("incomplete") < severity("graph_break")
    assert severity("graph_break") < severity("restarted") < severity("empty")
    assert severity("traced") == severity("ok")  # an export's graph is as good as a compile
    assert severity("no such status") > severity("outside")


def test_the_library_rule_is_torchs_own_code() -> None:
    assert is_library("/usr/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py")
    assert not is_library("/usr/lib/python3.11/site-packages/transformers/models/bert.py")
    assert not is_library("/home/u/train.py")
    a = _by_ref(FIXTURES / "demo.log")["0/0_1"]
    user, hidden = a.user_stack()
    assert all(not is_library(f.file) for f in user) and hidden == 0
    assert {f.lib for f in a.stack} == {True, False}  # torch's frames are there, marked


def test_a_part_of_the_report_gets_the_attempts_just_before_it() -> None:
    """A part that starts at a compile (a forked copy's) is given the attempts before it that
    restarted into it, so it analyses that compile as one process does."""
    rep = load(FIXTURES / "demo.log")
    whole = [a for a in analysed(rep)]
    at = next(i for i, a in enumerate(whole) if a.ref == "0/0_1")
    (part,) = [a for a in analysed(rep, at, at + 1)]
    assert part.ref == "0/0_1" and [e.ref for e in part.earlier] == ["0/0"]
    assert part.breaks == whole[at].breaks
