"""Growth checks (tests/growth.py) of the report paths that show issue 48's facts: every format
at N and 4N units of one dimension the facts walk (compiles with spans, skips and recompiles;
spans of one compile; failed guards of one recompile; records without a compile id, each by
another writer; frames with profile-guided code states), in process; no absolute time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from crafted import interned, metrics, record, start
from growth import assert_linear

from tlview.cli import main

pytestmark = pytest.mark.slow  # several seconds each: timed at two sizes, best of three


def _span(name: str, ph: str, ts: float, cid: tuple[int, int]) -> bytes:
    body = {"name": name, "ts": ts, "args": {"compile_id": f"{cid[0]}/{cid[1]}"}, "ph": ph,
            "cat": "dynamo_timed", "tid": 0, "pid": 0}  # fmt: skip
    return record("chromium_event", {}, cid, payload=orjson.dumps(body).decode())


def _compile(k: int, spans: int = 3) -> list[bytes]:
    """Frame k compiled once: nested spans, a CUDA graph skip, then a recompile whose failed
    guard has a user stack."""
    cid, again = (k, 0), (k, 1)
    t = 1000.0 * k
    out = [start(cid)]
    out += [_span(f"span{i % 40}", "B", t + i, cid) for i in range(spans)]
    out += [_span(f"span{i % 40}", "E", t + 2 * spans - i, cid) for i in reversed(range(spans))]
    skip = f'skipping cudagraphs due to reason {k % 50}. Found from :\n File "/u.py", line {k}'
    out.append(metrics(cid, cudagraph_skip_reason=skip))
    why = f"{k}/0: L['n'] == {k}  # y = n  # u.py:7 in f\nUser stack trace:\n  File \"/u.py\", line 7, in f\n    y = n\n"
    reasons = orjson.dumps([why]).decode()
    out += [start(again), record("artifact", {"name": "recompile_reasons", "encoding": "json"},
                                 again, payload=reasons), metrics(again)]  # fmt: skip
    return out


def _guards(n: int) -> list[bytes]:
    """One recompile whose n guards failed, each with its stack."""
    whys = [
        f"0/0: tensor 'x{i}' size mismatch at index 0. expected 4, actual 6\n"
        f'User stack trace:\n  File "/u.py", line {i + 1}, in f\n    y = x{i}\n'
        for i in range(n)
    ]
    reasons = orjson.dumps(whys).decode()
    return [start((0, 0)), metrics((0, 0)), start((0, 1)),
            record("artifact", {"name": "recompile_reasons", "encoding": "json"}, (0, 1),
                   payload=reasons), metrics((0, 1))]  # fmt: skip


def _loose(n: int) -> list[bytes]:
    """n records without a compile id, each written by another line of a backend."""
    out = [interned("/backend.py", 1)]
    for i in range(n):
        stack = [{"line": i + 1, "name": f"plan{i % 30}", "filename": 1}]
        body = {"name": f"plan_{i % 200}", "encoding": "string"}
        out.append(record("artifact", body, None, payload="x", stack=stack))
    return [*out, start((0, 0)), metrics((0, 0))]


def _states(n: int) -> list[bytes]:
    """n frames, their sizes kept by a profile-guided code state the process read first."""
    lines = []
    for k in range(n):
        lines += [f"hash{k}/u.py:{k + 1}:f{k}:", "  L['x']: tensor size=[?] stride=[1]"]
    out = [record("artifact", {"name": "get_local_code_state", "encoding": "string"}, (0, 0),
                  payload="\n".join(lines))]  # fmt: skip
    for k in range(n):
        cid = (k, 0)
        sym = {"symbol": f"s{k}", "val": 4, "vr": "[2, int_oo]", "source": "L['x'].size()[0]",
               "user_stack": [{"line": k + 1, "name": f"f{k}", "filename": 0}]}  # fmt: skip
        done = {"compile_id": f"{k}/0", "co_name": f"f{k}", "co_filename": "/u.py",
                "co_firstlineno": k + 1, "entire_frame_compile_time_s": 0.5}  # fmt: skip
        out += [start(cid, name=f"f{k}"), record("create_symbol", sym, cid),
                record("compilation_metrics", done, cid)]  # fmt: skip
    return out


LOGS: dict[str, tuple[Callable[[int], list[bytes]], int]] = {
    "compiles": (lambda n: [b for k in range(n) for b in _compile(k)], 150),
    "spans": (lambda n: _compile(0, n), 1500),
    "guards": (_guards, 300),
    "loose": (_loose, 1500),
    "states": (_states, 200),
}
FORMATS = {
    "text": ("report", "-o", "r.txt"),
    "text-v": ("report", "-v", "-o", "v.txt"),
    "json": ("report", "-o", "r.json"),
    "html": ("report", "-o", "r.html"),
    "markdown": ("report", "-o", "r.md"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dim", LOGS)
def test_fact_reports_grow_linearly(tmp_path: Path, dim: str, fmt: str) -> None:
    make, n = LOGS[dim]
    out = tmp_path / "out"
    out.mkdir()

    def build(k: int) -> Path:
        path = tmp_path / f"{dim}{k}.log"
        path.write_bytes(b"".join([interned("/u.py"), *make(k)]))
        return path

    def run(log: Path) -> None:
        cmd, *opts, name = FORMATS[fmt]
        code = main.main(args=[cmd, str(log), *opts, str(out / name), "--force"],
                         standalone_mode=False)  # fmt: skip
        assert code in (None, 0)

    assert_linear(build, run, n, f"{dim} in {fmt}")
