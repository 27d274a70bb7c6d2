"""Fuzz: real logs damaged in every class a log gets damaged in, each command run as its own
process under an address-space limit (issue 28). No traceback, no exit 70, no signal; every
compile an independent count of the damaged log's integer ids finds is in the report; `inputs
--emit` and `repro --all` end with a documented status.

Seeded and bounded: SEED picks the logs and the damage; CASES_PER_CLASS bounds the copies. A
memory blow-up fails the test (the child dies of the limit), never the machine.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from crafted import limited
from damage import (
    byte_junk,
    flips,
    interleave,
    line_edits,
    real_logs,
    truncations,
    unit_edits,
)

from tlview.analyze.baseline import every_attempt

pytestmark = pytest.mark.slow

SEED = 28  # the issue number: change it to try other damage, the checks stay the same
LOGS = real_logs(SEED, 3, max_bytes=300_000)
CASES_PER_CLASS = 6  # damaged copies per class and log (the report of each is checked)
# `inputs --emit` and `repro --all` run on one copy of each of these classes (seeded)
HEAVY_CLASSES = ("truncation", "flipped bytes", "wrong types", "numbers", "records", "huge lines")
BOUND = 256 << 10  # TLVIEW_MAX_RECORD for the classes of huge lines and floods
REPORT_LIMIT = 2 << 30  # address space of a child that reads (no torch)
TORCH_LIMIT = 3 << 30  # of a child that rebuilds tensors (torch maps much at import)
EXIT_NO_REPRO = 6

# The glog prefix and record line as the format is (torch's TorchLogsFormatter), read here
# without tlview: what an independent count of compile ids looks at.
_PREFIX = re.compile(rb"(?:\[rank\d{1,9}\]:)?[A-Z]\d{4} \d\d:\d\d:\d\d\.\d+ +\d{1,19} ")
_UNIT = re.compile(rb"\n(?=[^\t\n\r])")


def compile_ids(data: bytes, bound: int) -> set[tuple[Any, ...]]:
    """Every compile a record line of DATA names by its integer context ids (frame_id,
    frame_compile_id, attempt, compiled_autograd_id), counted without tlview."""
    found: set[tuple[Any, ...]] = set()
    for unit in _UNIT.split(data):
        nl = unit.find(b"\n")
        head = unit if nl < 0 else unit[:nl]
        head = head[:-1] if head.endswith(b"\r") else head
        if len(head) > bound or _PREFIX.match(head) is None:
            continue
        j = head.find(b"] {")
        if j < 0:
            continue
        meta = _json(head[j + 2 :])
        if not isinstance(meta, dict) or not meta or next(iter(meta)) == "str":
            continue
        ints = {k: v for k, v in meta.items() if type(v) is int and -(1 << 63) <= v < 1 << 64}
        ag = ints.get("compiled_autograd_id")
        if "frame_id" in ints and "frame_compile_id" in ints:
            found.add((ints["frame_id"], ints["frame_compile_id"], ints.get("attempt", 0), ag))
        elif ag is not None:
            found.add((None, None, ints.get("attempt", 0), ag))
    return found


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:  # torch's json.dumps writes NaN; invalid UTF-8 is read replaced
        return json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None


# -- damage of the kinds damage.py lacks -----------------------------------------------------------
_BIG = "__tlview_big__"  # written raw where it is: numbers no 64-bit integer holds
_RAW = {
    f'"{_BIG}"'.encode(): b"123456789012345678901234567890",
    f'"-{_BIG}"'.encode(): b"-98765432109876543210987654321",
}
WRONG: list[Any] = ["x", "", -1, 0, 1.5, True, None, [], {}, [1, "x"], {"a": [1]}, _BIG, f"-{_BIG}"]
IDS = ("frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "id", "describer_id")


def _units(data: bytes) -> list[bytes]:
    parts = _UNIT.split(data)
    return [p + b"\n" for p in parts[:-1]] + [parts[-1]]


def _write(head: bytes, meta: Any, payload: bytes | None) -> bytes:
    j = head.find(b"] {")
    if isinstance(meta, dict) and payload is not None:
        meta["has_payload"] = hashlib.md5(payload, usedforsecurity=False).hexdigest()
    line = orjson.dumps(meta)
    for k, v in _RAW.items():
        line = line.replace(k, v)
    out = head[: j + 2] + line + b"\n"
    if payload is not None:
        out += b"".join(b"\t" + ln + b"\n" for ln in payload.split(b"\n"))
    return out


def _split(u: bytes) -> tuple[bytes, Any, bytes | None] | None:
    """A unit's record line, its JSON and its payload as torch wrote it."""
    lines = u.rstrip(b"\n").split(b"\n")
    head = lines[0]
    j = head.find(b"] {")
    if _PREFIX.match(head) is None or j < 0:
        return None
    try:
        meta = orjson.loads(head[j + 2 :])
    except orjson.JSONDecodeError:
        return None
    payload = b"\n".join(ln[1:] for ln in lines[1:]) if len(lines) > 1 else None
    return head, meta, payload


