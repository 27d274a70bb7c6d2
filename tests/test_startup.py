"""Start-up: a report imports the analysis of records few logs have only for a log that has them
(docs/performance.md, "Start-up"): vLLM's calls, pass graphs, bytecode, regions, collectives,
provenance, the comparison of ranks. And the cheap checks that decide it (analyze/rare.py)
miss no compile those modules find something in."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, only_log

import tlview
from tlview.analyze.bytecode import _BYTECODE, pairs_of
from tlview.analyze.collectives import parity
from tlview.analyze.compiles import Analysis, analysed
from tlview.analyze.passes import pass_stages, pass_step
from tlview.analyze.rare import has_collectives, may_have_bytecode, may_have_passes
from tlview.analyze.subgraphs import by_subgraph
from tlview.analyze.vllm_records import is_vllm
from tlview.model import Compile, Payload

# Imported only for a log (or a compile) that has what they read.
RARE = (
    "tlview.analyze.vllm",
    "tlview.render.html.vllm",
    "tlview.analyze.passes",
    "tlview.analyze.bytecode",
    "tlview.analyze.subgraphs",
    "tlview.render.html.passes",
    "tlview.analyze.collectives",
    "tlview.analyze.provenance",
    "tlview.render.html.provenance",
    "tlview.analyze.divergence",
)

# Every report format of one log in one process, then the tlview modules it imported.
_REPORTS = """
import json, sys
from tlview.cli import main
log, out, formats = sys.argv[1], sys.argv[2], sys.argv[3:]
for fmt in formats:
    try:
        main(["report", log, "--format", fmt, "-v", "-o", f"{out}.{fmt}", "--force"])
    except SystemExit as e:
        assert e.code in (0, None), (fmt, e.code)
mods = sorted(m for m in sys.modules if m.startswith("tlview"))
frozen = sorted(
    f"{m}.{k}"
    for m in mods
    for k, v in vars(sys.modules[m]).items()
    if isinstance(v, type) and v.__module__ == m
    and getattr(getattr(v, "__dataclass_params__", None), "frozen", False)
)
print(json.dumps({"modules": mods, "frozen": frozen}))
"""
FORMATS = ("json", "html", "text", "markdown")


def _imported(log: Path, out: Path, formats: tuple[str, ...] = FORMATS) -> set[str]:
    return set(_loaded(log, out, formats)["modules"])


def _loaded(log: Path, out: Path, formats: tuple[str, ...]) -> dict[str, list[str]]:
    """The tlview modules every format's report of LOG imported, and their frozen dataclasses."""
    got = subprocess.run(
        [sys.executable, "-c", _REPORTS, str(log), str(out), *formats],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    loaded: dict[str, list[str]] = json.loads(got.stdout.splitlines()[-1])
    return loaded


def _has_rare(a: Analysis) -> bool:
    c = a.compile
    return bool(a.passes or a.bytecode or a.subgraphs or a.parity or c.provenance)


def test_a_report_of_a_plain_log_imports_no_rare_analysis(tmp_path: Path) -> None:
    log = only_log("transformer_inductor")  # one process, inductor, none of RARE's records
    report = tlview.read(log)
    assert len(report.logs) == 1 and not is_vllm(report.logs[0])
    assert not any(_has_rare(a) for a in analysed(report))
    got = _imported(log, tmp_path / "r")
    assert "tlview.analyze.vllm_records" in got and "tlview.analyze.rare" in got
    assert not got & set(RARE), sorted(got & set(RARE))


# The frozen dataclasses a report may build at start-up, each for what a NamedTuple cannot be
# (docs/architecture.md): Python 3.11 builds a frozen dataclass in about 0.5 ms, a NamedTuple in
# 0.07 ms, and every report pays for the classes it imports.
FROZEN = {
    "tlview.analyze.names.Refs": "called: mypy does not take a NamedTuple's __call__",
    "tlview.analyze.owners.Attached": "a field named count, which a tuple has",
    "tlview.analyze.phases.SpanTime": "a field named count, which a tuple has",
    "tlview.model.Divergence": "a list field with a default_factory",
}


def test_a_report_builds_only_the_frozen_dataclasses_it_must(tmp_path: Path) -> None:
    log = only_log("transformer_inductor")
    got = _loaded(log, tmp_path / "r", FORMATS)
    assert "tlview.model.Divergence" in got["frozen"]  # the check sees them
    assert set(got["frozen"]) <= set(FROZEN), sorted(set(got["frozen"]) - set(FROZEN))


def test_a_vllm_log_still_gets_its_vllm_section(tmp_path: Path) -> None:
    got = _imported(FIXTURES / "vllm.log", tmp_path / "r", ("json", "text", "html"))
    assert {"tlview.analyze.vllm", "tlview.render.html.vllm", "tlview.analyze.passes"} <= got
    calls = json.loads((tmp_path / "r.json").read_text())["vllm"]
    assert calls and all(c["ranges"] for c in calls)
    assert "vLLM: " in (tmp_path / "r.text").read_text()
    assert 'id="vllm"' in (tmp_path / "r.html").read_text()


# Pieces of payload kinds, put together in every order up to three: each of passes.pass_step's
# and bytecode's patterns, their near misses and the stage bounds.
_PIECES = (
    "",
    "x",
    "vllm_post_grad",
    "vllm_post_grad.",
    ".",
    "1.",
    "Fusion",
    "_pre_grad",
    "_post_grad",
    "before",
    "before_",
    "after_",
    "inductor_",
    "optimus_",
    "cff_",
    "PreGrad",
    "_graph",
    "_ORIGINAL_BYTECODE",
    "_MODIFIED_BYTECODE",
    "ORIGINAL_BYTECODE",
    "\n",
)


def _one(kind: str) -> Compile:
    c = Compile(id=None, log="x.log")
    c.artifacts.append(Payload(kind, 1, 0, 0, None, True))
    return c


def test_the_kind_checks_hold_for_every_kind_the_modules_read() -> None:
    kinds = {"".join(p) for n in (1, 2, 3) for p in itertools.product(_PIECES, repeat=n)}
    for kind in sorted(kinds):
        c = _one(kind)
        step = pass_step(kind, c.artifacts[0])
        if step is not None and step.role == "pass":
            assert may_have_passes(c), kind
        if _BYTECODE.fullmatch(kind):
            assert may_have_bytecode(c), kind
    assert may_have_passes(_one("vllm_post_grad.3.FusionPass.after"))
    assert not may_have_passes(_one("before_post_grad_graph"))  # a bound alone is no pass
    assert not may_have_bytecode(_one("dynamo_output_graph"))


@pytest.mark.parametrize(
    "path",
    ["passes.log", "regional.log", "demo.log", "collectives", "ranks_restart"],
)
def test_each_compile_gets_what_the_modules_find(path: str) -> None:
    """Analysis, which asks rare.py first, gives what the modules give every compile."""
    report = tlview.read(FIXTURES / path)
    found = 0
    for a in analysed(report):
        c = a.compile
        stages = pass_stages(c)
        assert a.passes == (stages if any(s.passes for s in stages) else [])
        attempts = [c, *(e.compile for e in a.earlier)]
        assert a.bytecode == pairs_of(attempts)
        groups = by_subgraph(c)
        assert a.subgraphs == (groups if any(g.subgraph is not None for g in groups) else [])
        assert a.parity == parity(c) and has_collectives(c) == (parity(c) is not None)
        found += _has_rare(a)
    assert found
