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
)


# What differs between ranks by design in a graph's text: device indices (each rank has its own
# GPU), object addresses and ids; masked before hashing, so equal graphs hash equal. One literal
# prefix per pattern keeps the scan fast; a pattern runs only if its prefix is in the text.
_BY_RANK = [
    (prefix, re.compile(re.escape(prefix) + digits), prefix + b"#")
    for prefix, digits in (
        (b"cuda:", rb"\d+"),
        (b"xpu:", rb"\d+"),
        (b"index=", rb"\d+"),
        (b"_DeviceGuard(", rb"\d+"),
        (b"get_raw_stream(", rb"\d+"),
        (b"0x", rb"[0-9a-fA-F]+"),
        (b"# graph id: ", rb"\d+"),
    )
]


COLLECTIVE_SCHEDULE = "inductor_collective_schedule"


RUNTIME_ESTIMATE = "inductor_runtime_and_tensor_meta"


GRAPH_EXECUTION = "graph_execution"


JOB_ARTIFACTS = frozenset({COLLECTIVE_SCHEDULE, RUNTIME_ESTIMATE, GRAPH_EXECUTION})


MAX_KEPT = 64  # schedule entries and execution runs kept per artifact


# -- compact content of the job artifacts, kept by the index beside each payload's md5 ----------
def graph_md5(kind: str, payload: bytes | None) -> str | None:
    """The md5 of a compared graph with device indices and addresses masked; None if none were."""
    if kind not in COMPARED_GRAPHS or payload is None:
        return None
    masked_any = False
    for prefix, pattern, masked in _BY_RANK:
        if prefix in payload:
            payload = pattern.sub(masked, payload)
            masked_any = True
    # Nothing masked: the payload's own md5 (has_payload) says the same.
    return hashlib.md5(payload, usedforsecurity=False).hexdigest() if masked_any else None


def artifact_meta(name: str, payload: bytes | None) -> dict[str, Any] | None:
    """The little of a collective schedule, runtime estimate or execution order a rank diff needs."""
    if name not in JOB_ARTIFACTS or not payload:
        return None
    try:
        v = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if name == COLLECTIVE_SCHEDULE and isinstance(v, list):
        return {"collectives": len(v), "ops": [_op_name(x) for x in v[:MAX_KEPT]]}
    if name == RUNTIME_ESTIMATE and isinstance(v, dict) and isinstance(v.get("ops"), list):
        return _runtime_meta(v["ops"])
    if (
        name == GRAPH_EXECUTION
        and isinstance(v, dict)
        and isinstance(v.get("graph_execution_order"), list)
    ):
        order = [
            str(x.get("compile_id")) if isinstance(x, dict) else "?"
            for x in v["graph_execution_order"]
        ]
        runs: list[list[Any]] = []
        for cid in order:
            if runs and runs[-1][0] == cid:
                runs[-1][1] += 1
            elif len(runs) < MAX_KEPT:
                runs.append([cid, 1])
            else:
                break
        return {"calls": len(order), "runs": runs}
    return None


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
    }
