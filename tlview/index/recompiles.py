"""Why a frame compiled again: the guards that failed, and what changed in its inputs.

A recompile is a property of a frame: `0/1` is frame 0 compiled a second time. When dynamo
restarts that compile (`0/1` restarted, then `0/1_1`), the attempts are one recompile. The record
goes on the final attempt (the one whose graph and guards were kept, the one the report counts
as the recompile); its reasons gather those of every attempt (torch writes the
`recompile_reasons` artifact on attempt 0 and `compilation_metrics` on the last), and its inputs
are compared with the final attempt of the previous compile of the same frame. Restarted
attempts carry no record.
"""

from __future__ import annotations

import re
from typing import Any

from tlview.index.dims import _by_source, dynamic_dims
from tlview.model import (
    ID_TEXT,
    Compile,
    Input,
    InputChange,
    Recompile,
    refused_guards,
)

# Fields compared after dtype, device, layout, shape and strides, in the order they are shown.
FLAGS = ("requires_grad", "is_parameter", "is_conj", "is_neg", "is_inference")
_LIMIT_EXCEEDED = re.compile(
    r"recompile limit exceeded|\b\w*(?:cache_size|recompile)_limit reached"
)
_LIMIT_TYPE = re.compile(r"Limit type: (\w+)|\b(\w*(?:cache_size|recompile)_limit) reached")
_LIMIT_VALUE = re.compile(r"currently set to (\d+)")
_LIMIT_FAIL_TYPES = re.compile(
    r"FailOn(?:Recompile|Cache)LimitHit|(?:Recompile|CacheSize)LimitExceeded"
)
_DIM_SOURCE = re.compile(r"\.(?:size|stride)\(\)\[\d+\]$|\.storage_offset\(\)$")


def explain(previous: list[Compile] | None, attempts: list[Compile]) -> None:
    """Why a compile (its attempts) of a frame compiled again, against the compile before it
    (None: there is none in the log): its final attempt's `recompile`."""
    final = attempts[-1]
    cid = final.id
    final.recompile = None
    if cid is None or not cid.frame_compile:
        return
    rec = Recompile(previous=None if previous is None else previous[-1].key)
    rec.reasons = _reasons(attempts)
    rec.limit_hit = limit_text(final) is not None
    if previous is not None:
        before, after = _described(previous), _described(attempts)
        if before is not None and after is not None:
            rec.input_changes = input_changes(before, after)
            if _broke(previous) or _broke(attempts):
                # Which inputs a graph takes follows where it broke: one that came or went
                # says where the graph ended, not why the frame recompiled.
                rec.input_changes = [
                    x for x in rec.input_changes if x.field not in ("added", "removed")
                ]
            rec.compared = True
    final.recompile = rec


def _broke(attempts: list[Compile]) -> bool:
    return any(a.graph_breaks or a.restart_reasons for a in attempts)


def _reasons(attempts: list[Compile]) -> list[str]:
    """Failed guards of every attempt, once each (a restart's metrics repeat them); for a
    recompile torch refused (`error_on_recompile`), the ones its error names."""
    out: list[str] = []
    for a in attempts:
        for r in a.recompile_reasons:
            if r not in out:  # whole: "size()[0] == 3" is not "size()[0] == 32"
                out.append(r)
    if not out:
        for a in attempts:
            out += refused_guards(a.fail_reason)
    return out


# A guard failure as torch words it: the id of the compile whose guards failed, then why.
_REASON_START = re.compile(rf"{ID_TEXT}: ")


def split_reasons(text: str) -> list[str]:
    """Recompile reasons written as text, one per guard failure: a line that does not start
    with a compile id (`User stack trace:` and its frames) belongs to the reason above it."""
    out: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):  # torch's lines, not Unicode's
        if not line.strip():
            continue
        if out and not _REASON_START.match(line):
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


def _described(attempts: list[Compile]) -> Compile | None:
    """The latest attempt that described its inputs; None when none did (no comparison then)."""
    for a in reversed(attempts):
        if a.input_sets:
            return a
    return None


