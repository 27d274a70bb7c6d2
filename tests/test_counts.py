"""The headline counts compiles as torch does: one per `compilation_metrics` record of a compile
id (what torch and tlparse list), with the attempts that restarted beside them as restarts, a
compile that never finished or that dynamo refused without metrics counted too, and a graph that
torch.export traced apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import CORPUS, FIXTURES

from tlview.analyze.summary import overview
from tlview.counting import counts_as_compile
from tlview.load import read as load


def logs() -> list[Path]:
    found = [p for p in sorted(CORPUS.rglob("*")) if p.suffix in (".log", ".txt")]
    found = [p for p in found if p.name != "PROVENANCE.txt"]
    return found + sorted(FIXTURES.glob("*.log"))


_RECORD = re.compile(rb"^[VIWE]\d{4} [^{]*(\{.*)$")


def torch_counts(path: Path) -> int:
    """The compiles torch logged metrics for: its `compilation_metrics` records of a compile id,
    and torch 2.6's failures, which it wrote as `bwd_compilation_metrics` with a `fail_type`."""
    n = 0
    for ln in path.read_bytes().splitlines():
        m = _RECORD.match(ln)
        if m is None or b"compilation_metrics" not in ln:
            continue
        try:
            rec = json.loads(m.group(1))
        except ValueError:
            continue
        body = rec.get("compilation_metrics") or rec.get("bwd_compilation_metrics") or {}
        failed = (
            "bwd_compilation_metrics" in rec and isinstance(body, dict) and body.get("fail_type")
        )
        n += "frame_id" in rec and ("compilation_metrics" in rec or bool(failed))
    return n


@pytest.mark.slow  # reads every log: over a second in all
@pytest.mark.parametrize("path", logs(), ids=lambda p: p.name)
def test_the_headline_counts_compiles_as_torch_does(path: Path) -> None:
    rep = load(path)
    o = overview(rep)
    # Compiles torch logged no metrics for: one that never finished, and one past the
    # recompile limit that torch 2.5 and older log nothing for (inferred).
    inferred = sum(1 for c in rep.attempts if c.fail_type == "recompile limit (inferred)")
    assert o.compiles == torch_counts(path) + o.incomplete + inferred, path
    # The API's compiles are the headline's (and the traced ids the JSON lists with them).
    listed = sum(1 for c in rep.compiles if not counts_as_compile(c))  # traced, `!0`
    assert len(rep.compiles) == o.compiles + listed == len(list(rep.compiles)), path
    assert [c.key for c in rep.compiles[-2:]] == [c.key for c in list(rep.compiles)[-2:]]
    assert all(c.id is not None and c.status != "restarted" for c in rep.compiles)
    assert [c.key for c in rep.outside] == ["-/-"] * len(rep.outside)


def test_restarts_are_beside_the_compiles_not_among_them() -> None:
    """demo.log: torch logged 5 compiles; two of them restarted once (0/0, 0/1) first."""
    log = FIXTURES / "demo.log"
    o = overview(load(log))
    assert (o.compiles, o.restarts, torch_counts(log)) == (5, 2, 5)
    assert o.by_status == {"graph_break": 2, "ok": 3}  # no status "restarted": no compile


def test_a_graph_export_traced_is_no_compile() -> None:
    """A strict export's dynamo trace has no compilation_metrics: torch counts no compile."""
    o = overview(load(FIXTURES / "export_strict.log"))
    assert (o.compiles, o.by_status) == (0, {"traced": 1})


def test_compiled_autograds_captured_graph_is_no_compile_but_dynamos_is() -> None:
    """compiled_autograd.log: compiled autograd captured `!0` and `!1` (ids with no frame), and
    dynamo compiled each as `!0/0/0` and `!1/1/0`, which are the ones torch counts."""
    rep = load(FIXTURES / "compiled_autograd.log")
    counted = {str(c.id): counts_as_compile(c) for c in rep.attempts if c.id is not None}
    assert counted == {"!0": False, "!1": False, "!0/0/0": True, "!1/1/0": True}
    assert overview(rep).compiles == 2
