"""The machine format `tlview.diff/1`: both runs' figures, every change, the matched frames."""

from __future__ import annotations

from typing import IO, Any

import orjson

from tlview.analyze.diff import Change, ComparedCompile, Diff, Figure, FrameDiff, FrameKey
from tlview.dumps import dumps
from tlview.render import Options, Split
from tlview.render.json.report import stats
from tlview.runtime.output import Output
from tlview.strings import TABLE, Table
from tlview.version import __version__

FORMAT = "tlview.diff/1"


def figure(f: Figure) -> dict[str, Any]:
    return {"name": f.name, "base": f.base, "new": f.new, "delta": f.delta, "changed": f.changed}


def frame_key(k: FrameKey, table: Table) -> dict[str, Any]:
    return {"process": k.process, "function": k.function, "file": table.ref(k.file), "line": k.line}


def change(c: Change) -> dict[str, Any]:
    d: dict[str, Any] = {
        "kind": c.kind,
        "frame": c.frame,
        "what": c.what,
        "before": c.before,
        "after": c.after,
        "worse": c.worse,
        "base_compile": c.base_compile,
        "new_compile": c.new_compile,
    }
    if c.input is not None:
        d["input"] = {
            "source": c.input.source,
            "field": c.input.field,
            "before": c.input.before,
            "after": c.input.after,
        }
    return d


def compiled(cc: ComparedCompile) -> dict[str, Any]:
    b, n = cc.base, cc.new
    return {
        "index": cc.index,
        "base": None if b is None else b.key,
        "new": None if n is None else n.key,
        "status": [None if b is None else b.status, None if n is None else n.status],
        "graph_ops": [None if b is None else b.graph_ops, None if n is None else n.graph_ops],
        "compile_time_s": [
            None if b is None else b.compile_time_s,
            None if n is None else n.compile_time_s,
        ],
        "inputs_compared": cc.compared,
        "input_changes": [
            {"source": x.source, "field": x.field, "before": x.before, "after": x.after}
            for x in cc.input_changes
        ],
    }


def frame_diff(p: FrameDiff, table: Table) -> dict[str, Any]:
    return {
        "frame": str(p.key),
        "base_frame": None if p.base is None else frame_key(p.base.key, table),
        "new_frame": None if p.new is None else frame_key(p.new.key, table),
        "match": p.match,
        "compiles": [compiled(cc) for cc in p.compiles],
    }


def to_dict(d: Diff, gate: list[str] | None = None) -> dict[str, Any]:
    """The comparison as written: a long file name after its first time refers to the strings
    table, as in `tlview.report/1` (tlview/strings.py)."""
    table = Table()
    out = {
        "format": FORMAT,
        "tlview_version": __version__,
        "base": {"path": d.base_path, "torch_version": d.base_torch, "stats": stats(d.base)},
        "new": {"path": d.new_path, "torch_version": d.new_torch, "stats": stats(d.new)},
        "notes": d.notes,
        "figures": [figure(f) for f in d.figures],
        "phases": [figure(f) for f in d.phases],
        "cache": [
            {
                "cache": c.cache,
                "base": c.base,
                "new": c.new,
                "rate": [c.rate(c.base), c.rate(c.new)],
            }
            for c in d.cache
        ],
        "changes": [change(c) for c in d.changes],
        "frames": [frame_diff(p, table) for p in d.frames],
        "gate": {"checked": gate is not None, "failures": gate or []},
    }
    if table.entries:
        out[TABLE] = table.entries
    return out


def stream(d: Diff, out: IO[bytes], gate: list[str] | None = None) -> None:
    out.write(dumps(to_dict(d, gate), option=orjson.OPT_NON_STR_KEYS, default=str))
    out.write(b"\n")


def write(d: Diff, out: Output, opts: Options, split: Split | None = None) -> None:
    """The comparison as `tlview.diff/1` (the renderer of `tlview diff --format json`)."""
    with out.open() as f:
        stream(d, f, opts.gate)