def limit_text(c: Compile) -> str | None:
    """'recompile_limit (8)' when this compile is dynamo giving up on the frame, else None."""
    reason = c.fail_reason or ""
    if not (
        _LIMIT_EXCEEDED.search(reason)
        or (c.fail_type is not None and _LIMIT_FAIL_TYPES.search(c.fail_type))
    ):
        return None
    m = _LIMIT_TYPE.search(reason)
    name = (m.group(1) or m.group(2)) if m else "recompile_limit"
    v = _LIMIT_VALUE.search(reason)
    if v is None:
        # torch 2.9 and older do not say the value; the compile's dynamo_config holds it.
        config = (c.metrics or {}).get("dynamo_config")
        v = re.search(rf'"{name}": (\d+)', config) if isinstance(config, str) else None
    return f"{name} ({v.group(1)})" if v else name


# -- comparing the inputs of two compiles ------------------------------------------------------


def by_source(c: Compile) -> dict[str, Input]:
    """Each named input of a compile under every source that named it (unnamed ones are skipped)."""
    out: dict[str, Input] = {}
    for i in c.inputs:
        for s in i.sources:
            out.setdefault(s, i)
    return out


def _aliases(c: Compile) -> dict[str, list[str]]:
    shared: dict[Any, list[str]] = {}
    for i in c.inputs:  # sharing a storage, their own or through inner tensors
        if i.alias_group is not None:
            shared.setdefault(i.alias_group, []).extend(i.sources)
        elif i.storage_key is not None:
            shared.setdefault(i.storage_key, []).extend(i.sources)
    out: dict[str, list[str]] = {}
    for srcs in shared.values():
        for s in srcs:
            out[s] = sorted(x for x in srcs if x != s)
    return out


def describe(i: Input) -> str:
    """An input in a few words: 'torch.float32 [8, 16] cpu'."""
    t = i.tensor
    return f"{t.fields.get('dtype', '?')} {t.size} {t.device}"


def _contiguous(size: list[Any], stride: list[Any]) -> bool:
    expected = 1
    for n, s in zip(reversed(size), reversed(stride), strict=False):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _all_ints(v: list[Any] | None) -> bool:
    return v is not None and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def input_changes(before: Compile, after: Compile) -> list[InputChange]:
    """Every way the named inputs of AFTER differ from those of BEFORE, source by source."""
    old, new = by_source(before), by_source(after)
    old_dyn, new_dyn = _by_source(dynamic_dims(before)), _by_source(dynamic_dims(after))
    old_alias, new_alias = _aliases(before), _aliases(after)
    out: list[InputChange] = []
    seen: set[tuple[int, int]] = set()  # (id(before input), id(after input)) already compared
    for src, a in new.items():
        b = old.get(src)
        if b is None:
            out.append(InputChange(src, "added", None, describe(a)))
            continue
        if (id(b), id(a)) in seen:
            continue
        seen.add((id(b), id(a)))
        out.extend(tensor_changes(src, b, a, old_dyn.get(src, {}), new_dyn.get(src, {})))
        both = old.keys() & new.keys()  # a partner that came or went is reported on its own
        was = [s for s in old_alias.get(src, []) if s in both]
        now = [s for s in new_alias.get(src, []) if s in both]
        if src in old_alias and src in new_alias and was != now:
            out.append(InputChange(src, "aliases", was, now))
    for src, b in old.items():
        if src not in new:
            out.append(InputChange(src, "removed", describe(b), None))
    return out + number_changes(before, after, old.keys() | new.keys())


def number_changes(before: Compile, after: Compile, tensors: set[str]) -> list[InputChange]:
    """Python numbers the recompile made symbols of (automatic dynamic: `k == 3` failed, and
    `L['k']` is now s16): what changed of an argument that is not a tensor."""
    had = {x.source for x in before.symbols if x.kind == "created"}
    out = []
    for x in after.symbols:
        src = x.source
        if (
            x.kind == "created"
            and src
            and src not in had
            and src not in tensors
            and not _DIM_SOURCE.search(src)
        ):
            had.add(src)
            out.append(InputChange(src, "dynamic", None, x.symbol))
    return out


