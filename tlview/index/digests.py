"""What comparing ranks needs of a payload: masked graph md5s, and the gist of job artifacts."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from tlview.dumps import dumps

# Graph payloads whose text is the same on every rank that traced the same program. Left out:
# before/after_pre_grad_graph (a `# graph id: <address>` line), fx_graph_runnable (the rank
# number), guards (object addresses).
COMPARED_GRAPHS = (
    "dynamo_output_graph",
    "aot_joint_graph",
    "aot_forward_graph",
    "aot_backward_graph",
    "aot_inference_graph",
    "inductor_post_grad_graph",
    "inductor_output_code",
    "compiled_autograd_graph",
    "optimize_ddp_split_graph",
    "optimize_ddp_split_child",
    "inductor_aot_wrapper_code",  # graph_dump records of AOTInductor, by their name
    "inductor_aot_kernel_code",
)


def compared_kind(kind: str, meta: dict[str, Any] | None) -> str | None:
    """The name a graph is compared between ranks by (a graph_dump's own name), or None."""
    if kind == "graph_dump":
        name = (meta or {}).get("name")
        return name if isinstance(name, str) and name in COMPARED_GRAPHS else None
    return kind if kind in COMPARED_GRAPHS else None


# What differs between ranks by design in a graph's text: each rank's device index (its own
# GPU), paths whose hashes follow the code (which names that index), object addresses and ids.
# Masked before hashing, so ranks of one program on different GPUs hash equal. Every place torch
# writes these (torch/_inductor: codegen/wrapper.py, cpp_wrapper_gpu.py, cpp_wrapper_cpu.py,
# triton.py, the device_op_overrides of cuda, xpu and mtia, runtime/hints.py; FX's printer):
# `torch.cuda.set_device(N)`, `torch.cuda._DeviceGuard(N)`, `torch.mtia.device(N)`,
# `streamN = get_raw_stream(N)` and `raw_streamN` (2.13), `stream=streamN`,
# `torch.cuda.default_generators[N]`, `device='cuda:N'` and `f32[4]cuda:N` annotations,
# `device(type='cuda', index=N)` and `DeviceProperties(type='cuda', index=N, ...)`, older
# triton_meta's `'device': N`, `semaphores_cuda_N`; in C++ wrappers `device_guard(N)`,
# `device_guard.set_index(N)`, `aoti_torch_get_current_cuda_stream(N, ...)`,
# `cached_torch_device_type_cuda, N` and a launch's `N, streamN`; and every inductor cache path
# (`# kernel path: /tmp/torchinductor_<user>/<h[1:3]>/<h>.py`, `loadKernel("....cubin")`),
# whose hash h is the code's, which names the device. One literal prefix per pattern keeps the
# scan fast: a pattern runs only if its prefix is in the text.
_DEVICE_TYPES = (b"cuda", b"xpu", b"mtia", b"hpu", b"npu", b"privateuseone")
_BY_RANK: list[tuple[bytes, re.Pattern[bytes], bytes]] = [
    (prefix, re.compile(pattern), masked)
    for prefix, pattern, masked in (
        *((d + b":", re.escape(d) + rb":\d+", d + b":#") for d in _DEVICE_TYPES),
        (b"', index=", rb"(type='[a-z]+', index=)\d+", rb"\1#"),
        (b"_DeviceGuard(", rb"_DeviceGuard\(\d+", b"_DeviceGuard(#"),
        (b"set_device(", rb"set_device\(\d+", b"set_device(#"),
        (b"torch.mtia.device(", rb"torch\.mtia\.device\(\d+", b"torch.mtia.device(#"),
        (b"get_raw_stream(", rb"get_raw_stream\(\d+", b"get_raw_stream(#"),
        (b"stream", rb"\b(raw_)?stream\d+\b", rb"\1stream#"),
        (b", stream#", rb"\b\d+, stream#", b"#, stream#"),  # a C++ launch: device, stream
        (b"default_generators[", rb"default_generators\[\d+", b"default_generators[#"),
        (b"'device': ", rb"'device': \d+", b"'device': #"),
        (b"semaphores_", rb"semaphores_([a-z]+)_\d+\b", rb"semaphores_\1_#"),
        (b"device_guard", rb"device_guard(\.set_index)?\(\d+", rb"device_guard\1(#"),
        (b"_stream(", rb"get_current_([a-z]+)_stream\(\d+", rb"get_current_\1_stream(#"),
        (b"cached_torch_device_type_", rb"(cached_torch_device_type_[a-z]+), \d+", rb"\1, #"),
        (b"kernel path: ", rb"kernel path: [^\n]*", b"kernel path: #"),
        (b"loadKernel(", rb'loadKernel\("[^"\n]*"', b'loadKernel("#"'),
        # A cache path: from the start of its word (a quote, a space, a line) to its end.
        (b"torchinductor_", rb"[^\s'\"(]*torchinductor_[^\s'\")]*", b"<inductor cache>"),
        (b"0x", rb"0x[0-9a-fA-F]+", b"0x#"),
        (b"# graph id: ", rb"# graph id: \d+", b"# graph id: #"),
    )
]


COLLECTIVE_SCHEDULE = "inductor_collective_schedule"


RUNTIME_ESTIMATE = "inductor_runtime_and_tensor_meta"


GRAPH_EXECUTION = "graph_execution"


JOB_ARTIFACTS = frozenset({COLLECTIVE_SCHEDULE, RUNTIME_ESTIMATE, GRAPH_EXECUTION})


MAX_KEPT = 64  # schedule entries and execution runs kept per artifact


# -- compact content of the job artifacts, kept by the index beside each payload's md5 ----------
def graph_md5(kind: str | None, payload: bytes | None) -> str | None:
    """The md5 of a compared graph with device indices and addresses masked; None if none were."""
    if kind is None or payload is None:
        return None
    masked = mask_by_rank(payload)
    # Nothing masked: the payload's own md5 (has_payload) says the same.
    return None if masked is payload else hashlib.md5(masked, usedforsecurity=False).hexdigest()


def mask_by_rank(payload: bytes) -> bytes:
    """A graph's text with what differs between ranks by design masked (the same object when
    nothing was)."""
    out = payload
    for prefix, pattern, masked in _BY_RANK:
        if prefix in out:
            got = pattern.sub(masked, out)
            if got != out:
                out = got
    return out


def artifact_meta(name: str, payload: bytes | None) -> dict[str, Any] | None:
    """The little of a collective schedule, runtime estimate or execution order a rank diff needs."""
    if name not in JOB_ARTIFACTS or not payload:
        return None
    try:
        v = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if name == COLLECTIVE_SCHEDULE and isinstance(v, list):
        return {"collectives": len(v), "ops": [_op_name(x) for x in v[:MAX_CALLS]]}
    if name == RUNTIME_ESTIMATE and isinstance(v, dict) and isinstance(v.get("ops"), list):
        return _runtime_meta(v["ops"])
    if name == GRAPH_EXECUTION and isinstance(v, dict):
        order = v.get("graph_execution_order")
        return _execution_meta(order) if isinstance(order, list) else None
    return None


def _execution_meta(calls: list[Any]) -> dict[str, Any]:
    """A graph execution order as runs of one compile id: [[id, calls], ...], the first few."""
    order = [str(x.get("compile_id")) if isinstance(x, dict) else "?" for x in calls]
    runs: list[list[Any]] = []
    for cid in order:
        if runs and runs[-1][0] == cid:
            runs[-1][1] += 1
        elif len(runs) < MAX_KEPT:
            runs.append([cid, 1])
        else:
            break
    return {"calls": len(order), "runs": runs}


# A collective or wait in inductor's Python output code: `buf2 = torch.ops._c10d_functional.
# all_gather_into_tensor.default(buf1, 2, '0')`, `torch.ops._c10d_functional.wait_tensor.default(
# buf2)`, in place `all_reduce_.default(buf6, ...)`, `..._out.default(buf0, ..., out=buf1)`.
_CALL = re.compile(
    rb"^[ \t]*(?:(\w+) = )?torch\.ops\._?c10d_functional\.(\w+)\.default\((\w*)([^\n]*)", re.M
)
_OUT = re.compile(rb"\bout=(\w+)")


def code_collectives(payload: bytes | None) -> dict[str, Any] | None:
    """The collectives and waits an output code calls, in order, with the buffer each makes or
    waits on (`[op, buffer]`); None when it calls none."""
    if not payload or b"c10d_functional." not in payload:
        return None
    calls: list[list[str]] = []
    n = 0
    for m in _CALL.finditer(payload):
        made, op, first, rest = m.groups()
        out = _OUT.search(rest)
        if out is not None:
            buf = out.group(1)
        elif made is None or op.endswith(b"_") or op == b"wait_tensor":
            buf = first
        else:
            buf = made
        n += 1
        if len(calls) < MAX_CALLS:
            calls.append([op.decode(), buf.decode()])
    return {"calls": n, "collectives": calls} if n else None


MAX_CALLS = 256  # collective and wait calls of one output code kept for the parity check


def _op_name(x: Any) -> str:
    """`torch.ops._c10d_functional.all_reduce_.default` -> `all_reduce_`."""
    s = str(x)
    for prefix in ("torch.ops._c10d_functional.", "torch.ops.c10d_functional.", "torch.ops."):
        if s.startswith(prefix):
            s = s[len(prefix) :]
            break
    return s.removesuffix(".default")


def _runtime_meta(ops: list[Any]) -> dict[str, Any]:
    total = collective = 0.0
    shapes = []
    for op in ops:
        if not isinstance(op, dict):
            continue
        ns = op.get("estimated_runtime_ns")
        if isinstance(ns, int | float) and not isinstance(ns, bool):
            total += ns
            if op.get("type") == "collective":
                collective += ns
        shapes.append([op.get("name"), op.get("type"), op.get("outputs")])
    digest = hashlib.md5(dumps(shapes), usedforsecurity=False).hexdigest()
    return {
        "ops": len(ops),
        "runtime_ns": total,
        "collective_ns": collective,
        "tensor_meta": digest,
        # the first kernels' outputs as text, for naming the first that differs between ranks
        "kernels": [[str(name), _outputs(outs)] for name, _, outs in shapes[:MAX_KEPT]],
    }


def _outputs(outs: Any) -> str:
    """A kernel's outputs as `[4, 6] [6, 1] float32`, `;`-separated."""
    if not isinstance(outs, list):
        return "?"
    parts = []
    for o in outs:
        if isinstance(o, dict):
            parts.append(f"{o.get('shape')} {o.get('stride')} {o.get('dtype')}")
    return "; ".join(parts)
