"""The run's share of where compile time went, its CUDA graphs and the owners of each log's
records without a compile id, added up one analysed compile at a time for `summary.Tally`
(mergeable, as the tally is: a pass can run in two processes)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tlview.analyze.compiles import Analysis
from tlview.analyze.owners import Owners
from tlview.analyze.phases import PhaseTally, RunPhases
from tlview.analyze.runtime import CudaGraphs

MAX_SKIP_REASONS = 20  # CUDA graph skip reasons counted apart; the rest as one "other"
OTHER_REASON = "(other reasons)"


@dataclass(slots=True)
class RunFacts:
    """The run's share of these facts: where its compile time went, its CUDA graphs, and who
    the records without a compile id of each log belong to."""

    time: RunPhases | None = None  # None: no compile logged a span or a metric time
    cudagraphs: dict[str, int] = field(default_factory=dict)  # used / skipped / asked
    skips: dict[str, int] = field(default_factory=dict)  # skipped, by reason, most first
    # each log's owners of its records without an id: (the log's place, its `-/-` ref, owners)
    owners: list[tuple[int, str, Owners]] = field(default_factory=list)
    spans_only: int = 0  # compiles whose time only their spans give (no compilation_metrics)

    @property
    def skipped(self) -> int:
        return self.cudagraphs.get("skipped", 0)


class FactTally:
    """Adds up the facts one compile at a time; mergeable, as `summary.Tally` is."""

    def __init__(self) -> None:
        self.phases = PhaseTally()
        self.graphs: Counter[str] = Counter()
        self.skips: Counter[str] = Counter()
        self.owners: list[tuple[int, str, Owners]] = []
        self.spans_only = 0

    def add(self, a: Analysis) -> None:
        if a.compile.id is None:
            self.phases.add(a.phases)
            self._owners(a)
        elif a.counted:  # an attempt that restarted is in its compile's phases
            self.phases.add(a.phases)
            self._graphs(a.cudagraphs)
            self.spans_only += a.took[1]

    def _owners(self, a: Analysis) -> None:
        got = a.context.owners if a.context is not None else None
        if got is not None and (got.attached or got.groups or got.unknown):
            self.owners.append((a.at[0], a.ref, got))

    def _graphs(self, g: CudaGraphs) -> None:
        if g.state == "not asked":
            return
        self.graphs[g.state] += 1
        if g.reason is not None:
            known = g.reason in self.skips or len(self.skips) < MAX_SKIP_REASONS
            self.skips[g.reason if known else OTHER_REASON] += 1

    def merge(self, later: FactTally) -> None:
        self.phases.merge(later.phases)
        self.graphs.update(later.graphs)
        for reason, n in later.skips.items():
            known = reason in self.skips or len(self.skips) < MAX_SKIP_REASONS
            self.skips[reason if known else OTHER_REASON] += n
        self.owners += later.owners
        self.spans_only += later.spans_only

    def done(self) -> RunFacts:
        time = self.phases.done()
        return RunFacts(
            time if time.compiles else None,
            dict(self.graphs),
            dict(sorted(self.skips.items(), key=lambda kv: (kv[0] == OTHER_REASON, -kv[1], kv[0]))),
            self.owners,
            self.spans_only,
        )
