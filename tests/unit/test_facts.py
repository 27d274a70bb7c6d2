"""Unit tests of the per-compile facts of issue 48: each analysis function on small typed inputs
(spans, texts torch writes) with known answers."""

from __future__ import annotations

import pytest

from tlview.analyze.origins import guard_text, number_words
from tlview.analyze.phases import PhaseTally, compile_phases, span_tree, top
from tlview.analyze.runtime import skip_words
from tlview.index.beside import code_state, trouble_text
from tlview.model import Compile, CompileId, Phase


def _spans(*items: tuple[str, float, float]) -> list[Phase]:
    return [Phase(name, start, dur) for name, start, dur in items]


def test_spans_nest_by_time_with_inclusive_and_exclusive_times() -> None:
    tree, names = span_tree(
        _spans(("dynamo", 0, 100), ("backend", 10, 60), ("inductor", 20, 30), ("gc", 90, 5))
    )
    assert [n.name for n in tree] == ["dynamo"]
    dynamo = tree[0]
    assert [(k.name, k.inclusive_s, k.exclusive_s) for k in dynamo.children] == [
        ("backend", 60e-6, 30e-6),
        ("gc", 5e-6, 5e-6),
    ]
    assert dynamo.exclusive_s == pytest.approx(35e-6)
    assert names["inductor"] == [1.0, 30.0, 30.0]


def test_a_span_inside_one_of_its_name_counts_once_inclusive() -> None:
    _, names = span_tree(_spans(("compile_file", 0, 10), ("compile_file", 2, 5)))
    assert names["compile_file"] == [2.0, 10.0, 10.0]  # 5 + 5 exclusive, 10 inclusive


def test_exclusive_times_add_up_to_the_outermost_spans() -> None:
    c = Compile(CompileId(0, 0), "x.log")
    c.phases = _spans(("a", 0, 50), ("b", 5, 10), ("c", 20, 20), ("d", 25, 5), ("e", 60, 7))
    c.phases.append(Phase("never_ended", 70, None))
    cp = compile_phases(c)
    assert cp.spans_s == pytest.approx(57e-6)
    assert sum(s.exclusive_s for s in cp.spans) == pytest.approx(cp.spans_s)
    assert cp.open == ["never_ended"]
    assert [s.name for s in top(cp.spans, 2)] == ["a", "c"]


def test_the_run_tally_adds_trees_by_path_and_merges_like_one_pass() -> None:
    c = Compile(CompileId(0, 0), "x.log", metrics={"gc_time_us": 7, "pre_grad_pass_time_us": 3})
    c.phases = _spans(("dynamo", 0, 10), ("gc", 1, 2))
    one, split, later = PhaseTally(), PhaseTally(), PhaseTally()
    for t in (one, one, split, later):
        t.add(compile_phases(c))
    split.merge(later)
    a, b = one.done(), split.done()
    assert a == b
    assert a.tree[0].count == 2 and a.tree[0].children[0].inclusive_s == pytest.approx(4e-6)
    assert [(m.name, m.seconds) for m in a.metrics] == [
        ("pre_grad_passes", 6e-6),
        ("gc", 14e-6),
    ]


def test_a_float32_value_is_said_as_the_user_wrote_it() -> None:
    assert number_words("0.2387000024318695") == "0.2387"
    assert number_words("0.5") == "0.5"
    assert number_words("2") == "2"
    assert number_words("0.1") == "0.1"
    assert number_words("s77") == "s77"


def test_a_failed_guard_is_taken_apart() -> None:
    g = guard_text(
        "1/0: ___stack0 == 0.2387000024318695      # return x * s  # mp/exp/item.py:6 in f\n"
        "User stack trace:\n"
        '  File "/tmp/exp/item.py", line 6, in f\n'
        "    return x * s"
    )
    assert (g.compile, g.check) == ("1/0", "___stack0 == 0.2387000024318695")
    assert [(f.file, f.line, f.name, f.loc) for f in g.frames] == [
        ("/tmp/exp/item.py", 6, "f", "return x * s")
    ]
    assert g.comment is not None and (g.comment.file, g.comment.line) == ("mp/exp/item.py", 6)


def test_a_cudagraph_skip_reason_is_one_line_and_its_place() -> None:
    said, where = skip_words(
        "skipping cudagraphs due to skipping cudagraphs due to cpu device (arg0_1). Found from : "
        '\n   File "/tmp/x/train.py", line 12, in g\n    return x.sin() + 1\n'
    )
    assert (said, where) == ("cpu device (arg0_1)", "train.py:12")


def test_failure_artifacts_are_said_in_one_line() -> None:
    tb = "Traceback (most recent call last):\n  File x\nValueError: boom\n"
    assert trouble_text("eager_compile_backwards_failure", tb) == "ValueError: boom"
    fx = "bad shapes\n\nWhile executing %mm : [num_users=1] = ...\nGraphModule: ..."
    assert trouble_text("fx_interpreter_error", fx) == (
        "bad shapes (while executing %mm : [num_users=1] = ...)"
    )
    assert trouble_text("inductor_spmd_graph_mismatch", "") == "(no text logged)"


def test_a_code_state_is_read_back_per_code_object() -> None:
    got = code_state(
        "hash(1)/a.py:8:f:\n  L['x']: tensor size=[?] stride=[1]\n  L['n']: scalar 3\n\n"
        "PGO detected ... TORCH_COMPILE_DYNAMIC_SOURCES=\"L['x']\""
    )
    assert got == {
        "hash(1)/a.py:8:f": {"L['x']": "tensor size=[?] stride=[1]", "L['n']": "scalar 3"}
    }


def test_a_phase_check_over_a_baseline_allows_timing_noise() -> None:
    from dataclasses import replace

    from tlview.analyze.gate import evaluate_report, parse_checks
    from tlview.analyze.summary import Overview

    (check,) = parse_checks(["phase:inductor_compile:+0%"], True)
    assert check.phase == "inductor_compile"
    noise = replace(check, base=1.0, new=1.5)  # +0.5 s: under the 1 s noise floor
    slower = replace(check, base=1.0, new=2.5)
    got = evaluate_report(Overview(), [noise, slower])
    assert got[0].failure is None
    assert got[1].failure == "phase:inductor_compile: 1.00 s -> 2.50 s (allowed +0%)"
