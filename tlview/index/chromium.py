"""Chromium events: a compile's phases (begun and ended, or complete) and caches turned off."""

from __future__ import annotations

from tlview.index.core import CLOSED_SHIFT, OpenState, State, add_phase
from tlview.index.kinds import CHROMIUM_FIELDS, MAX_EVENTS, json_of, parse_id, wrong_fields
from tlview.model import CacheEvent, Phase
from tlview.parse import Record


def on_chromium(ix: State, rec: Record) -> None:
    """Phases from chromium events, under the compile id of the record or of its args."""
    cid = ix.id_of(rec)
    ev = json_of(rec.payload)
    if not isinstance(ev, dict):
        if rec.payload_ok:
            ix.bad(rec, "payload is not a JSON event")
        if cid is not None:  # a damaged payload is still its compile's record
            ix.compile_for(rec, cid)
        return
    name, ph, ts, args = ev.get("name"), ev.get("ph"), ev.get("ts"), ev.get("args")
    # The types torch writes, told at a glance (a phase per event, thousands a compile).
    plain = (
        type(name) is str
        and type(ph) is str
        and (type(ts) is int or type(ts) is float)
        and (args is None or type(args) is dict)
        and ("dur" not in ev or type(ev["dur"]) in (int, float))
    )
    if not plain:
        problem = wrong_fields(ev, CHROMIUM_FIELDS, required=("name", "ph", "ts"))
        if problem:
            ix.bad(rec, problem)
    if cid is None and isinstance(args, dict):
        cid = parse_id(args.get("compile_id"))
        if cid is not None and ix.run:
            cid = ix.ran(cid)
    c = ix.compile_for(rec, cid)
    if not isinstance(name, str) or not isinstance(ts, int | float) or isinstance(ts, bool):
        return
    st = ix.open.setdefault(cid, OpenState())
    if ph == "B":
        if len(st.chromium) >= MAX_EVENTS:  # begun and never ended: a hostile log
            c.events_dropped += 1
            return
        depth = len(st.chromium)
        if ix.part and cid in ix.closed:
            depth += ix.closed[cid] << CLOSED_SHIFT  # see merge()
        st.chromium.append((name, float(ts), depth))
    elif ph == "E":
        if not ix.end_event(cid, name, float(ts), c) and ix.part:
            ix.unmatched.append((cid, name, float(ts)))
            ix.closed[cid] = ix.closed.get(cid, 0) + 1
    elif ph == "i" and name.endswith("_cache_disabled") and len(c.cache) < MAX_EVENTS:
        # A cache turned off (force_disable_caches, or its config): an instant event only.
        reason = args.get("cache_bypass_reason") if isinstance(args, dict) else None
        cache = name[: -len("_cache_disabled")]
        c.cache.append(
            CacheEvent(cache, "disabled", None, reason if isinstance(reason, str) else None)
        )
    elif ph == "X":
        dur = ev.get("dur")
        add_phase(c, Phase(name, float(ts), float(dur) if isinstance(dur, int | float) else 0.0))
    if not st.chromium:
        # Only compiles with begun, unended events stay here: the E lookup scans them.
        ix.open.pop(cid, None)
