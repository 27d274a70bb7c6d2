"""Make a job directory of rank logs from real rank logs, with divergences planted on purpose.

Every rank's log is a real torch log with its rank rewritten (the `"rank"` key of each record
and the file name); the planted ranks differ the way a real job's ranks do: an extra recompile,
a different input shape, a missing compile, another collective order, a cache miss, a changed
graph. Edited payloads get their `has_payload` md5 recomputed, so every log stays valid.

    python benchmarks/make_job.py DEST --ranks 64 --size-mb 2          # the benchmark's job
    python benchmarks/make_job.py DEST --ranks 8 --plant                 # with divergences
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("TLVIEW_CORPUS", HERE.parent.parent / "shared" / "corpus"))
# A real rank of a real 2-rank DDP job (gloo): restarts, graph breaks, an inductor compile with
# an all_reduce, cache misses, one input tensor per graph.
BASE = CORPUS / "multirank_gloo" / "dedicated_log_torch_trace_rank_0_f534302x.log"

_RANK_KEY = re.compile(rb'"rank": \d+')
_RANK_PREFIX = re.compile(rb"^\[rank\d+\]:")
_CACHED = re.compile(rb'"cache_size": \d+')
_FRAME = re.compile(rb'"frame_id": (\d+), "frame_compile_id": (\d+)')
_MD5 = re.compile(rb'"has_payload": "[0-9a-f]*"')
_PAYLOAD_ID = re.compile(rb'"compile_id": "(\d+)/(\d+)')
_DESCRIBER = re.compile(rb'"describer_id": (\d+)')


@dataclass(frozen=True, slots=True)
class Unit:
    """One record: its line, and its payload (TABs stripped, lines joined) if it has one."""

    head: bytes
    payload: bytes | None = None

    def compile(self) -> tuple[int, int] | None:
        """(frame, frame compile) of the compile this record belongs to, or None."""
        m = _FRAME.search(self.head) or _PAYLOAD_ID.search(self.head)
        if m is None and self.payload is not None and b'"chromium_event"' in self.head:
            m = _PAYLOAD_ID.search(self.payload)
        return (int(m.group(1)), int(m.group(2))) if m else None

    def with_payload(self, payload: bytes) -> Unit:
        md5 = hashlib.md5(payload, usedforsecurity=False).hexdigest().encode()
        return Unit(_MD5.sub(b'"has_payload": "' + md5 + b'"', self.head), payload)

    def kind(self) -> bytes:
        j = self.head.find(b'] {"')
        return self.head[j + 4 : self.head.find(b'"', j + 4)] if j >= 0 else b""

    def artifact(self) -> bytes | None:
        m = re.search(rb'\{"artifact": \{"name": "([^"]+)"', self.head)
        return m.group(1) if m else None


def read_units(path: Path) -> list[Unit]:
    units: list[Unit] = []
    head: bytes | None = None
    body: list[bytes] = []
    for line in path.read_bytes().split(b"\n"):
        if line.startswith(b"\t"):
            body.append(line[1:])
            continue
        if head is not None:
            units.append(Unit(head, b"\n".join(body) if body else None))
        head, body = (line if line else None), []
    if head is not None:
        units.append(Unit(head, b"\n".join(body) if body else None))
    return units


def write_units(path: Path, units: Iterable[Unit]) -> None:
    with path.open("wb") as f:
        for u in units:
            f.write(u.head + b"\n")
            if u.payload is not None:
                f.write(b"\t" + u.payload.replace(b"\n", b"\n\t") + b"\n")


# -- edits: each takes a rank's records and returns them changed ---------------------------------
Edit = Callable[[list[Unit]], list[Unit]]


def set_rank(units: list[Unit], rank: int) -> list[Unit]:
    out = []
    for u in units:
        head = _RANK_KEY.sub(b'"rank": %d' % rank, u.head)
        head = _RANK_PREFIX.sub(b"[rank%d]:" % rank, head)
        out.append(replace(u, head=head))
    return out


_PID = re.compile(rb"^((?:\[rank\d+\]:)?[A-Z]\d{4} \d\d:\d\d:\d\d\.\d+ +)\d+")


def set_pid(pid: int) -> Edit:
    """The log as another process wrote it: its pid in every record's prefix (each rank of a
    real job is a process of its own)."""

    def edit(units: list[Unit]) -> list[Unit]:
        return [replace(u, head=_PID.sub(rb"\g<1>%d" % pid, u.head)) for u in units]

    return edit


def _move(u: Unit, old: tuple[int, int], new: tuple[int, int]) -> Unit:
    """The record as it would be in compile NEW instead of OLD (ids in line and payload)."""

    def ids(m: re.Match[bytes]) -> bytes:
        if (int(m.group(1)), int(m.group(2))) != old:
            return m.group(0)
        text = m.group(0)
        a, b = m.start(1) - m.start(0), m.end(1) - m.start(0)
        c, d = m.start(2) - m.start(0), m.end(2) - m.start(0)
        return text[:a] + b"%d" % new[0] + text[b:c] + b"%d" % new[1] + text[d:]

    head = _PAYLOAD_ID.sub(ids, _FRAME.sub(ids, u.head))
    if u.payload is not None and _PAYLOAD_ID.search(u.payload):
        payload = _PAYLOAD_ID.sub(ids, u.payload)
        if payload != u.payload:
            return Unit(head, u.payload).with_payload(payload)
    return Unit(head, u.payload)


def extra_recompile(frame: int, fcid: int) -> Edit:
    """The compile FRAME/FCID happens once more, as the next compile of its frame."""

    def edit(units: list[Unit]) -> list[Unit]:
        new = 1 + max(c[1] for u in units if (c := u.compile()) and c[0] == frame)
        old = (frame, fcid)
        moved = [_move(u, old, (frame, new)) for u in units if u.compile() == old]
        # Its metrics count the frame's earlier compiles as cached, as a recompile's do.
        return units + [
            replace(u, head=_CACHED.sub(b'"cache_size": %d' % new, u.head)) for u in moved
        ]

    return edit


def missing_compile(frame: int, fcid: int) -> Edit:
    """The compile FRAME/FCID never happens on this rank."""

    def edit(units: list[Unit]) -> list[Unit]:
        return [u for u in units if u.compile() != (frame, fcid)]

    return edit


def input_size(frame: int, fcid: int, dim0: int) -> Edit:
    """The first input of compile FRAME/FCID has DIM0 rows on this rank."""

    def edit(units: list[Unit]) -> list[Unit]:
        out, done = [], False
        for u in units:
            if not done and u.kind() == b"describe_tensor" and u.compile() == (frame, fcid):
                u = replace(u, head=re.sub(rb'"size": \[\d+', b'"size": [%d' % dim0, u.head))
                done = True
            out.append(u)
        assert done, f"no describe_tensor in {frame}/{fcid}"
        return out

    return edit


def edit_payload(name: bytes, old: bytes, new: bytes) -> Edit:
    """Payloads of record kind or artifact NAME have OLD replaced by NEW (md5 recomputed)."""

    def edit(units: list[Unit]) -> list[Unit]:
        out, done = [], False
        for u in units:
            if u.payload is not None and name in (u.kind(), u.artifact()) and old in u.payload:
                u = u.with_payload(u.payload.replace(old, new))
                done = True
            out.append(u)
        assert done, f"no {name!r} payload with {old!r}"
        return out

    return edit


def copy_artifact(name: bytes, src: tuple[int, int], dst: tuple[int, int]) -> Edit:
    """Compile DST logs artifact NAME as compile SRC did (e.g. it broke the graph there too)."""

    def edit(units: list[Unit]) -> list[Unit]:
        first = next(u for u in units if u.artifact() == name and u.compile() == src)
        at = max(i for i, u in enumerate(units) if u.compile() == dst)
        return units[:at] + [_move(first, src, dst)] + units[at:]

    return edit


def edit_lines(kind: bytes, old: bytes, new: bytes) -> Edit:
    """Record lines of KIND have OLD replaced by NEW (a field torch logs in the line itself)."""

    def edit(units: list[Unit]) -> list[Unit]:
        return [replace(u, head=u.head.replace(old, new)) if u.kind() == kind else u for u in units]

    return edit


def rename_artifact(old: bytes, new: bytes) -> Edit:
    """An artifact logged under another name: `fx_graph_cache_miss` -> `fx_graph_cache_hit`."""

    def edit(units: list[Unit]) -> list[Unit]:
        key = b'{"artifact": {"name": "' + old + b'"'
        return [replace(u, head=u.head.replace(key, key.replace(old, new))) for u in units]

    return edit


def reverse_collectives(units: list[Unit]) -> list[Unit]:
    """The collectives of each schedule are issued in the opposite order on this rank."""
    out = []
    for u in units:
        if u.artifact() == b"inductor_collective_schedule" and u.payload is not None:
            lines = u.payload.split(b"\n")
            ops = [ln.rstrip(b",") for ln in lines[1:-1]]
            body = b",\n".join(reversed(ops))
            u = u.with_payload(b"[\n" + body + b"\n]")
        out.append(u)
    return out


def grow(units: list[Unit], target: int) -> list[Unit]:
    """Repeat the log's compiles with frame ids shifted, as a longer run would, to TARGET bytes."""
    frames = 1 + max((c[0] for u in units if (c := u.compile())), default=0)
    describers = 1 + max(
        (int(m.group(1)) for u in units if (m := _DESCRIBER.search(u.head))), default=0
    )
    size = sum(len(u.head) + len(u.payload or b"") for u in units)
    out = list(units)
    body = [u for u in units if u.compile() is not None]
    step = sum(len(u.head) + len(u.payload or b"") for u in body)
    copy = 1
    while target and size < target:
        for u in body:
            out.append(_shift(u, copy * frames, copy * describers))
        size += step
        copy += 1
    return out


