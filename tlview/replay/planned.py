"""The plan of one repro: what binding a graph's inputs decides and the script is written from.

Its own module so that bind.py (which fills it) and plan.py (which makes it) need not import
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tlview.model import Compile, Payload
from tlview.replay import graphcode as gc

if TYPE_CHECKING:
    from tlview.tensors.rebuilt import Rebuilt


@dataclass(slots=True)
class Arg:
    """One argument of the graph's forward: its placeholder and the code that gives its value."""

    name: str
    code: str


@dataclass(slots=True)
class Body:
    """A nested graph class (a higher-order op's body) and where build() puts it."""

    path: str  # "cond_true_0", "cond_true_0.inner"
    owner: str  # "GraphModule", "GraphModule.cond_true_0"
    name: str
    target: str  # "mod.cond_true_0", "mod.cond_true_0.body.inner"
    nargs: int
    nouts: int | None  # values it returns as a tuple (None: not a tuple)


@dataclass(slots=True)
class Plan:
    """Everything a repro of one graph needs, decided before anything is written."""

    ref: str  # the compile as the user names it (`0/1`, `LOG:0/1`)
    compile: Compile
    log_path: str
    torch_version: str | None
    graph: Payload | None
    code: gc.GraphCode | None = None
    fatal: str | None = None  # why no repro can be written
    blockers: list[str] = field(default_factory=list)  # why a written repro will not run here
    notes: list[str] = field(default_factory=list)  # what differs from the original run
    args: list[Arg] = field(default_factory=list)
    symbols: list[tuple[str, str]] = field(default_factory=list)  # symbol -> code
    attrs: list[tuple[str, str]] = field(default_factory=list)  # self attribute -> source
    bodies: list[Body] = field(default_factory=list)
    # name, dtype, shape, stride code and logged device of each output
    outputs: list[tuple[str, str, str, str, str | None]] = field(default_factory=list)
    moved: bool = False  # the inputs are not on the log's kind of device
    std: list[tuple[str, str, str]] = field(default_factory=list)  # name, module, attribute
    registers: list[str] = field(default_factory=list)  # torch modules that define its ops
    imports: list[str] = field(default_factory=list)  # modules --allow-import let it import
    collectives: bool = False
    world: int = 1  # ranks its collectives ran on (all_gather_into_tensor(x, 2, '0'): 2)
    groups: list[str] = field(default_factory=list)  # process group names its collectives use
    ranks: list[tuple[int, Rebuilt]] = field(default_factory=list)  # rank -> its rebuilt inputs
    standins: bool = False  # some input is made in the script from the graph's annotation
    no_grad: bool = False  # run the graph with grad off
    dynamic: bool = False
    device: str | None = None  # --device
    mode: str = "random"  # --mode: values of the rebuilt inputs
    # Each integer input's domain, in words: source -> where its values were kept (or why not)
    domains: list[tuple[str, str]] = field(default_factory=list)
    # The inputs the graph changes in place: label (its source) and the code of its value
    # after a run, over `inputs` and `args` (--check-accuracy compares them as outputs)
    changed: list[tuple[str, str]] = field(default_factory=list)
    # The .item() calls whose value the log holds: node name, the value, where it is from
    items: list[tuple[str, float, str]] = field(default_factory=list)
    nouts: int | None = None  # values forward returns as a tuple (None: not a tuple)
    rebuilt: Any = None  # rebuild.Rebuilt
    job_ranks: list[int] = field(default_factory=list)  # the ranks of the logs read

    @property
    def reason(self) -> str | None:
        return self.fatal or (self.blockers[0] if self.blockers else None)
