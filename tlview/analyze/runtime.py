"""What a compiled function did when it ran (compile work at run time: a lazy backward, run-time
autotuning, CUDA graph recording), and whether each compile used CUDA graphs, and why not.

torch logs run-time work as `compilation_metrics_runtime` (`bwd_compilation_metrics_runtime` for
a backward) when the compiled function's first call ends (inductor's CompiledFxGraph), with the
columns the `dynamo_timed` regions of that call filled. A CUDA graph skipped says why in the
compile's `cudagraph_skip_reason`; one recorded took `runtime_cudagraphify_time_us`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from tlview.analyze.phases import MetricTime
from tlview.aside import RunMetrics
from tlview.model import Compile

# Run-time metrics columns (torch 2.13): tlview's name, and the field.
RUNTIME_TIMES = (
    ("cudagraphify", "runtime_cudagraphify_time_us"),
    ("autotune", "runtime_triton_autotune_time_us"),
    ("backward_compile", "backward_cumulative_compile_time_us"),
    ("inductor_compile", "inductor_cumulative_compile_time_us"),
    ("code_gen", "inductor_code_gen_cumulative_compile_time_us"),
    ("triton_compile", "triton_compile_time_us"),
    ("pre_grad_passes", "pre_grad_pass_time_us"),
    ("joint_graph_passes", "joint_graph_pass_time_us"),
    ("post_grad_passes", "post_grad_pass_time_us"),
)


class RunWork(NamedTuple):
    """One run-time metrics record: forward or backward, its time, and what the time was."""

    line: int
    backward: bool
    seconds: float | None  # the whole of it (duration_us)
    parts: list[MetricTime]  # RUNTIME_TIMES it gives

    @property
    def words(self) -> str:
        """One line: `backward at run time: autotune 0.018 s`."""
        side = "backward" if self.backward else "forward"
        parts = ", ".join(f"{p.name} {p.seconds:.3f} s" for p in self.parts) or "no time logged"
        return f"{side} at run time: {parts}"


def _us(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def run_work(r: RunMetrics) -> RunWork:
    """One run-time metrics record, read."""
    parts = [
        MetricTime(name, key, v / 1e6)
        for name, key in RUNTIME_TIMES
        if (v := _us(r.fields.get(key))) is not None
    ]
    total = _us(r.fields.get("duration_us"))
    return RunWork(r.line, r.backward, None if total is None else total / 1e6, parts)


def runtime_work(c: Compile) -> list[RunWork]:
    """What the compile's compiled function did when it ran, record by record."""
    return [run_work(r) for r in c.runtime]


CudaState = Literal["used", "skipped", "asked", "not asked"]


class CudaGraphs(NamedTuple):
    """Whether a compile ran as CUDA graphs: `used` (recorded at run time), `skipped` (and why),
    `asked` (inductor's triton.cudagraphs on, nothing recorded nor skipped: torch logs a skip
    only for a graph on a CUDA device), `not asked`."""

    state: CudaState
    reason: str | None = None  # skipped: why, in one line
    where: str | None = None  # skipped: the user line torch names ("Found from"), file:line
    cudagraphify_s: float | None = None  # used: the time recording took

    @property
    def words(self) -> str:
        if self.state == "skipped":
            at = f" (at {self.where})" if self.where else ""
            return f"CUDA graphs skipped: {self.reason}{at}"
        if self.state == "used":
            took = f" ({self.cudagraphify_s:.3f} s to record)" if self.cudagraphify_s else ""
            return f"CUDA graphs used{took}"
        if self.state == "asked":
            return "CUDA graphs asked for (triton.cudagraphs), none recorded: not a CUDA graph"
        return "CUDA graphs not asked for"


# "skipping cudagraphs due to " as torch repeats it (the backend wraps inductor's message)
_SKIPPING = re.compile(r"^(?:skipping cudagraphs? due to\s+)+", re.I)
_FOUND_AT = re.compile(r'File "([^"]+)", line (\d+)')
_ASKED = '"triton.cudagraphs": true'


def skip_words(reason: str) -> tuple[str, str | None]:
    """torch's cudagraph_skip_reason in one line, and the user line it names (`file.py:12`)."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    said = _SKIPPING.sub("", first).strip()
    said = said.split(". Found from", 1)[0].rstrip(" .:") or first
    found = _FOUND_AT.findall(reason)
    where = f"{found[-1][0].rsplit('/', 1)[-1]}:{found[-1][1]}" if found else None
    return said, where


def cudagraphs(c: Compile) -> CudaGraphs:
    """Whether the compile used CUDA graphs, and why not."""
    m = c.metrics or {}
    skip = m.get("cudagraph_skip_reason")
    if isinstance(skip, str) and skip.strip():
        said, where = skip_words(skip)
        return CudaGraphs("skipped", said, where)
    took = [v for r in c.runtime if (v := _us(r.fields.get("runtime_cudagraphify_time_us")))]
    if took:
        return CudaGraphs("used", cudagraphify_s=sum(took) / 1e6)
    config = m.get("inductor_config")
    if isinstance(config, str) and _ASKED in config:
        return CudaGraphs("asked")
    return CudaGraphs("not asked")


def cudagraph_counts(compiles: Iterable[Compile]) -> dict[str, int]:
    """How many compiles used, skipped or asked for CUDA graphs (a run's headline), and the
    skips by reason under `skipped: REASON`."""
    out: dict[str, int] = {}
    for c in compiles:
        if c.id is None:
            continue
        g = cudagraphs(c)
        if g.state == "not asked":
            continue
        out[g.state] = out.get(g.state, 0) + 1
        if g.reason is not None:
            key = f"skipped: {g.reason}"
            out[key] = out.get(key, 0) + 1
    return out
