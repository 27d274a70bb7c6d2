"""vLLM's records in a report, as its compiles go past: which records are vLLM's, whether a log
or a compile holds any, and each compile's gathered (without payload texts) for analyze/vllm.py
to make into calls. A report imports only this of vLLM's part until some log holds vLLM's
records: analyze/vllm.py's classes cost start-up to build, and most logs have none. For the same
reason its own records are named tuples and a plain class, not dataclasses (Python builds a
dataclass's methods with exec as it is imported)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import NamedTuple

from tlview.analyze.names import artifact_names
from tlview.model import Compile, Event, LogIndex, Payload

CONFIG = "vllm_compilation_config"
START = "vllm_piecewise_compile_start"
EVENT = "vllm_compile_event"
SPLIT = "vllm_piecewise_split_graph"
_BOUNDARIES = (CONFIG, START, EVENT)
# The frame's own records, shown with its call, never with a piece compiled in its compile.
FRAME_KINDS = re.compile(r"dynamo_\w+|compilation_metrics\w*|\w+_(?:ORIGINAL|MODIFIED)_BYTECODE")


def read_by_vllm_view(name: str) -> bool:
    """Whether a record of this name is one of vLLM's, which the vLLM part of a report reads
    (config, split graph, pieces, passes, compile events): never a name tlview does not read."""
    return name.startswith("vllm_")


def is_vllm(log: LogIndex) -> bool:
    """Whether vLLM wrote records into this log."""
    return any(has_vllm(c) for c in log.compiles)


def has_vllm(c: Compile) -> bool:
    """Whether the compile holds a record that opens a call or a piece (config, start, event)."""
    return any(p.kind in _BOUNDARIES for p in c.artifacts)


class Item(NamedTuple):
    """A record of the log as the grouping walks it: a payload, or runtime compile metrics."""

    line: int
    compile: str
    name: str | None
    payload: Payload | None = None
    event: Event | None = None

    @property
    def kind(self) -> str:
        return self.payload.kind if self.payload is not None else "compilation_metrics_runtime"


def _items(c: Compile, named: list[tuple[str, Payload]]) -> list[Item]:
    """The payloads (their texts left out; NAMED: them by name) and runtime metrics of a
    compile."""
    out = [Item(p.line, c.key, n, _bare(p)) for n, p in named]
    out += [
        Item(e.line, c.key, None, event=e)
        for e in c.events
        if e.kind == "compilation_metrics_runtime"
    ]
    return out


def _bare(p: Payload) -> Payload:
    """A payload without its text: what the calls keep of it, so a page's kept texts of vLLM's
    compiles are not held by its vLLM section."""
    return p if p.text is None and p.data is None else replace(p, text=None, cut=0, data=None)


class LogRef(NamedTuple):
    """What the calls need of a log: its name, process and rank (a tally carries these, not
    the log and its compiles)."""

    name: str
    pid: int | None
    rank: int | None

    @classmethod
    def of(cls, log: LogIndex) -> LogRef:
        return cls(log.name, log.pid, log.rank)


class Found:
    """What one log's compiles that hold vLLM's records gave, in any order."""

    __slots__ = ("ends", "frames", "items")

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.ends: dict[str, str | None] = {}  # compile -> its last record's time
        self.frames: dict[str, list[str]] = {}  # compile -> the frame's records


class Gather:
    """vLLM's records of a report's logs, taken from its compiles as they go past (only those
    holding vLLM's records are kept, without payload texts); analyze/vllm.py makes them into
    each log's calls. A pass split in two merges the later part's."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int | None], Found] = {}

    def add(self, c: Compile) -> None:
        if not has_vllm(c):
            return
        found = self.logs.setdefault((c.log, c.pid), Found())
        named = artifact_names(c)
        found.items += _items(c, named)
        found.ends[c.key] = c.end
        found.frames[c.key] = [n for n, p in named if FRAME_KINDS.fullmatch(p.kind)]

    def merge(self, later: Gather) -> None:
        for key, got in later.logs.items():
            found = self.logs.setdefault(key, Found())
            found.items += got.items
            found.ends.update(got.ends)
            found.frames.update(got.frames)
