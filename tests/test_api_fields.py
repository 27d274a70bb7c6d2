"""docs/api.md's tables of what a Report, a Compile and an Analysis hold name real fields, and
`Report.compiles` is the sequence the headline counts."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import FIXTURES, ROOT

import tlview
from tlview.analyze.summary import overview

API = (ROOT / "docs" / "api.md").read_text()


def _names(heading: str) -> set[str]:
    """The backticked names in the first column of the table under HEADING."""
    part = API[API.index(heading) :]
    part = part[part.index("| field |") :]
    table = part[: part.index("\n\n")]
    out: set[str] = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        out |= {n.removesuffix("()") for n in re.findall(r"`([a-z_]+(?:\(\))?)`", first)}
    return out


def test_every_field_the_docs_name_is_there() -> None:
    rep = tlview.read(FIXTURES / "demo.log")
    c = rep.compiles[0]
    a = next(tlview.analysed(rep))
    for obj, heading in (
        (rep, "## What a `Report` holds"),
        (c, "A `Compile` is one attempt"),
        (a, "## What a compile means"),
    ):
        names = _names(heading)
        assert len(names) > 5, heading
        missing = sorted(n for n in names if not hasattr(obj, n))
        assert not missing, (heading, missing)


def test_report_compiles_is_the_headline_as_a_sequence() -> None:
    """demo.log: torch counted 5 compiles; 2 attempts restarted before two of them."""
    rep = tlview.read(FIXTURES / "demo.log")
    assert len(rep.compiles) == overview(rep).compiles == 5
    assert [c.key for c in rep.compiles] == ["0/0_1", "0/1_1", "1/0", "1/1", "2/0"]
    assert rep.compiles[1].key == "0/1_1" and [c.key for c in rep.compiles[3:]] == ["1/1", "2/0"]
    assert [c.key for c in rep.attempts][:3] == ["-/-", "0/0", "0/0_1"]
    assert [c.key for c in rep.outside] == ["-/-"]
    shown = [a for a in tlview.analysed(rep) if a.compile.status != "restarted"]
    assert [(a.compile.key, [e.compile.key for e in a.earlier]) for a in shown][:3] == [
        ("-/-", []),
        ("0/0_1", ["0/0"]),
        ("0/1_1", ["0/1"]),
    ]


def test_one_order_one_shape_and_options_objects(tmp_path: Path) -> None:
    """emit_inputs and repro take (log, compile, where); fake and real inputs come back as the
    same mapping; the option objects stand for the keywords."""
    import warnings

    rep = tlview.read(FIXTURES / "demo.log")
    fakes = tlview.fake_inputs(rep, "2/0")
    real = tlview.real_inputs(rep, "2/0", options=tlview.RebuildOptions(mode="zeros"))
    assert isinstance(fakes, tlview.Rebuilt) and isinstance(real, tlview.Rebuilt)
    assert sorted(fakes) == sorted(real) == sorted(real.tensors) and len(fakes) == 3
    assert all(float(real[s].abs().sum()) == 0 for s in real)  # zeros, from the options object
    out = tmp_path / "a.pt"
    said = tlview.emit_inputs(rep, "2/0", out, options=tlview.RebuildOptions(mode="meta"))
    assert out.exists() and said.startswith("3 tensor(s) of 1 compile(s)"), said
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tlview.save_inputs(rep, str(tmp_path / "b.pt"), "2/0", force=True)
    assert [str(x.message).split(":")[0] for x in w] == [
        "tlview.save_inputs(log, path, compile_id) is deprecated"
    ]
    # a path: read with the graph code kept, as repro needs
    o = tlview.repro(
        FIXTURES / "demo.log", "2/0", tmp_path / "r", options=tlview.ReproOptions(mode="zeros")
    )
    assert o.status == "written" and (tmp_path / "r" / "repro.py").exists()


def test_repro_of_a_report_read_without_graph_code_says_how_to_ask(tmp_path: Path) -> None:
    """A Report holds graph code only when `tlview.read` was asked to keep it (`keep=`): a
    repro of one read without it says so and how to ask, not that a budget ran out; one read
    keeping graphs within too small a budget names that budget."""
    from tlview.analyze.names import GRAPH_KIND
    from tlview.index.keep import Keep
    from tlview.replay.make import graph_keep

    log = FIXTURES / "demo.log"
    plain = tlview.read(log)
    (line,) = [g.line for c in plain.compiles if c.key == "2/0" for g in c.graphs
               if g.kind == GRAPH_KIND]  # fmt: skip
    asked = (
        f"the graph code at line {line} was not kept: the report was read without keeping this "
        "graph's code (read it with tlview.read(PATH, keep=tlview.replay.make.graph_keep()), or "
        "give tlview.repro the log's path)"
    )
    for rep in (plain, tlview.read(log, keep=graph_keep("1/0"))):  # another compile's kept
        o = tlview.repro(rep, "2/0", tmp_path / "a")
        assert (o.status, o.reason, o.dir) == ("skipped", asked, None)
    small = Keep(payload_bytes=1 << 20, total_bytes=100, kinds=frozenset({GRAPH_KIND}))
    o = tlview.repro(tlview.read(log, keep=small), "2/0", tmp_path / "b")
    assert (
        o.reason
        == f"the graph code at line {line} was not kept in memory (over 100 bytes of graphs)"
    )
    o = tlview.repro(tlview.read(log, keep=graph_keep()), "2/0", tmp_path / "c")
    assert (o.status, o.reason) == ("written", None)


def test_the_records_the_docs_call_namedtuples_are() -> None:
    import dataclasses

    from tlview import model

    part = API[API.index("A `Compile` is one attempt") :]
    said = part[: part.index("\n\n")]
    kept = said[: said.index("are dataclasses")]
    made = said[said.index("are dataclasses") : said.index("are `NamedTuple`s")]
    for name in re.findall(r"`([A-Z][A-Za-z]+)`", kept):
        assert dataclasses.is_dataclass(getattr(model, name)), name
    named = re.findall(r"`([A-Z][A-Za-z]+)`", made)
    assert len(named) == 9
    for name in named:
        cls = getattr(model, name)
        assert issubclass(cls, tuple) and hasattr(cls, "_replace"), name