def _shift(u: Unit, by: int, describers: int) -> Unit:
    def frame(m: re.Match[bytes]) -> bytes:
        return m.group(0).replace(m.group(1), b"%d" % (int(m.group(1)) + by), 1)

    def describer(m: re.Match[bytes]) -> bytes:
        return b'"describer_id": %d' % (int(m.group(1)) + describers)

    head = _FRAME.sub(frame, u.head)
    head = _PAYLOAD_ID.sub(frame, head)
    head = _DESCRIBER.sub(describer, head)
    if u.payload is not None and _PAYLOAD_ID.search(u.payload):
        return Unit(head, u.payload).with_payload(_PAYLOAD_ID.sub(frame, u.payload))
    return Unit(head, u.payload)


# -- a job --------------------------------------------------------------------------------------
# Divergences planted by `--plant`, by rank (ids are those of BASE).
PLANTS: dict[int, list[Edit]] = {
    1: [copy_artifact(b"dynamo_graph_break_reason", (2, 0), (3, 0))],
    2: [extra_recompile(4, 0)],
    3: [rename_artifact(b"fx_graph_cache_miss", b"fx_graph_cache_hit")],
    5: [input_size(4, 0, 8)],
    6: [missing_compile(3, 0)],
    4: [edit_payload(b"dynamo_output_graph", b"'sum'", b"'avg'")],
    7: [reverse_collectives],
}


def make_job(
    dest: Path,
    ranks: int,
    base: Path = BASE,
    plants: dict[int, list[Edit]] | None = None,
    size: int = 0,
) -> list[Path]:
    """Write one log per rank into DEST: BASE with its rank rewritten and PLANTS applied."""
    dest.mkdir(parents=True, exist_ok=True)
    units = grow(read_units(base), size)
    paths = []
    for rank in range(ranks):
        mine = set_rank(units, rank)
        for edit in (plants or {}).get(rank, []):
            mine = edit(mine)
        path = dest / f"dedicated_log_torch_trace_rank_{rank}_{rank:04x}job.log"
        write_units(path, mine)
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--size-mb", type=float, default=0, help="grow each log to about this size")
    ap.add_argument("--base", type=Path, default=BASE)
    ap.add_argument("--plant", action="store_true", help="plant the divergences of PLANTS")
    args = ap.parse_args()
    paths = make_job(
        args.dest, args.ranks, args.base, PLANTS if args.plant else None, int(args.size_mb * 2**20)
    )
    total = sum(p.stat().st_size for p in paths)
    print(f"{args.dest}: {len(paths)} rank logs, {total / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
