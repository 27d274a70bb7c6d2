"""Numbers: a number in a log's text is read by one helper (`units.number`: ASCII digits, at
most 19), so a digit string of 5,000 digits, or of other scripts' digits, is a field tlview
does not read as a number, never an exit 70, and no integer past 64 bits reaches the JSON
writer; an id past 64 bits is a bad line.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import (
    PREFIX,
    graph,
    interned,
    metrics,
    one_input,
    record,
    source,
    start,
    storage,
    tensor,
    write_log,
)
from damage import EXIT_OK, assert_clean_exit, doc_of, run

from tlview.analyze.baseline import every_attempt
from tlview.units import MAX_DIGITS, number

HUGE = "9" * 5000  # int() of it raises past Python's 4,300 digits
WIDE = "1" * 25  # fits Python's int, not 64 bits
NJT = "torch.nested._internal.nested_tensor.NestedTensor"


def test_number_reads_ascii_digits_within_64_bits() -> None:
    """Fuzz: only `-?[0-9]{1,19}` within 64 bits is a number, whatever else the text holds."""
    assert number("0") == 0 and number("-12") == -12 and number("9" * 19) == int("9" * 19)
    for bad in ("", "-", "+1", " 1", "1 ", "1_000", "\u0663", "١٢", "²", HUGE, WIDE, "0x10", "1e3"):
        assert number(bad) is None, bad
    assert number("-" + "9" * 19) is None  # below -2**63
    rng = random.Random(34)
    for _ in range(3000):
        text = "".join(rng.choice("0123456789-+ \u0663a") for _ in range(rng.randrange(25)))
        v = number(text)
        if v is not None:
            assert str(v) == text.lstrip("0") or int(text) == v
            assert -(1 << 63) <= v < 1 << 64 and len(text.lstrip("-")) <= MAX_DIGITS


def hostile_numbers(cid: tuple[int, int] = (0, 0)) -> bytes:
    """A compile whose text fields hold numbers of 5,000 digits in each place torch writes
    numbers in text: a symbol's value and range, a specialization, a graph's annotation, a
    jagged tensor's ragged_idx, a kernel stack trace's line and call number, a collective's
    group size."""
    sym = {"symbol": "s0", "val": HUGE, "vr": f"[2, {HUGE}]", "source": "L['x'].size()[0]"}
    spec = {"symbol": "s1", "sources": ["L['x'].size()[1]"], "value": HUGE}
    trace = f'  File "/m.py", line {HUGE}, in f\n    y = x + 1\n'
    code = {f"cpp_fused_add_0:{HUGE}": [trace], "cpp_fused_mul_1:1": [trace]}
    nodes = {"cppCodeToPost": {f"cpp_fused_add_0:{HUGE}": ["add"]}}
    body = f"ag = torch.ops._c10d_functional.all_gather_into_tensor(l_x_, {HUGE}, '0')"
    return b"".join(
        [
            start(cid),
            record("create_symbol", sym, cid),
            record("symbolic_shape_specialization", spec, cid),
            storage(0, 64, cid),
            tensor(0, [4, 4], [4, 1], 0, cid=cid, type=NJT, ctx=f"{{'ragged_idx': {HUGE}}}"),
            source(0, "L['x']", cid),
            graph([("L_x_", f"f32[{HUGE}, {WIDE}][4, 1]cpu")], body=body, cid=cid),
            _artifact("inductor_provenance_tracking_node_mappings", nodes, cid),
            _artifact("inductor_provenance_tracking_kernel_stack_traces", code, cid),
            metrics(cid),
        ]
    )


def _artifact(name: str, value: Any, cid: tuple[int, int]) -> bytes:
    return record("artifact", {"name": name, "encoding": "json"}, cid, payload=json.dumps(value))


def test_numbers_of_5000_digits_give_every_report(tmp_path: Path) -> None:
    log = tmp_path / "digits.log"
    # A recompile whose failed guard's stack names a line of 5,000 digits (annotations read it).
    why = f"tensor 'x' size mismatch\n  File \"/m.py\", line {HUGE}, in f\n    y = g(x)"
    reasons = record("artifact", {"name": "recompile_reasons", "encoding": "json"}, (0, 1),
                     payload=json.dumps([why]))  # fmt: skip
    again = start((0, 1)) + metrics((0, 1))
    log.write_bytes(
        interned("/m.py") + hostile_numbers() + reasons + again + hostile_numbers((1, 0))
    )
    for fmt in ("json", "text", "html", "perfetto", "markdown"):
        res = run("report", str(log), "--format", fmt, "-v")
        assert_clean_exit(res, EXIT_OK, fmt)
    for form in ("github", "plain"):
        res = run("report", str(log), "-o", str(tmp_path / "r.json"), "--annotations", form)
        assert_clean_exit(res, EXIT_OK, f"--annotations {form}")
        assert HUGE not in res.stdout_bytes.decode()
    doc = orjson.loads(run("report", str(log), "--format", "json").stdout_bytes)
    assert [c["key"] for c in every_attempt(doc)] == ["0/0", "0/1", "1/0"]
    res = run("report", str(log), "--format", "html", "--compile-id", "0/0")
    assert_clean_exit(res, EXIT_OK, "html --compile-id")


def test_a_rank_in_a_file_name_is_ascii_within_64_bits(tmp_path: Path) -> None:
    """`rank_<200 digits>` and `rank_\u0663` name no rank: the job's JSON is written whole."""
    job = tmp_path / "job"
    job.mkdir()
    names = {"rank_" + "7" * 200 + ".log": None, "rank_\u0663.log": None, "rank_5.log": 5}
    for n in names:
        (job / n).write_bytes(interned("/m.py") + start() + metrics())
    res = run("report", str(job), "--format", "json")
    assert_clean_exit(res, EXIT_OK, "job json")
    doc = orjson.loads(res.stdout_bytes)
    ranks = {Path(log["path"]).name: log.get("rank") for log in doc["logs"]}
    assert ranks == names