def tensor_changes(
    src: str, b: Input, a: Input, b_dyn: dict[int, str], a_dyn: dict[int, str]
) -> list[InputChange]:
    """How one input changed between two compiles: its type, dtype, device, layout, shape,
    strides, offset, flags and inner tensors, in that order."""
    tb, ta = b.tensor, a.tensor
    out = _Changes(src)
    out.diff("type", tb.type_name, ta.type_name)
    out.diff("dtype", tb.fields.get("dtype"), ta.fields.get("dtype"))
    out.diff("device", tb.device, ta.device)
    out.diff("layout", tb.get("layout"), ta.get("layout"))
    sb, sa = tb.size, ta.size
    if sb is not None and sa is not None and len(sb) != len(sa):
        out.diff("ndim", len(sb), len(sa))
        out.diff("size", sb, sa)
    elif sb is not None and sa is not None:
        _size_changes(out, sb, sa, b_dyn, a_dyn)
        stb, sta = tb.stride, ta.stride
        if (
            _all_ints(stb)
            and _all_ints(sta)
            and stb != sta
            and not _both_contiguous(sb, stb, sa, sta)
        ):
            out.diff("stride", stb, sta)
    out.diff("storage_offset", tb.storage_offset, ta.storage_offset)
    for f in FLAGS:
        out.diff(f, tb.flag(f), ta.flag(f))
    _inner_changes(out, b, a)
    return out.changes


class _Changes:
    """The changes of one input, as they are found."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.changes: list[InputChange] = []

    def add(self, field: str, x: Any, y: Any) -> None:
        self.changes.append(InputChange(self.src, field, x, y))

    def diff(self, field: str, x: Any, y: Any) -> None:
        if x != y:
            self.add(field, x, y)


def _both_contiguous(sb: list[Any], stb: Any, sa: list[Any], sta: Any) -> bool:
    return _contiguous(sb, stb or []) and _contiguous(sa, sta or [])


def _size_changes(
    out: _Changes, sb: list[Any], sa: list[Any], b_dyn: dict[int, str], a_dyn: dict[int, str]
) -> None:
    """Dim by dim, of two shapes of one rank: sizes, and dims made dynamic or static."""
    for k, (x, y) in enumerate(zip(sb, sa, strict=True)):
        if isinstance(x, str) and isinstance(y, str):
            continue  # both symbolic (nested ints are renumbered per tensor)
        if isinstance(x, str) != isinstance(y, str):
            out.add(f"dynamic[{k}]", x, y)
            continue
        # A symbol in both compiles: only its example value changed, which matters when a
        # guard on the symbol's range failed.
        out.diff(f"{'hint' if k in b_dyn and k in a_dyn else 'size'}[{k}]", x, y)
        if (k in b_dyn) != (k in a_dyn):
            out.add(f"dynamic[{k}]", b_dyn.get(k, x), a_dyn.get(k, y))


def _inner_changes(out: _Changes, b: Input, a: Input) -> None:
    """A subclass's inner tensors (a jagged tensor's `_max_seqlen_tensor`, now None): the guard
    names the inner attribute, and the change is the input's."""
    for attr in dict.fromkeys([*b.inner, *a.inner]):
        tk, tn = b.inner.get(attr), a.inner.get(attr)
        if (tk is None) != (tn is None):
            out.add(attr, _inner(tk), _inner(tn))
        elif tk is not None and tn is not None:
            out.diff(f"{attr} dtype", tk.fields.get("dtype"), tn.fields.get("dtype"))
            if tk.size is not None and tn.size is not None and len(tk.size) != len(tn.size):
                out.diff(f"{attr} size", tk.size, tn.size)


def _inner(t: Any) -> str:
    """An inner tensor in a recompile's words: `a tensor` or `None`."""
    return "None" if t is None else "a tensor"
