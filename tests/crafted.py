"""Small crafted logs for damage torch never writes: each record as torch frames it (the glog
prefix, one JSON object, TAB-led payload lines with their md5), so only the crafted part is
unusual. Tests of hostile logs write them with these helpers (issue 28)."""

from __future__ import annotations

import hashlib
import os
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

PREFIX = b"V1129 18:56:30.124000 3248 torch/_logging/structured.py:28] "


def record(
    kind: str,
    body: Any,
    cid: tuple[int, int] | None = (0, 0),
    payload: bytes | str | None = None,
    attempt: int = 0,
    **meta: Any,
) -> bytes:
    """One record line (and its payload lines) as torch writes it."""
    obj: dict[str, Any] = {kind: body}
    if cid is not None:
        obj.update(frame_id=cid[0], frame_compile_id=cid[1], attempt=attempt)
    obj.update(meta)
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    if payload is not None:
        obj["has_payload"] = hashlib.md5(payload, usedforsecurity=False).hexdigest()
    out = PREFIX + orjson.dumps(obj) + b"\n"
    if payload is not None:
        out += b"".join(b"\t" + ln + b"\n" for ln in payload.split(b"\n"))
    return out


def start(cid: tuple[int, int] = (0, 0), name: str = "forward", filename: int = 0) -> bytes:
    """A dynamo_start of a one-frame stack (the file name interned by a `str` record)."""
    stack = [{"line": 3, "name": name, "filename": filename}]
    return record("dynamo_start", {"stack": stack}, cid)


def interned(path: str, index: int = 0) -> bytes:
    return record("str", [path, index], None)


def metrics(cid: tuple[int, int] = (0, 0), **fields: Any) -> bytes:
    body: dict[str, Any] = {
        "compile_id": f"{cid[0]}/{cid[1]}",
        "co_name": "forward",
        "co_filename": "/m.py",
    }
    body.update(co_firstlineno=1, graph_op_count=1, entire_frame_compile_time_s=0.5, **fields)
    return record("compilation_metrics", body, cid)


def storage(sid: int, size: int | str, cid: tuple[int, int] = (0, 0), describer: int = 0) -> bytes:
    return record("describe_storage", {"id": sid, "describer_id": describer, "size": size}, cid)


def tensor(
    tid: int,
    size: list[Any],
    stride: list[Any],
    sid: int | None,
    dtype: str = "torch.float32",
    cid: tuple[int, int] = (0, 0),
    describer: int = 0,
    **fields: Any,
) -> bytes:
    body = {
        "id": tid,
        "ndim": len(size),
        "dtype": dtype,
        "device": "device(type='cpu')",
        "size": size,
        "is_leaf": True,
        "stride": stride,
        "storage": sid,
        "describer_id": describer,
    }
    body.update(fields)
    if sid is None:
        del body["storage"]
    return record("describe_tensor", body, cid)


def source(tid: int, name: str, cid: tuple[int, int] = (0, 0), describer: int = 0) -> bytes:
    return record("describe_source", {"describer_id": describer, "id": tid, "source": name}, cid)


def graph(
    params: list[tuple[str, str]],
    body: str = "",
    cid: tuple[int, int] = (0, 0),
    returns: str | None = None,
) -> bytes:
    """A dynamo_output_graph whose payload is print_readable code of a graph over PARAMS
    ((name, annotation) pairs): it returns its first input plus one, unless told otherwise."""
    args = ", ".join(f'{n}: "{a}"' for n, a in params)
    first = params[0][0]
    lines = [
        "class GraphModule(torch.nn.Module):",
        f"    def forward(self, {args}):",
        *(f"        {ln}" for ln in body.splitlines()),
        f'        add: "{params[0][1]}" = {first} + 1;  {first} = None',
        f"        return ({returns or 'add'},)",
    ]
    sizes: dict[str, list[int]] = {n.lower(): [] for n, _ in params}
    return record("dynamo_output_graph", {"sizes": sizes}, cid, payload="\n".join(lines))


def compile_of(
    cid: tuple[int, int],
    inputs: list[tuple[str, list[int], str]],
    filename: int = 0,
) -> bytes:
    """A whole compile as torch logs one: start, each input (storage, tensor, source) with
    contiguous strides, its graph over them, its metrics. INPUTS: (source, size, dtype)."""
    out = [start(cid, filename=filename)]
    params = []
    for i, (src, size, dtype) in enumerate(inputs):
        stride: list[int] = []
        step = 1
        for d in reversed(size):
            stride.insert(0, step)
            step *= max(d, 1)
        item = {"torch.float32": 4, "torch.float16": 2, "torch.int64": 8}.get(dtype, 4)
        out += [
            storage(i, step * item, cid),
            tensor(i, size, stride, i, dtype, cid),
            source(i, src, cid),
        ]
        abbr = {"torch.float32": "f32", "torch.float16": "f16", "torch.int64": "i64"}[dtype]
        dims = ", ".join(map(str, size))
        steps = ", ".join(map(str, stride))
        params.append((arg_name(src), f"{abbr}[{dims}][{steps}]cpu"))
    out += [graph(params, cid=cid), metrics(cid)]
    return b"".join(out)


def arg_name(source: str) -> str:
    """The forward argument dynamo names after a source (`L['x']` -> `L_x_`)."""
    import re

    return re.sub(r"[^a-zA-Z0-9]+", "_", source)


def limited(
    args: list[str], address_space: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`tlview ARGS` as its own process, whose address space is limited (`resource.setrlimit`
    in the child): a memory blow-up ends the child (MemoryError, or a signal), not the machine."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    code = "import sys; from tlview.cli import run; sys.exit(run())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        preexec_fn=limit,
        check=False,
        timeout=300,
    )


def write_log(tmp: Path, name: str, *parts: bytes) -> Path:
    """A crafted log at TMP/NAME: the records PARTS, as they are."""
    p = tmp / name
    p.write_bytes(b"".join(parts))
    return p


def one_input(cid: tuple[int, int] = (0, 0), name: str = "L['x']", **fields: Any) -> bytes:
    """A compile of one f32[4, 4] input, its graph and its metrics."""
    return b"".join(
        [
            start(cid),
            storage(0, 64, cid),
            tensor(0, [4, 4], [4, 1], 0, cid=cid, **fields),
            source(0, name, cid),
            graph([("L_x_", "f32[4, 4][4, 1]cpu")], cid=cid),
            metrics(cid),
        ]
    )


def artifact(name: str, text: str, cid: tuple[int, int] = (0, 0)) -> bytes:
    """An artifact record whose payload is TEXT, as torch logs a string artifact."""
    return record("artifact", {"name": name, "encoding": "string"}, cid, payload=text)


# What a terminal obeys: escapes, C0/C1 controls, bidi overrides and isolates.
OBEYED = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
ESC = "\x1b]0;TITLE\x07\x1b[2J\x9b2J\u202e"
