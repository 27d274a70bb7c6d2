"""A compile's artifacts by the region of regional inductor they were compiled for
(`subgraph_name`); `names.py` reads the `NAME[SUBGRAPH]` names `tlview show` takes for them."""

from __future__ import annotations

from dataclasses import dataclass, field

from tlview.analyze.names import artifact_names
from tlview.model import Compile, Payload


@dataclass(slots=True)
class SubgraphGroup:
    """The artifacts of one region (None: those of the compile itself), in log order."""

    subgraph: str | None
    artifacts: list[tuple[str, Payload]] = field(default_factory=list)


def by_subgraph(c: Compile) -> list[SubgraphGroup]:
    """A compile's artifacts grouped by region, each region where it first appears."""
    groups: dict[str | None, SubgraphGroup] = {}
    for name, p in artifact_names(c):
        g = groups.get(p.subgraph)
        if g is None:
            g = groups[p.subgraph] = SubgraphGroup(p.subgraph)
        g.artifacts.append((name, p))
    return list(groups.values())


def labelled(name: str, p: Payload) -> str:
    """An artifact's name with its region, as a listing shows it: `fx_graph_runnable
    [repeated_subgraph0]`."""
    return name if p.subgraph is None else f"{name} [{p.subgraph}]"
