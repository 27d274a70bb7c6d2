"""A compile is finished when it closes (index/compiles.py): when many are open, or at the end of
the log. Closed early and opened again by a later record, or closed once at the end, it reads the
same; the log's compiles are then a plain sequence of finished ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus, only_log

import tlview.index.compiles as compiles
import tlview.index.describe as describe
import tlview.index.finish as finish
import tlview.index.recompiles as recompiles
from tlview.index.log import read_log
from tlview.runtime.store import CompileList


def _everything(path: Path) -> list[Any]:
    """Every field of every compile and log a read gives."""
    out: list[Any] = []
    for log in read_log(path):
        out.append((log.lines, log.records, log.bad_lines, log.kinds, log.rank, log.rank_from))
        out.extend(dataclasses.asdict(c) for c in log.compiles)
    return out


def _count(monkeypatch: pytest.MonkeyPatch, cls: Any, name: str) -> list[int]:
    """Count the calls of cls.name."""
    calls: list[int] = []
    orig = getattr(cls, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return orig(*args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.mark.parametrize(
    "log",
    [
        lambda: FIXTURES / "kernels.log",  # a backward's records long after its forward's
        lambda: corpus("tlparse-tests", "multi_rank_logs", "dedicated_log_torch_trace_rank_1.log"),
        lambda: only_log("mlp_aot_eager"),  # restarts: attempts close together
        lambda: only_log("dynamic_shapes"),  # recompiles explained against the compile before
    ],
)
def test_compiles_closed_early_and_opened_again_read_as_closed_once(
    log: Callable[[], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TLVIEW_NO_SPLIT", "1")
    path = log()
    whole = _everything(path)
    monkeypatch.setattr(compiles, "IN_MEMORY", 1)  # every compile closes at the next one's start
    opened = _count(monkeypatch, compiles.Compiles, "reopen")
    closed = _count(monkeypatch, compiles.Compiles, "close")
    assert _everything(path) == whole
    assert len(closed) > 1 and opened  # records came for compiles that had closed


def test_a_rank_named_after_a_compile_closed_is_its_rank_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A compile before the process group was up logged no rank; records after it name rank 0.
    # Closed before that record came, the compile still gets the log's rank, set at the end.
    monkeypatch.setenv("TLVIEW_NO_SPLIT", "1")
    path = FIXTURES / "rank_later.log"
    data = path.read_bytes()
    first = data.index(b'"rank": 0')
    assert b'"dynamo_start"' in data[:first]  # a compile began before any record named a rank
    whole = _everything(path)
    monkeypatch.setattr(compiles, "IN_MEMORY", 1)
    stale: list[dict[Any, Any]] = []
    orig = finish.Finisher.stale

    def spied(self: finish.Finisher) -> dict[Any, Any]:
        stale.append(orig(self))
        return stale[-1]

    monkeypatch.setattr(finish.Finisher, "stale", spied)
    assert _everything(path) == whole
    (log,) = read_log(path)
    assert (log.rank, log.rank_from) == (0, "records")
    assert [c.rank for c in log.compiles] == [0] * len(log.compiles)
    assert any(rank == 0 for got in stale for rank, _ in got.values())


def test_descriptions_dropped_are_counted_once_when_a_compile_opens_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Finishing counts the descriptions an input set dropped among the compile's dropped
    # events; a compile opened again and finished again counts them once.
    monkeypatch.setenv("TLVIEW_NO_SPLIT", "1")
    monkeypatch.setattr(describe, "MAX_DESCRIBED", 1)
    path = FIXTURES / "kernels.log"
    whole = _everything(path)
    assert any(isinstance(c, dict) and c["events_dropped"] for c in whole)
    monkeypatch.setattr(compiles, "IN_MEMORY", 1)
    opened = _count(monkeypatch, compiles.Compiles, "reopen")
    assert _everything(path) == whole
    assert opened


def test_the_log_s_compiles_are_a_plain_sequence_of_finished_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Read back from disk, a compile is as it was finished: nothing of the index runs again.
    monkeypatch.setenv("TLVIEW_NO_SPLIT", "1")
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    (log,) = read_log(only_log("dynamic_shapes"))
    cl = log.compiles
    assert isinstance(cl, CompileList) and cl.on_disk

    def refused(*args: Any) -> None:
        raise AssertionError("the index ran while a compile was read back")

    monkeypatch.setattr(recompiles, "explain", refused)
    monkeypatch.setattr(finish, "finish_compile", refused)
    monkeypatch.setattr(finish.Finisher, "finish", refused)
    every = list(cl)
    assert [cl[i] for i in range(len(cl))] == every == list(cl.iter_from(0))
    assert cl[-1] == every[-1] and cl[1:3] == every[1:3]
    assert every == sorted(every, key=lambda c: finish.order(c.id))  # in report order
    assert any(c.recompile is not None for c in every)  # explained when they closed
