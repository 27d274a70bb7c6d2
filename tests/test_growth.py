"""Every command stays linear in every dimension of a log (issue 33): the same command, in
process, on a log of N and of 4N units of one dimension alone, best of three, at most 6x.

The logs are records as torch frames them (tests/crafted.py), grown along one dimension each:
inputs per compile (each with a symbol and a placeholder annotation, as a dynamic graph has
them), symbols and guards per compile, records per compile, compiles (recompiles of one
frame), stack depth, payload bytes, distinct interned strings, fake modes (describers) and
ranks. How to add a check: docs/performance.md#growth-checks.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import growth
import orjson
import pytest
from crafted import arg_name, interned, metrics, record, source, storage, tensor
from growth import assert_linear

from tlview.cli import main

Cid = tuple[int, int]


def _stack(depth: int, fn: int = 0) -> list[dict[str, Any]]:
    return [
        {"line": i + 1, "name": f"f{i}", "filename": fn, "loc": f"x = f{i}(x)"}
        for i in range(depth)
    ]


def _compile(cid: Cid, inputs: int = 4, guards: int = 4, depth: int = 5) -> list[bytes]:
    """One compile as dynamo logs it: its start, inputs with a symbol each, guards, the graph
    over them, a graph break and its metrics."""
    out = [record("dynamo_start", {"stack": _stack(depth)}, cid)]
    params = []
    for i in range(inputs):
        src = f"L['x{i}']"
        out += [storage(i, 64, cid), tensor(i, [4, 4], [4, 1], i, cid=cid), source(i, src, cid)]
        made = {"symbol": f"s{i}", "val": "4", "vr": "[2, int_oo]", "source": f"{src}.size()[0]"}
        out.append(record("create_symbol", {**made, "user_stack": _stack(1)}, cid))
        params.append((arg_name(src), f"f32[s{i}, 4][4, 1]cpu"))
    for g in range(guards):
        expr = {"expr": f"s{g % max(inputs, 1)} <= {g + 5}", "user_stack": _stack(1)}
        out.append(record("guard_added_fast", expr, cid))
    tree = "".join(
        f"| +- TENSOR_MATCH: check_tensor(L['x{g}'], Tensor, DispatchKeySet(CPU), "
        f"torch.float32, device=None, requires_grad=False, size=[4, 4], stride=[4, 1])\n"
        for g in range(guards)
    )
    out.append(record("dynamo_cpp_guards_str", {}, cid, payload=f"TREE_GUARD_MANAGER:\n{tree}"))
    args = ", ".join(f'{n}: "{a}"' for n, a in params)
    code = f"class GraphModule(torch.nn.Module):\n    def forward(self, {args}):\n"
    code += "".join(f'        add_{n}: "{a}" = {n} + 1\n' for n, a in params)
    code += "        return (" + ", ".join(f"add_{n}" for n, _ in params) + ",)\n"
    out.append(record("dynamo_output_graph", {"sizes": {}}, cid, payload=code))
    brk = 'Graph break: from user code at:\n  File "/m.py", line 3, in f\n    graph_break()\n'
    name = {"name": "dynamo_graph_break_reason", "encoding": "string"}
    out.append(record("artifact", name, cid, payload=brk))
    out.append(metrics(cid, guard_count=guards))
    return out


def _write(tmp: Path, name: str, parts: list[bytes]) -> Path:
    path = tmp / name
    path.write_bytes(b"".join(parts))
    return path


def _records(n: int) -> list[bytes]:
    parts = _compile((0, 0))
    for k in range(n):
        art = {"name": f"art{k}", "encoding": "string"}
        parts.append(record("artifact", art, (0, 0), payload=f"text {k}\n"))
        for ph, ts in (("B", 1000 + 2 * k), ("E", 1001 + 2 * k)):
            ev = {"name": "ev", "ts": ts, "pid": 0, "ph": ph, "cat": "dynamo_timed", "tid": 0}
            text = orjson.dumps({**ev, "args": {"compile_id": "0/0"}}).decode()
            parts.append(record("chromium_event", {}, (0, 0), payload=text))
    return parts


def _compiles(n: int) -> list[bytes]:
    """N frames, each compiled and recompiled, all of one function (so one frame to diff)."""
    parts: list[bytes] = []
    why = "[\"tensor 'x' size mismatch at index 0. expected 8, actual 12\"]"
    for f in range(n):
        parts += _compile((f, 0))
        reasons = {"name": "recompile_reasons", "encoding": "json"}
        parts += [record("artifact", reasons, (f, 1), payload=why), *_compile((f, 1))]
    return parts


def _payload(n: int) -> list[bytes]:
    code = "\n".join(
        f"    buf{k} = empty_strided_cpu((4, 4), (4, 1), torch.float32)" for k in range(n)
    )
    body = {"filename": "/tmp/torchinductor/xy/cxy.py"}
    return [*_compile((0, 0)), record("inductor_output_code", body, (0, 0), payload=code)]


def _strings(n: int) -> list[bytes]:
    """N distinct interned file names, spread over the stacks of eight compiles."""
    parts = [interned(f"/src/pkg/mod{k}.py", k) for k in range(n)]
    for f in range(8):
        st = [{"line": k, "name": f"f{k}", "filename": k, "loc": "y"} for k in range(f, n, 8)]
        parts += [record("dynamo_start", {"stack": st}, (f, 0)), metrics((f, 0))]
    return parts


def _describers(n: int) -> list[bytes]:
    """One compile whose inputs N fake modes described (as export's several passes do)."""
    parts = [record("dynamo_start", {"stack": _stack(3)}, (0, 0))]
    for d in range(n):
        for i in range(2):
            src = f"L['x{i}']"
            parts += [storage(i, 64, describer=d), tensor(i, [4, 4], [4, 1], i, describer=d)]
            parts.append(source(i, src, describer=d))
    return [*parts, metrics((0, 0))]


# dimension -> (the log's records at N, N): N sized so that N takes some milliseconds.
LOGS: dict[str, tuple[Callable[[int], list[bytes]], int]] = {
    "inputs": (lambda n: _compile((0, 0), inputs=n), 50),
    "symbols-guards": (lambda n: _compile((0, 0), inputs=n, guards=n), 40),
    "guards": (lambda n: _compile((0, 0), guards=n), 200),
    "records": (_records, 100),
    "compiles": (_compiles, 8),
    "stack-depth": (lambda n: _compile((0, 0), depth=n), 300),
    "payload-bytes": (_payload, 8_000),
    "strings": (_strings, 300),
    "describers": (_describers, 40),
}


def _ranks(tmp: Path, n: int) -> Path:
    """A job of N ranks, one log each, three compiles a rank."""
    d = tmp / f"ranks{n}"
    d.mkdir(parents=True)
    for r in range(n):
        parts = [interned("/m.py")] + [p for f in range(3) for p in _compile((f, 0))]
        ranked = b"".join(parts).replace(b'"frame_id"', b'"rank": %d, "frame_id"' % r)
        (d / f"dedicated_log_torch_trace_rank_{r}_x.log").write_bytes(ranked)
    return d


def _cli(*args: str) -> None:
    """The command as `tlview ARGS` runs it, in this process (start-up would hide growth)."""
    code = main.main(args=list(args), standalone_mode=False)
    assert code in (None, 0), (args, code)


# command -> how to run it on a log, writing into OUT.
Run = Callable[[Path, Path], None]
COMMANDS: dict[str, Run] = {
    "text": lambda log, out: _cli("report", str(log), "-o", str(out / "r.txt"), "--force"),
    "text-v": lambda log, out: _cli("report", str(log), "-v", "-o", str(out / "v.txt"), "--force"),
    "json": lambda log, out: _cli("report", str(log), "-o", str(out / "r.json"), "--force"),
    "html": lambda log, out: _cli("report", str(log), "-o", str(out / "r.html"), "--force"),
    "perfetto": lambda log, out: _cli(
        "report", str(log), "--format", "perfetto", "-o", str(out / "p.json"), "--force"
    ),
    "diff": lambda log, out: _cli(
        "diff", str(log), str(log), "--format", "json", "-o", str(out / "d.json"), "--force"
    ),
    "show": lambda log, out: _cli("show", str(log), "--compile-id", "0/0"),
    # The inputs listing without --check: no torch, as cheap as the report.
    "inputs": lambda log, out: _cli("inputs", str(log)),
}


def _torch_cli(*args: str) -> None:
    """`_cli`, with sympy's caches emptied first: a cache that holds N's symbols but not 4N's
    makes N look cheap (torch's symbolic shapes use sympy for every symbol)."""
    from sympy.core.cache import clear_cache

    clear_cache()
    _cli(*args)


TORCH_COMMANDS: dict[str, Run] = {
    "inputs-check": lambda log, out: _torch_cli("inputs", str(log), "--check"),
    "emit": lambda log, out: _torch_cli(
        "inputs", str(log), "--mode", "meta", "--emit", str(out / "i.pt"), "--force"
    ),
    "repro": lambda log, out: _torch_cli(
        "repro", str(log), "--all", "-o", str(out / "r"), "--force"
    ),
}
# Paths quick enough for the fast subset; the rest run in the full suite.
FAST = {"json", "diff", "inputs"}


def _check(tmp: Path, dim: str, run: Run, n: int | None = None) -> None:
    make, n = LOGS[dim][0], n or LOGS[dim][1]
    out = tmp / "out"
    out.mkdir()

    def build(k: int) -> Path:
        return _write(tmp, f"{dim}{k}.log", [interned("/m.py"), *make(k)])

    assert_linear(build, lambda log: run(log, out), n, f"{dim}")


def _marks(cmd: str) -> Any:
    return () if cmd in FAST else (pytest.mark.slow,)


@pytest.mark.parametrize(
    ("dim", "cmd"),
    [pytest.param(d, c, marks=_marks(c)) for d in LOGS for c in COMMANDS],
)
def test_report_commands_grow_linearly(tmp_path: Path, dim: str, cmd: str) -> None:
    _check(tmp_path, dim, COMMANDS[cmd])


@pytest.mark.slow  # torch
@pytest.mark.parametrize(
    ("dim", "cmd"),
    [
        (d, c)
        for d in ("inputs", "symbols-guards", "describers", "compiles")
        for c in TORCH_COMMANDS
        if (d, c) != ("describers", "repro")  # no graph: nothing to repro
    ],
)
def test_rebuild_commands_grow_linearly(tmp_path: Path, dim: str, cmd: str) -> None:
    pytest.importorskip("torch")
    _check(tmp_path, dim, TORCH_COMMANDS[cmd])


@pytest.mark.slow  # a process pool per run
@pytest.mark.parametrize("cmd", ["text", "json", "html", "perfetto", "diff"])
def test_job_reports_grow_linearly_in_ranks(tmp_path: Path, cmd: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    sizes = iter(range(10_000))
    assert_linear(
        lambda n: _ranks(tmp_path / str(next(sizes)), n),
        lambda d: COMMANDS[cmd](d, out),
        4,
        "ranks",
    )


@pytest.mark.slow  # a quadratic path, timed
def test_the_dims_memo_is_what_a_check_catches(tmp_path: Path, monkeypatch: Any) -> None:
    """The check fails on the quadratic path issue 33 found (graph_dims built once per input),
    put back for this test alone: a check that cannot fail proves nothing."""
    from tlview.index import dims

    real = dims.graph_dims

    def per_input(c: Any, describer: Any = None) -> Any:
        for _ in c.inputs:  # what setdefault's default argument did: one build per input
            dims.annotated.cache_clear()  # each build parsed every annotation again then
            real(c, describer)
        return real(c, describer)

    monkeypatch.setattr(dims, "graph_dims", per_input)
    with pytest.raises(AssertionError, match="4N/N"):
        _check(tmp_path, "inputs", COMMANDS["json"], 30)


def test_growth_logs_are_read_whole(tmp_path: Path) -> None:
    """Each grown log reads with no bad line and has what it was grown in: a check on a log
    tlview rejects would time the rejection."""
    from tlview import read as load

    for dim, (make, n) in LOGS.items():
        rep = load(_write(tmp_path, f"{dim}.log", [interned("/m.py"), *make(n)]), jobs=1)
        (log,) = rep.logs
        assert log.bad_count == 0, (dim, log.bad_lines)
        c = next(x for x in log.compiles if x.id is not None and x.id.frame == 0)
        if dim == "inputs":
            assert len(c.inputs) == n and len(c.symbols) == n
        if dim == "compiles":
            assert len([x for x in log.compiles if x.id is not None]) == 2 * n
        if dim == "describers":
            assert len({i.describer for i in c.inputs}) == n


def test_timings_run_with_the_collector_off_and_short_paths_repeated() -> None:
    """What docs/performance.md says of a timing: no collection lands inside it, and a path
    shorter than the floor runs as often at N as at 4N until N's timing reaches the floor."""
    seen: list[tuple[bool, int]] = []

    def run(n: int) -> None:
        seen.append((gc.isenabled(), n))

    assert gc.isenabled()
    growth.ratio(lambda n: n, run, 1)
    assert gc.isenabled()
    assert all(not on for on, _ in seen)
    at_n = sum(1 for _, n in seen if n == 1)
    at_4n = sum(1 for _, n in seen if n == 4)
    assert at_4n == at_n - 1 > growth.RUNS  # the first call at N sets the count
