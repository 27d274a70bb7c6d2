"""Chromium events: a compile's phases (begun and ended, or complete) and caches turned off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tlview.index.core import CLOSED_SHIFT, OpenState, State, add_phase
from tlview.index.kinds import CHROMIUM_FIELDS, MAX_EVENTS, json_of, parse_id, wrong_fields
from tlview.model import CacheEvent, Compile, CompileId, Phase
from tlview.parse import Record

# The types torch writes (name, ph, ts, args, dur), told at a glance: thousands a compile.
_PLAIN = {
    (str, str, t, a, d) for t in (int, float) for a in (dict, type(None)) for d in (int, float)
}


def on_chromium(ix: State, rec: Record) -> None:
    """Phases from chromium events, under the compile id of the record or of its args."""
    cid = rec.compile_id
    if cid is None or ix.run:
        cid = ix.id_of(rec)
    ev = json_of(rec.payload)
    if not isinstance(ev, dict):
        _not_an_event(ix, rec, cid)
        return
    name: Any = ev.get("name")
    ph, ts, args = ev.get("ph"), ev.get("ts"), ev.get("args")
    plain = (type(name), type(ph), type(ts), type(args), type(ev.get("dur", 0.0))) in _PLAIN
    if not plain:
        problem = wrong_fields(ev, CHROMIUM_FIELDS, required=("name", "ph", "ts"))
        if problem:
            ix.bad(rec, problem)
    if cid is None and isinstance(args, dict):
        cid = _named(ix, args)
    c = ix.compile_for(rec, cid)
    if not (plain or _timed(name, ts)):
        return
    st = ix.open.setdefault(cid, OpenState())
    on_phase = _PHASES.get(ph) if isinstance(ph, str) else None
    if on_phase is not None:
        on_phase(ix, cid, c, st, name, float(ts or 0), ev)
    if not st.chromium:
        # Only compiles with begun, unended events stay here: the E lookup scans them.
        ix.open.pop(cid, None)


def _not_an_event(ix: State, rec: Record, cid: CompileId | None) -> None:
    if rec.payload_ok:
        ix.bad(rec, "payload is not a JSON event")
    if cid is not None:  # a damaged payload is still its compile's record
        ix.compile_for(rec, cid)


def _timed(name: Any, ts: Any) -> bool:
    """A named event at a time (a damaged one may still be its compile's record)."""
    return isinstance(name, str) and isinstance(ts, int | float) and not isinstance(ts, bool)


def _named(ix: State, args: dict[str, Any]) -> CompileId | None:
    """The compile an event outside any compile names in its args (a backward's, at run time)."""
    cid = parse_id(args.get("compile_id"))
    return ix.ran(cid) if cid is not None and ix.run else cid


# Each phase's handler: (indexer, compile id, compile, its begun events, name, time, event).
Phaser = Callable[[State, CompileId | None, Compile, OpenState, str, float, dict[str, Any]], None]


def _begin(
    ix: State, cid: CompileId | None, c: Compile, st: OpenState, name: str, ts: float, ev: Any
) -> None:
    """B: an event begun, at the depth of those begun and not ended."""
    if len(st.chromium) >= MAX_EVENTS:  # begun and never ended: a hostile log
        c.events_dropped += 1
        return
    depth = len(st.chromium)
    if ix.part and cid in ix.closed:
        depth += ix.closed[cid] << CLOSED_SHIFT  # see merge()
    st.chromium.append((name, ts, depth))


def _end(
    ix: State, cid: CompileId | None, c: Compile, st: OpenState, name: str, ts: float, ev: Any
) -> None:
    """E: the begun event of its name ends, a phase; in a later part, perhaps one begun before."""
    if not ix.end_event(cid, name, ts, c) and ix.part:
        ix.unmatched.append((cid, name, ts))
        ix.closed[cid] = ix.closed.get(cid, 0) + 1


def _instant(
    ix: State, cid: CompileId | None, c: Compile, st: OpenState, name: str, ts: float, ev: Any
) -> None:
    """i: a cache turned off (force_disable_caches, or its config) is an instant event only."""
    if not name.endswith("_cache_disabled") or len(c.cache) >= MAX_EVENTS:
        return
    args = ev.get("args")
    reason = args.get("cache_bypass_reason") if isinstance(args, dict) else None
    cache = name[: -len("_cache_disabled")]
    c.cache.append(CacheEvent(cache, "disabled", None, reason if isinstance(reason, str) else None))


def _complete(
    ix: State, cid: CompileId | None, c: Compile, st: OpenState, name: str, ts: float, ev: Any
) -> None:
    """X: a phase with its duration."""
    dur = ev.get("dur")
    add_phase(c, Phase(name, ts, float(dur) if isinstance(dur, int | float) else 0.0))


_PHASES: dict[str, Phaser] = {"B": _begin, "E": _end, "i": _instant, "X": _complete}
