"""Typed records of what a log says beside a compile's own records: its work at run time, the
failures torch logged as artifacts, the profile-guided code states it read or wrote, and the
records written without any compile id. Held by `model.Compile`; read in `index/beside.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class Lined(Protocol):
    """A record of this module: each knows its log line."""

    line: int


@dataclass(slots=True)
class RunMetrics:
    """Compile work a compiled function did when it ran, not while it compiled: a backward
    compiled lazily, run-time autotuning, CUDA graph recording. torch's
    `compilation_metrics_runtime` (`bwd_compilation_metrics_runtime` for a backward)."""

    line: int
    backward: bool
    fields: dict[str, Any]  # as logged (times in `..._us`)


@dataclass(slots=True)
class Trouble:
    """A failure torch logged as an artifact beside a compile (fx_interpreter_error,
    eager_compile_backwards_failure, inductor_spmd_graph_mismatch), in its own first words."""

    kind: str  # the artifact's name
    line: int
    text: str  # one line: the error, or the report's first line


@dataclass(slots=True)
class CodeState:
    """A profile-guided code state torch read or wrote (get_/put_*_code_state artifacts): for each
    code object (`hash(...)/file.py:LINE:NAME`), each source as torch rendered it, e.g.
    `tensor size=[?, 4] stride=[4, 1]`, where "?" is a size a run saw change."""

    kind: str  # the artifact's name: get_local_code_state, put_remote_code_state, ...
    line: int
    entries: dict[str, dict[str, str]]  # code object -> source -> what torch kept of it


@dataclass(slots=True)
class Loose:
    """Records outside any compile id with one name and one writer, counted. Where torch's order
    makes their compile certain (written, in this process, while that compile's span alone was
    open), `inside` names it."""

    name: str  # the record kind, or an artifact's name
    writer: str | None  # the innermost frame of its logged stack, what wrote it: "PATH:LINE in F"
    torch: bool  # that frame is torch's own code (index.core.is_torch_file)
    user: str | None  # the innermost frame of that stack outside torch: "PATH:LINE"
    inside: str | None  # the key of the one compile whose span was open
    span: str | None  # the outermost span open outside any compile (fullgraph_capture, ...)
    count: int = 1
    line: int = 0  # the first such record's log line
    span_start: float | None = None  # when that span began (chromium us): which one it was
