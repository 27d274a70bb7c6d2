"""What a rebuild gives: each source's tensor, notes and failure, gathered from the builders."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlview.tensors.logged import Logged
from tlview.tensors.plans import GroupPlan, TensorPlan

if TYPE_CHECKING:
    from torch import Tensor, UntypedStorage


@dataclass(eq=False)
class Rebuilt(Mapping[str, "Tensor"]):
    """The tensors of one compile, with what could not be reproduced exactly and why; as a
    mapping, {source: tensor} (what `fake_inputs` and `real_inputs` both return)."""

    tensors: dict[
        str, Tensor
    ]  # source -> tensor; one object for all sources of one described tensor
    notes: dict[str, list[str]]  # source -> what could not be reproduced exactly, and why
    failed: dict[str, str]  # source -> why it could not be rebuilt at all
    groups: list[GroupPlan] = field(default_factory=list, repr=False)  # shared: read only
    # Every tensor and storage built, by (describer, logged id): bases, grads and inner tensors
    # too, so views keep their `_base` object alive and `--emit` can save each storage once.
    built: dict[tuple[int, int], Tensor] = field(default_factory=dict, repr=False)
    storages: dict[tuple[int, int], UntypedStorage] = field(default_factory=dict, repr=False)
    # The values the log holds: a tensor input's (it holds it, but in meta mode), a Python
    # scalar input's (`L['k']`); every other value is random or zero (the log holds no data).
    logged: dict[str, Logged] = field(default_factory=dict)

    def __getitem__(self, source: str) -> Tensor:
        return self.tensors[source]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)


class Failed(Exception):
    """This tensor cannot be built; the message says why."""


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    if not text:
        return type(e).__name__
    if len(text) > 1 and text[0].rstrip().endswith(":"):  # "... expected one of:" and what
        return f"{text[0].rstrip()} {text[1].strip()}"[:300]
    return text[0][:300]


def collect(
    out: Rebuilt,
    g: GroupPlan,
    memo: Mapping[int, Tensor],
    notes: Mapping[int, list[str]],
    errors: Mapping[int, str],
) -> None:
    d = g.describer
    out.built.update(((d, tid), t) for tid, t in memo.items())
    if not (notes or errors or g.missing or g.source_notes):  # the common case, in one pass
        out.tensors.update((name, memo[tid]) for name, tid, _src in g.sources)
        return
    for name, tid, _src in g.sources:
        extra = list(g.source_notes.get(name, []))
        if name in g.missing:
            out.failed[name] = g.missing[name]
            continue
        t = memo.get(tid)
        if t is None:
            out.failed[name] = errors.get(tid, "not rebuilt")
        else:
            out.tensors[name] = t
        got = extra + _tree_notes(g, tid, notes, errors) if notes or errors else extra
        if got:
            out.notes[name] = got


def _tree_notes(
    g: GroupPlan, tid: int, notes: Mapping[int, list[str]], errors: Mapping[int, str]
) -> list[str]:
    """Notes of a tensor and of the tensors it is built from (base, grad, inner)."""
    out: list[str] = []
    seen: set[int] = set()
    todo = [(tid, "")]
    while todo:
        i, path = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for n in notes.get(i, ()):
            text = n if not path else f"{path}: {n}"
            if text not in out:
                out.append(text)
        if path and i in errors:
            out.append(f"{path}: not rebuilt: {errors[i]}")
        p = g.tensors.get(i)
        if p is not None:
            todo.extend(reversed(_links(p, path)))
    return out


def _links(p: TensorPlan, path: str) -> list[tuple[int, str]]:
    """The tensors a tensor is built from (inner tensors, grad, base), each with its path."""
    links = [(j, f"{path}.{name}" if path else name) for name, j in p.attrs.items()]
    if p.grad is not None:
        links.append((p.grad, f"{path}.grad" if path else "grad"))
    if p.base is not None:
        links.append((p.base, f"{path}._base" if path else "_base"))
    return links
