"""Growth checks (tests/growth.py) of the per-compile facts of issue 48: each path at N and 4N
units of the one dimension it walks, in process; no absolute time is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from crafted import interned, record, start
from growth import assert_linear

import tlview
from tlview.analyze.origins import origin_context, origins
from tlview.analyze.owners import owners, span_owners
from tlview.analyze.phases import compile_phases, run_phases, span_totals
from tlview.model import Compile, CompileId, Phase, Recompile, Symbol
from tlview.runtime.store import marks

pytestmark = pytest.mark.slow  # several seconds each: timed at two sizes, best of three


def _nested(n: int) -> Compile:
    """A compile whose spans nest n deep, each with a sibling: depth and width at once."""
    c = Compile(CompileId(0, 0), "g.log")
    for i in range(n):
        c.phases.append(Phase(f"span{i % 7}", float(i), float(4 * n - 2 * i)))
        c.phases.append(Phase("leaf", float(4 * n - i - 1), 0.5))
    return c


def test_a_compiles_phases_grow_linearly_in_its_spans() -> None:
    assert_linear(_nested, compile_phases, 2000, "spans")


def test_run_phases_grow_linearly_in_compiles() -> None:
    def build(n: int) -> list[Compile]:
        out = []
        for k in range(n):
            c = Compile(CompileId(k, 0), "g.log", metrics={"gc_time_us": 5})
            c.phases = [Phase("dynamo", 10.0 * k, 9.0), Phase("backend_compile", 10.0 * k + 1, 5.0)]
            out.append(c)
        return out

    assert_linear(build, run_phases, 2000, "compiles")
    assert_linear(build, span_totals, 2000, "compiles")


def test_span_owners_grow_linearly_in_spans_and_compiles() -> None:
    def build(n: int) -> tuple[list[Phase], list[Compile]]:
        compiles = []
        for k in range(n):
            c = Compile(CompileId(k, 0), "g.log")
            c.phases = [Phase("dynamo", 100.0 * k, 50.0)]
            compiles.append(c)
        spans = [Phase("compile_file", 100.0 * k + 10, 5.0) for k in range(n)]
        return spans, compiles

    # 8,000: at 2,000 the run is short enough that a loaded machine read 6.4x
    assert_linear(build, lambda b: span_owners(b[0], [marks(c) for c in b[1]]), 8000, "spans")


def test_origins_grow_linearly_in_failed_guards_and_symbols() -> None:
    def build(n: int) -> Compile:
        c = Compile(CompileId(0, 1), "g.log", function="f", file="/t/f.py", source_line=1)
        reasons = [
            f"0/0: tensor 'x{i}' size mismatch at index 0. expected 4, actual 6" for i in range(n)
        ]
        c.recompile = Recompile("0/0", reasons)
        c.symbols = [
            Symbol("created", f"s{i}", "6", source=f"L['x{i}'].size()[0]") for i in range(n)
        ]
        return c

    assert_linear(build, lambda c: origins(c, origin_context([c])), 500, "guards")


def test_reading_records_without_an_id_grows_linearly(tmp_path: Path) -> None:
    """Records without a compile id, each with its writer's stack, then owners over them."""

    def build(n: int) -> Path:
        parts = [interned("/m.py"), start((0, 0))]
        stack = [{"line": i + 1, "name": f"w{i % 50}", "filename": 0} for i in range(3)]
        for i in range(n):
            body = {"name": f"plan_{i % 300}", "encoding": "string"}
            parts.append(record("artifact", body, None, payload="x", stack=stack))
        path = tmp_path / f"loose{n}.log"
        path.write_bytes(b"".join(parts))
        return path

    assert_linear(build, lambda p: owners(tlview.read(p).logs[0]), 1000, "records")
