"""The import paths of the last release warn (DeprecationWarning) and still work, with the
signatures of the API that replaces them (docs/api.md, "Deprecated import paths")."""

from __future__ import annotations

import warnings

import pytest
from helpers import FIXTURES

import tlview
import tlview.load
import tlview.rebuild

DEMO = FIXTURES / "demo.log"


def test_load_warns_and_reads_as_tlview_read() -> None:
    with pytest.warns(DeprecationWarning, match=r"tlview\.load\.load is deprecated.*tlview\.read"):
        old = tlview.load.load(DEMO)
    new = tlview.read(DEMO)
    assert [c.key for c in old.attempts] == [c.key for c in new.attempts]
    assert len(list(new.attempts)) == 8


def test_find_compile_and_forget_plans_warn() -> None:
    rep = tlview.read(DEMO)
    with pytest.warns(DeprecationWarning, match=r"tlview\.rebuild\.find_compile"):
        assert tlview.rebuild.find_compile(rep, "2/0").key == "2/0"
    with pytest.warns(DeprecationWarning, match=r"tlview\.rebuild\.forget_plans"):
        tlview.rebuild.forget_plans()


def test_the_api_itself_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert len(list(tlview.read(DEMO).attempts)) == 8


@pytest.mark.slow  # imports torch
def test_old_rebuilds_warn_and_take_the_api_signature() -> None:
    pytest.importorskip("torch")
    rep = tlview.read(DEMO)
    new = tlview.real_inputs(rep, "2/0", mode="zeros")
    with pytest.warns(
        DeprecationWarning, match=r"tlview\.rebuild\.real_inputs.*tlview\.real_inputs"
    ):
        by_id = tlview.rebuild.real_inputs(rep, "2/0", mode="zeros")  # the API's signature
    c = {c.key: c for c in rep.attempts}["2/0"]
    with pytest.warns(DeprecationWarning):
        by_compile = tlview.rebuild.real_inputs(c, mode="zeros")  # and the old one
    for got in (by_id, by_compile):
        assert {k: tuple(t.shape) for k, t in got.tensors.items()} == {
            k: tuple(t.shape) for k, t in new.tensors.items()
        }
    with pytest.warns(DeprecationWarning, match=r"tlview\.rebuild\.fake_inputs"):
        fakes = tlview.rebuild.fake_inputs(str(DEMO), "2/0")
    assert sorted(fakes) == sorted(tlview.fake_inputs(rep, "2/0")) == sorted(new.tensors)