def _paths(v: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value, the value itself first."""
    yield at
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v[:8]):
            yield from _paths(x, (*at, i))


def _put(v: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    box = v
    for p in path[:-1]:
        box = box[p]
    box[path[-1]] = new
    return v


def wrong_types(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """A field of the record line or of a JSON payload, anywhere, given a value of another type:
    a string, a number, a list, an object, null, a bool, a number beyond 64 bits."""
    us = _units(data)
    by_kind: dict[str, list[int]] = {}  # a record of each kind, so that every kind is hit
    for i, u in enumerate(us):
        got = _split(u)
        if got is not None and isinstance(got[1], dict) and got[1]:
            by_kind.setdefault(next(iter(got[1])), []).append(i)
    kinds = sorted(by_kind)
    for k in range(CASES_PER_CLASS):
        out = list(us)
        what = []
        picked = [kinds[(k * 3 + j) % len(kinds)] for j in range(min(3, len(kinds)))]
        for i in [rng.choice(by_kind[kind]) for kind in dict.fromkeys(picked)]:
            head, meta, payload = _split(out[i])  # type: ignore[misc]
            doc = None
            if payload is not None and rng.random() < 0.4:
                doc = _json(payload)
            if isinstance(doc, dict | list):
                path = rng.choice(list(_paths(doc))[1:] or [()])
                payload = orjson.dumps(_put(doc, path, rng.choice(WRONG)))
                what.append(f"payload{list(path)}")
            else:
                path = rng.choice(list(_paths(meta))[1:])
                meta = _put(meta, path, rng.choice(WRONG))
                what.append(f"{list(path)}")
            out[i] = _write(head, meta, payload)
        yield f"wrong types at {', '.join(what)}", b"".join(out)


_DIGIT_RUN = re.compile(r"[0-9]+")
_DIGIT_RUN_B = re.compile(rb"[0-9]+")
_TEXT_NUMBERS = ["9" * 5000, "1" * 25, "\u0663", "-" + "9" * 30]


def numbers(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Ids and sizes beyond 64 bits, negative, or absurd, in records of every kind, and compile
    ids in text with such numbers."""
    us = _units(data)
    values = [_BIG, f"-{_BIG}", -1, -(1 << 63), (1 << 64) - 1, 1 << 62, "1048575**64", "-7"]
    keys = [*IDS, "size", "storage", "storage_offset", "base", "stride", "ndim", "line"]
    for k in range(CASES_PER_CLASS):
        out = list(us)
        for i, u in enumerate(us):
            got = _split(u)
            if got is None or rng.random() > 0.3:
                continue
            head, meta, payload = got
            body = meta.get(next(iter(meta)))
            where = body if isinstance(body, dict) and rng.random() < 0.7 else meta
            for key in keys:
                if key in where and rng.random() < 0.5:
                    v = rng.choice(values)
                    where[key] = [v, 2] if isinstance(where[key], list) else v
            if isinstance(body, dict) and isinstance(body.get("compile_id"), str):
                body["compile_id"] = rng.choice(["99999999999999999999/0", "-1/0", "0/-0", "!-1"])
            # Numbers in text (issue 34): a digit run of a string field or of the payload made
            # 5,000 digits, or other scripts' digits (sizes, ranges, annotations, line numbers).
            if isinstance(body, dict):
                for key, v in body.items():
                    if isinstance(v, str) and rng.random() < 0.5:
                        body[key] = _DIGIT_RUN.sub(lambda _: rng.choice(_TEXT_NUMBERS), v, 1)
            if payload is not None and rng.random() < 0.5:
                big = rng.choice(_TEXT_NUMBERS).encode()
                payload = _DIGIT_RUN_B.sub(big, payload, 3)
            out[i] = _write(head, meta, payload)
        yield f"numbers #{k}", b"".join(out)


def first_records_cut(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """The log ends 20 bytes into the payload of a compile's first record, as when its process
    was killed there (the record line itself is whole)."""
    us = _units(data)
    seen: set[Any] = set()
    at = 0
    for u in us:
        got = _split(u)
        if got is not None and got[2] is not None and isinstance(got[1], dict):
            cid = (got[1].get("frame_id"), got[1].get("frame_compile_id"))
            if cid not in seen and None not in cid:
                seen.add(cid)
                yield f"cut in the first payload of {cid}", data[: at + len(got[0]) + 1 + 20]
        at += len(u)


def interleaved(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Another real log's records mixed in, and this one's records mixed with themselves."""
    other = LOGS[(LOGS.index(_current[0]) + 1) % len(LOGS)].read_bytes()
    yield "interleaved with another log", interleave(data, other, rng)
    yield "interleaved with itself", interleave(data, data, rng)


def huge(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Lines over the record bound: a record line, a payload, junk, a line with no end."""
    us = _units(data)
    at = sum(len(u) for u in us[: len(us) // 2])
    prefix = _PREFIX.match(data)
    pre = data[: data.find(b"] {") + 2] if prefix else b"V1129 18:56:30.1 1 x.py:1] "
    n = BOUND + 4096
    lines = {
        "record line": pre + b'{"artifact": {"name": "x", "v": "' + b"a" * n + b'"}}\n',
        "payload": pre
        + b'{"artifact": {"name": "p", "encoding": "string"}, "has_payload": "0"}\n'
        + b"\tp\n" * (n // 2),
        "junk line": b"j" * n + b"\n",
    }
    for what, line in lines.items():
        yield f"huge {what}", data[:at] + line + data[at:]
    yield "huge last line with no end", data + b"k" * n


def floods(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Blank lines after a record, far more than a record may hold, plain and gzipped."""
    us = _units(data)
    i = rng.randrange(1, len(us))
    at = sum(len(u) for u in us[:i])
    flood = b"\n" * (4 * BOUND)
    yield "blank-line flood", data[:at] + flood + data[at:]
    yield "blank-line flood at the end", data + flood
    yield "CRLF blank-line flood", data[:at] + b"\r\n" * (2 * BOUND) + data[at:]


def gzipped(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Gzip, cut at every kind of place, and flooded inside the gzip."""
    z = gzip.compress(data, mtime=0)
    for k in (20, 1000, len(z) // 2, len(z) - 9):
        yield f"gzip cut at {k}", z[:k]
    yield "gzip of a blank-line flood", gzip.compress(data + b"\n" * (8 * BOUND), mtime=0)


_current: list[Path] = []
Damage = Callable[[bytes, random.Random], Iterator[tuple[str, bytes]]]
CLASSES: dict[str, tuple[Damage, bool]] = {  # the damage, and whether it needs the low bound
    "truncation": (truncations, False),
    "first records cut": (first_records_cut, False),
    "flipped bytes": (flips, False),
    "NUL, CRLF, bad UTF-8": (byte_junk, False),
    "wrong types": (wrong_types, False),
    "numbers": (numbers, False),
    "lines": (line_edits, False),
    "records": (unit_edits, False),
    "interleaved": (interleaved, False),
    "huge lines": (huge, True),
    "floods": (floods, True),
    "gzip": (gzipped, True),
}


@dataclass
class Case:
    what: str
    path: Path
    data: bytes
    bounded: bool  # read with TLVIEW_MAX_RECORD at BOUND

    def env(self) -> dict[str, str]:
        return {"TLVIEW_MAX_RECORD": str(BOUND)} if self.bounded else {}


def cases(tmp: Path) -> list[Case]:
    out: list[Case] = []
    for log in LOGS:
        _current[:] = [log]
        data = log.read_bytes()
        for name, (damage, bounded) in CLASSES.items():
            rng = random.Random(f"{SEED}:{log.name}:{name}")
            got = list(damage(data, rng))
            for what, damaged in rng.sample(got, min(CASES_PER_CLASS, len(got))):
                d = tmp / f"{len(out)}"
                d.mkdir()
                gz = damaged[:2] == b"\x1f\x8b"
                p = d / (log.name + (".gz" if gz else ""))
                p.write_bytes(damaged)
                plain = gzip_prefix(damaged) if gz else damaged
                out.append(Case(f"{log.name}: {name}: {what}", p, plain, bounded))
    return out


def gzip_prefix(z: bytes) -> bytes:
    import zlib

    d = zlib.decompressobj(wbits=31)
    try:
        return d.decompress(z)
    except zlib.error:
        return b""


def _clean(what: str, p: subprocess.CompletedProcess[bytes], allowed: tuple[int, ...]) -> str:
    """What is wrong with how a child ended, or ''."""
    err = p.stderr.decode(errors="replace")
    if p.returncode < 0:
        return f"{what}: killed by signal {-p.returncode}: {err[-300:]}"
    if "Traceback" in err or "internal error" in err or p.returncode == 70:
        return f"{what}: exit {p.returncode}: {err[-600:]}"
    if p.returncode not in allowed:
        return f"{what}: exit {p.returncode}, wanted one of {allowed}: {err[-300:]}"
    return ""


def test_damaged_logs_in_every_class(tmp_path: Path) -> None:
    """Each damaged copy as a process: a report of what is readable (every compile the ids
    count finds), or one line and exit 1 when nothing is; -v text too, for every fourth."""
    failures: list[str] = []
    all_cases = cases(tmp_path)
    assert len(all_cases) > 5 * len(CLASSES)
    for k, c in enumerate(all_cases):
        p = limited(["report", str(c.path), "--format", "json"], REPORT_LIMIT, c.env())
        why = _clean(c.what, p, (0, 1))
        if why:
            failures.append(why)
            continue
        want = compile_ids(c.data, BOUND if c.bounded else 64 << 20)
        if p.returncode == 1:
            if want:
                failures.append(f"{c.what}: exit 1, but it names compiles {sorted(want)[:5]}")
            continue
        doc = orjson.loads(p.stdout)
        got = {
            (x["frame_id"], x["frame_compile_id"], x["attempt"], x["compiled_autograd_id"])
            for x in every_attempt(doc)
        }
        lost = want - got
        if lost:
            failures.append(f"{c.what}: compiles lost: {sorted(lost, key=str)[:5]}")
        if k % 4 == 0:
            t = limited(["report", str(c.path), "-v"], REPORT_LIMIT, c.env())
            failures.append(_clean(f"{c.what} (text -v)", t, (0,)))
    failures = [f for f in failures if f]
    assert not failures, f"{len(failures)} of {len(all_cases)} failed:\n" + "\n".join(failures)


def test_inputs_and_repro_never_crash_on_damaged_logs(tmp_path: Path) -> None:
    """`inputs --emit` and `repro --all` on a seeded choice of the damaged copies."""
    pytest.importorskip("torch")
    rng = random.Random(SEED)
    by_class: dict[str, list[Case]] = {}
    for c in cases(tmp_path):
        by_class.setdefault(c.what.split(": ")[1], []).append(c)
    chosen = [rng.choice(by_class[name]) for name in HEAVY_CLASSES if name in by_class]
    failures = []
    for c in chosen:
        emit = c.path.parent / "inputs.pt"
        p = limited(
            ["inputs", str(c.path), "--emit", str(emit), "--max-bytes", "512M"],
            TORCH_LIMIT,
            c.env(),
        )
        failures.append(_clean(f"{c.what} (inputs --emit)", p, (0, 1, 4)))
        out = c.path.parent / "repros"
        p = limited(
            ["repro", str(c.path), "--all", "-o", str(out), "--max-bytes", "512M"],
            TORCH_LIMIT,
            c.env(),
        )
        failures.append(_clean(f"{c.what} (repro --all)", p, (0, 1, EXIT_NO_REPRO)))
        if p.returncode in (0, EXIT_NO_REPRO) and (out / "summary.json").exists():
            summary = json.loads((out / "summary.json").read_text())
            dirs = [g["dir"] for g in summary["graphs"] if g["dir"]]
            if len(set(dirs)) != len(dirs) or not all((out / d).is_dir() for d in dirs):
                failures.append(f"{c.what} (repro --all): folders {dirs}")
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


def test_the_independent_count_sees_compiles() -> None:
    """Positive control: the ids count finds the compiles of an undamaged log."""
    from helpers import FIXTURES

    data = (FIXTURES / "demo.log").read_bytes()
    ids = compile_ids(data, 64 << 20)
    assert (0, 0, 1, None) in ids and (2, 0, 0, None) in ids and len(ids) == 7, ids