@pytest.mark.slow  # torch: the inputs rebuilt, a repro written
def test_numbers_of_5000_digits_in_inputs_and_repro(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    log = tmp_path / "digits.log"
    log.write_bytes(interned("/m.py") + hostile_numbers())
    for mode in ("zeros", "meta"):
        assert_clean_exit(run("inputs", str(log), "--mode", mode), EXIT_OK, mode)
    assert_clean_exit(run("inputs", str(log)), EXIT_OK, "listing")
    res = run("repro", str(log), "--all", "-o", str(tmp_path / "r"))
    assert res.exit_code in (EXIT_OK, 6), res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


EVENT = {"name": "dynamo", "cat": "dynamo_timed", "ph": "B", "ts": 1000, "pid": 0, "tid": 0}


def test_perfetto_sums_estimates_as_ints_and_never_writes_null(tmp_path: Path) -> None:
    """Estimated runtimes of 1e308 ns (their float sum overflows to inf, written as null), below
    zero or of the wrong type: each slice's ts and dur are finite numbers, ordered."""
    ops = [
        {"name": f"k{i}", "type": "compute", "estimated_runtime_ns": ns}
        for i, ns in enumerate([1e308, 1e308, 5000, -1, "x", True, 2**70, 1500.5])
    ]
    log = tmp_path / "est.log"
    log.write_bytes(
        interned("/m.py")
        + start()
        + record("chromium_event", {}, (0, 0), payload=json.dumps(EVENT))
        + _artifact("inductor_runtime_and_tensor_meta", {"ops": ops}, (0, 0))
        + metrics()
    )
    res = run("report", str(log), "--format", "perfetto")
    assert_clean_exit(res, EXIT_OK, "perfetto")
    events = json.loads(res.stdout_bytes)["traceEvents"]
    slices = [e for e in events if e.get("cat") == "estimated_runtime"]
    assert [e["name"] for e in slices] == [f"k{i}" for i in range(8)]
    assert all(
        isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float) for e in slices
    )
    assert [e["dur"] for e in slices] == [0, 0, 5.0, 0, 0, 0, 0, 1.5]
    ts = [e["ts"] for e in slices]
    assert ts == sorted(ts) and ts[-1] - ts[0] == 5.0


def test_a_compile_id_beyond_64_bits_is_a_bad_line(tmp_path: Path) -> None:
    body = {"compile_id": "99999999999999999999/0", "co_name": "f"}
    big = b'{"str": ["/m.py", 123456789012345678901234567890]}'
    log = write_log(
        tmp_path,
        "big.log",
        interned("/m.py"),
        one_input(),
        record("compilation_metrics", body, None),
        PREFIX + big + b"\n",
    )
    for fmt in ("json", "text", "html", "perfetto"):
        assert_clean_exit(run("report", str(log), "--format", fmt), EXIT_OK, fmt)
    doc = doc_of(log)
    assert "0/0" in [c["key"] for c in every_attempt(doc)]
    reasons = [b["reason"] for b in doc["bad_lines"]]
    assert any("compile_id is not a compile id: '99999999999999999999/0'" in r for r in reasons)
    assert any("str" in r for r in reasons), reasons  # the index over 64 bits: a wrong type


@pytest.mark.slow
def test_a_graph_annotation_of_other_digits_loses_no_graph(tmp_path: Path) -> None:
    """`f32[\u0663+1]` (an Arabic-Indic digit) in one graph's annotation: repro --all writes every
    graph and summary.json; that graph's script parses."""
    pytest.importorskip("torch")
    odd = b"".join(
        [
            start((1, 0)),
            storage(0, 64, (1, 0)),
            tensor(0, [4, 4], [4, 1], 0, cid=(1, 0)),
            source(0, "L['x']", (1, 0)),
            graph([("L_x_", "f32[\u0663+1, 4][4, 1]cpu")], cid=(1, 0)),
            metrics((1, 0)),
        ]
    )
    log = write_log(tmp_path, "digits.log", interned("/m.py"), one_input(), odd, one_input((2, 0)))
    out = tmp_path / "repros"
    res = run("repro", str(log), "--all", "-o", str(out))
    assert_clean_exit(res, EXIT_OK, "repro --all")
    summary = json.loads((out / "summary.json").read_text())
    assert [g["status"] for g in summary["graphs"]] == ["written"] * 3
    ast.parse((out / "1-0" / "repro.py").read_text())


def test_byte_counts_beyond_a_float_are_written() -> None:
    from tlview.units import nbytes

    assert nbytes(1048575**64) == "about 2^1279 B" and nbytes(3 << 40) == "3.0 TiB"


def test_a_number_just_past_its_bound_is_none() -> None:
    """docs/trust.md: at most 19 ASCII digits, within 64 bits: each tried at and just past."""
    assert number("9" * MAX_DIGITS) == int("9" * MAX_DIGITS)
    assert number("1" + "0" * MAX_DIGITS) is None  # 20 digits
    assert number(str((1 << 63) - 1)) == (1 << 63) - 1
    assert number(str(-(1 << 63))) == -(1 << 63) and number(str(-(1 << 63) - 1)) is None
    assert number(str(1 << 64)) is None
