"""Damage real TORCH_TRACE logs the ways logs get damaged, and say what a report must still show.

The helpers here know the log format (record line + TAB payload lines, md5, glog prefix), not the
files of the corpus, so the same checks hold for any real log: `check_damaged` takes an undamaged
log and a damaged copy of it and checks tlview's report of the copy against its report of the
undamaged records the copy still holds.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner, Result
from helpers import CORPUS, FIXTURES

from tlview.analyze.baseline import every_attempt
from tlview.cli import main

# torch's glog prefix: optional "[rankN]:", level letter, "MMDD HH:MM:SS.ffffff", process id.
PREFIX = re.compile(rb"(?:\[rank\d+\]:)?[A-Z]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")

EXIT_OK, EXIT_NO_TRACE, EXIT_STRICT, EXIT_REFUSED = 0, 1, 3, 4  # README "Exit status"


# -- the logs ------------------------------------------------------------------------------------
def real_logs(seed: int, count: int, max_bytes: int = 2_000_000) -> list[Path]:
    """A seeded choice of real logs: the demo fixture, then corpus logs of at most `max_bytes`."""
    chosen = [FIXTURES / "demo.log"]
    if CORPUS.is_dir():
        pool = sorted(
            p for p in CORPUS.rglob("*.log") if p.stat().st_size <= max_bytes and p.is_file()
        )
        random.Random(seed).shuffle(pool)
        chosen += pool[: max(0, count - 1)]
    return chosen[:count]


def corpus_log(name: str) -> Path | None:
    """A corpus log by file name, or None where the corpus is not checked out."""
    if not CORPUS.is_dir():
        return None
    return next(iter(sorted(CORPUS.rglob(name))), None)


# -- units: a record line and the payload lines under it ----------------------------------------
@dataclass(frozen=True, slots=True)
class Unit:
    """One record line with its payload lines, as bytes of one file."""

    start: int  # byte offset in the file
    data: bytes  # the lines, each with its newline (the last may lack one)
    line: int  # number of its first line in the file

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    @property
    def lines(self) -> int:
        return self.data.count(b"\n") + (0 if self.data.endswith(b"\n") else 1)

    @property
    def last_line(self) -> int:
        return self.line + self.lines - 1

    @property
    def head(self) -> bytes:
        """The record line, without its line end."""
        nl = self.data.find(b"\n")
        head = self.data if nl < 0 else self.data[:nl]
        return head[:-1] if head.endswith(b"\r") else head

    @property
    def norm(self) -> bytes:
        """The bytes with CRLF line ends read as LF, so a CRLF copy matches its original."""
        return self.data.replace(b"\r\n", b"\n")

    def spans(self) -> range:
        return range(self.line, self.last_line + 1)


def units(data: bytes) -> list[Unit]:
    """Split a log into units: a TAB line (or a blank one) belongs to the unit above it."""
    out: list[Unit] = []
    start: int | None = None
    start_line = pos = 0
    line = 1
    while pos < len(data):
        if start is None or not data.startswith((b"\t", b"\n", b"\r\n"), pos):
            if start is not None:
                out.append(Unit(start, data[start:pos], start_line))
            start, start_line = pos, line
        nl = data.find(b"\n", pos)
        pos = len(data) if nl < 0 else nl + 1
        line += 1
    if start is not None:
        out.append(Unit(start, data[start:], start_line))
    return out


def record_json(u: Unit, lenient: bool = True) -> dict[str, Any] | None:
    """The JSON object of a unit's record line, if it has a glog prefix and one."""
    head = u.head
    m = PREFIX.match(head)
    if m is None:
        return None
    j = head.find(b"] {", m.end())
    if j < 0:
        return None
    raw = head[j + 2 :]
    try:
        meta = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if not lenient:
            return None
        try:
            meta = orjson.loads(raw.decode("utf-8", errors="replace"))
        except orjson.JSONDecodeError:
            return None
    return meta if isinstance(meta, dict) and meta else None


def payload_of(u: Unit) -> bytes | None:
    """The payload text as torch wrote it: one TAB stripped from each line, joined by LF."""
    lines = u.data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) < 2:
        return None
    return b"\n".join(ln[1:] for ln in lines[1:])


def valid(u: Unit) -> bool:
    """Whether a unit is a record exactly as torch writes one (CRLF line ends allowed)."""
    meta = record_json(u, lenient=False)
    if meta is None:
        return False
    md5 = meta.get("has_payload")
    payload = payload_of(u)
    if md5 is None:  # blank lines after a record are nothing to report
        return payload is None or not payload.replace(b"\r", b"").strip(b"\n")
    if payload is None or not isinstance(md5, str):
        return False
    lf = payload.replace(b"\r\n", b"\n").removesuffix(b"\r")
    for text in (payload, lf, payload.rstrip(b"\n"), lf.rstrip(b"\n")):
        if hashlib.md5(text, usedforsecurity=False).hexdigest() == md5:
            return True
    return False


def readable(u: Unit) -> bool:
    """Whether a reader can take a record from the unit (a prefix and a JSON object)."""
    return record_json(u) is not None


def unit_bytes(meta: dict[str, Any], payload: bytes | None, like: Unit) -> bytes:
    """A record line (with the prefix of `like`) and its payload, with a correct md5."""
    head = like.head
    j = head.find(b"] {")
    if payload is not None:
        meta = dict(meta, has_payload=hashlib.md5(payload, usedforsecurity=False).hexdigest())
    else:
        meta = {k: v for k, v in meta.items() if k != "has_payload"}
    out = head[: j + 2] + orjson.dumps(meta) + b"\n"
    if payload is not None:
        out += b"".join(b"\t" + ln + b"\n" for ln in payload.split(b"\n"))
    return out


def replace_unit(data: bytes, u: Unit, new: bytes) -> bytes:
    return data[: u.start] + new + data[u.end :]


# -- running tlview ------------------------------------------------------------------------------
def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    """The CLI in-process, as a user runs it (click's standalone mode, stderr apart)."""
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=True)


def run_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
    """The CLI as its own process, the way the console script starts it."""
    code = "import sys; from tlview.cli import run; sys.exit(run())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        cwd=cwd,
        env=env,
        check=False,
        timeout=300,
    )


def assert_clean_exit(res: Result, expected: int, what: str) -> None:
    """No traceback, no internal error, the documented status, and one line per failure."""
    err = res.stderr
    assert "Traceback" not in err and "internal error" not in err, f"{what}: {err[-2000:]}"
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{what}: raised {res.exception!r}") from res.exception
    assert res.exit_code == expected, f"{what}: exit {res.exit_code}, wanted {expected}: {err}"
    if expected not in (EXIT_OK, EXIT_STRICT):
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("tlview: "), f"{what}: stderr {err!r}"


def report_json(path: Path, *extra: str, expected: int = EXIT_OK, what: str = "") -> Any:
    """tlview's JSON report of PATH (None when it exits non-zero as expected)."""
    res = run("report", str(path), "--format", "json", *extra)
    assert_clean_exit(res, expected, what or str(path))
    if expected != EXIT_OK:
        return None
    doc = orjson.loads(res.stdout_bytes)
    assert doc["format"] == "tlview.report/2"
    return doc


# -- what a report says, as comparable facts ----------------------------------------------------
InputKey = tuple[Any, str, int, int]  # pid, compile key, describer id, tensor id
INPUT_FIELDS = (
    "size",
    "stride",
    "storage_offset",
    "dtype",
    "device",
    "requires_grad",
    "is_parameter",
    "fields",
)


@dataclass
class Facts:
    """Compiles and inputs of a JSON report, keyed by process and compile id."""

    compiles: dict[tuple[Any, str], str] = field(default_factory=dict)  # -> status
    inputs: dict[InputKey, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, doc: Any) -> Facts:
        f = cls()
        for c in every_attempt(doc):
            ck = (c["pid"], c["key"])
            f.compiles[ck] = c["status"]
            for i in c["inputs"]:
                key = (*ck, i["describer_id"], i["tensor_id"])
                f.inputs[key] = i
        return f


@dataclass
class Taint:
    """Tensor and storage ids a damaged but readable record may have redefined."""

    tensors: set[tuple[Any, int]] = field(default_factory=set)
    storages: set[tuple[Any, int]] = field(default_factory=set)

    def add(self, u: Unit) -> None:
        meta = record_json(u)
        if meta is None:
            return
        kind = next(iter(meta))
        body = meta[kind]
        if not isinstance(body, dict):
            return
        d, n = body.get("describer_id"), body.get("id")
        if not (isinstance(d, int) and isinstance(n, int)):
            return  # tlview drops a describe record without integer ids
        key = (d, n)
        if kind == "describe_tensor":
            self.tensors.add(key)
        elif kind == "describe_storage":
            self.storages.add(key)


def assert_facts_kept(
    expected: Facts, got: Facts, what: str, taint: Taint | None = None, status: bool = False
) -> None:
    """Every compile and every described input of `expected` is in `got`, as it was."""
    taint = taint or Taint()
    missing = [k for k in expected.compiles if k not in got.compiles]
    assert not missing, f"{what}: compiles lost: {missing[:10]}"
    if status:
        changed = {
            k: (v, got.compiles[k]) for k, v in expected.compiles.items() if got.compiles[k] != v
        }
        assert not changed, f"{what}: statuses changed: {changed}"
    for k, i in expected.inputs.items():
        if not i["fields"] or (i["describer_id"], i["tensor_id"]) in taint.tensors:
            continue
        g = got.inputs.get(k)
        assert g is not None, f"{what}: input {k} {i['sources']} lost"
        for name in INPUT_FIELDS:
            assert g[name] == i[name], f"{what}: input {k} {name}: {g[name]!r} != {i[name]!r}"
        assert set(i["sources"]) <= set(g["sources"]), f"{what}: input {k} sources lost"
        st = i["storage"]
        if i["storage_bytes"] is not None and st is not None:
            d, sid = st.split(":")
            if (int(d), int(sid)) not in taint.storages:
                assert g["storage_bytes"] == i["storage_bytes"], f"{what}: input {k} storage"


# -- the check every damaged copy goes through --------------------------------------------------
@dataclass
class Outcome:
    """What checking one damaged copy found, for tests that assert more."""

    doc: Any
    damaged: list[Unit]
    intact: list[Unit]


def check_damaged(
    original: bytes,
    damaged: bytes,
    tmp: Path,
    name: str,
    what: str,
    require_flag: bool = True,
) -> Outcome:
    """Report the damaged copy and check: status, no traceback, intact records kept, bad lines.

    A unit of the copy is intact when it is byte for byte (CRLF aside) a unit of the original.
    The report of the copy must hold everything the report of its intact units holds, list every
    bad line inside a damaged unit (never on an intact one), and flag each damaged unit that is
    not a record as torch writes one (when `require_flag`).
    """
    orig_units = Counter(u.norm for u in units(original))
    got_units = units(damaged)
    intact, damaged_units = [], []
    for u in got_units:
        if orig_units[u.norm] > 0:
            orig_units[u.norm] -= 1
            intact.append(u)
        else:
            damaged_units.append(u)
    case = tmp / what_dir(what)
    case.mkdir(parents=True)
    path = case / name
    path.write_bytes(damaged)
    expected_exit = EXIT_OK if any(readable(u) for u in got_units) else EXIT_NO_TRACE
    doc = report_json(path, expected=expected_exit, what=what)
    if doc is None:
        return Outcome(None, damaged_units, intact)
    # The report of the intact units alone: what must survive the damage.
    sub = case / "intact"
    sub.mkdir()
    (sub / name).write_bytes(b"".join(u.data for u in intact))
    any_record = any(readable(u) for u in intact)
    ref = report_json(sub / name, expected=EXIT_OK if any_record else EXIT_NO_TRACE, what=what)
    taint = Taint()
    for u in damaged_units:
        taint.add(u)
    if ref is not None:
        assert_facts_kept(Facts.of(ref), Facts.of(doc), what, taint)
        assert doc["stats"]["records"] >= ref["stats"]["records"], what
    check_bad_lines(doc, damaged_units, intact, ref, name, damaged, what, require_flag)
    return Outcome(doc, damaged_units, intact)


def what_dir(what: str) -> str:
    return re.sub(r"[^\w.-]+", "_", what)[:80]


def check_bad_lines(
    doc: Any,
    damaged_units: list[Unit],
    intact: list[Unit],
    ref: Any,
    name: str,
    data: bytes,
    what: str,
    require_flag: bool,
) -> None:
    """Bad lines name the file and a line inside a damaged unit, with a reason; none missed."""
    total_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    allowed: set[int] = set()
    for u in damaged_units:
        allowed.update(u.spans())
    if ref is not None and ref["bad_lines"]:
        # Lines that were bad in the undamaged records are still bad: map them back.
        line_of: dict[int, Unit] = {}
        n = 1
        for u in intact:
            for k in range(u.lines):
                line_of[n + k] = u
            n += u.lines
        for b in ref["bad_lines"]:
            hit = line_of.get(b["line"])
            if hit is not None:
                allowed.update(hit.spans())
    kept = doc["bad_lines"]
    assert doc["stats"]["bad_lines"] >= len(kept), what
    for b in kept:
        assert b["log"] == name, f"{what}: bad line names {b['log']!r}"
        assert isinstance(b["reason"], str) and b["reason"].strip(), f"{what}: {b}"
        assert 1 <= b["line"] <= max(total_lines, 1), f"{what}: line {b['line']} of {total_lines}"
        assert b["line"] in allowed, f"{what}: intact line accused: {b}"
    if not require_flag or len(kept) < doc["stats"]["bad_lines"]:
        return  # past the listing cap, lines are counted, not listed
    flagged = {b["line"] for b in kept}
    unchecked = unchecked_lines(doc)
    for u in damaged_units:
        if not u.head.strip() or valid(u):
            continue  # blank, or a record torch could have written: nothing to flag
        if u.line in unchecked:
            continue  # a payload the JSON only measured, as docs/formats.md says: md5_ok null
        assert flagged & set(u.spans()), (
            f"{what}: damaged lines {u.line}-{u.last_line} not reported: {u.data[:200]!r}"
        )


def unchecked_lines(doc: Any) -> set[int]:
    """Lines of payloads the report measured and never hashed (`md5_ok` null, docs/formats.md),
    wherever the JSON lists them (artifacts, graphs, guards, a restarted attempt's)."""
    out: set[int] = set()
    todo = [doc]
    while todo:
        o = todo.pop()
        if isinstance(o, dict):
            if "md5_ok" in o and o["md5_ok"] is None and o.get("md5") is not None:
                out.add(o["line"])
            todo.extend(o.values())
        elif isinstance(o, list):
            todo.extend(o)
    return out


# -- ways logs get damaged ----------------------------------------------------------------------
Damage = Callable[[bytes, random.Random], Iterator[tuple[str, bytes]]]


def _cut_points(u: Unit) -> dict[str, int]:
    """Offsets inside a unit where a crash can cut the log, by what they cut."""
    head_len = u.data.find(b"\n")
    head_len = len(u.data) if head_len < 0 else head_len
    m = PREFIX.match(u.data)
    j = u.data.find(b"] {")
    pts: dict[str, int] = {}
    if m is not None and m.end() > 2:
        pts["mid-prefix"] = u.start + m.end() // 2
    if j > 0 and head_len - j > 4:
        pts["mid-json"] = u.start + (j + 2 + head_len) // 2
        pts["end-of-json"] = u.start + head_len - 1
        pts["before-newline"] = u.start + head_len
    if head_len < len(u.data):
        pts["after-record-line"] = u.start + head_len + 1
        body = u.data[head_len + 1 :]
        if len(body) > 4:
            pts["mid-payload"] = u.start + head_len + 1 + len(body) // 2
            nl = body.find(b"\n", 1)
            if 0 < nl < len(body) - 2:
                pts["payload-line-boundary"] = u.start + head_len + 1 + nl + 1
    for k in range(len(u.data)):
        if u.data[k] >= 0xC0:
            pts["mid-utf8-char"] = u.start + k + 1
            break
    pts["unit-boundary"] = u.end
    return pts


def truncations(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """The log cut at every kind of place, inside a record with a payload and one without."""
    us = units(data)
    with_payload = [u for u in us[1:-1] if payload_of(u) is not None]
    without = [u for u in us[1:-1] if payload_of(u) is None]
    for label, pool in (("payload-record", with_payload), ("plain-record", without)):
        if not pool:
            continue
        u = rng.choice(pool)
        for kind, at in _cut_points(u).items():
            yield f"truncate {label} line {u.line} {kind}", data[:at]
            if kind != "unit-boundary":
                # cut there, then the log goes on (a killed writer, another process appending)
                yield f"splice {label} line {u.line} {kind}", data[:at] + data[u.end :]
                yield f"cut line {u.line} {kind}", data[:at] + b"\n" + data[u.end :]
    yield "truncate in first record", data[: max(1, len(us[0].head) // 2)]


def flips(data: bytes, rng: random.Random, count: int = 6) -> Iterator[tuple[str, bytes]]:
    """Single and multiple flipped bits at seeded places."""
    for k in range(count):
        buf = bytearray(data)
        where = []
        for _ in range(1 + k % 3):
            at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
            where.append(at)
        yield f"flip bits at {where}", bytes(buf)


def line_edits(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Deleted, duplicated and shuffled lines, and deleted or duplicated whole records."""
    lines = data.split(b"\n")
    n = len(lines) - 1  # the last element is what follows the final newline
    for k in range(2):
        drop = sorted(rng.sample(range(n), min(n, 1 + k * 4)))
        kept = [ln for i, ln in enumerate(lines) if i not in set(drop)]
        yield f"delete lines {[d + 1 for d in drop]}", b"\n".join(kept)
    for k in range(2):
        at = sorted(rng.sample(range(n), min(n, 1 + k * 3)))
        out = []
        for i, ln in enumerate(lines):
            out.append(ln)
            if i in at:
                out.append(ln)
        yield f"duplicate lines {[a + 1 for a in at]}", b"\n".join(out)
    first = rng.randrange(max(1, n - 8))
    window = lines[first : first + 8]
    rng.shuffle(window)
    yield (
        f"shuffle lines {first + 1}-{first + 8}",
        b"\n".join(lines[:first] + window + lines[first + 8 :]),
    )


def unit_edits(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Whole records deleted, duplicated or shuffled: every remaining record is intact."""
    us = units(data)
    drop = set(rng.sample(range(len(us)), min(len(us), 5)))
    yield "delete records", b"".join(u.data for i, u in enumerate(us) if i not in drop)
    out = []
    for u in us:
        out.append(u.data)
        if rng.random() < 0.1:
            out.append(u.data)
    yield "duplicate records", b"".join(out)
    order = list(us)
    at = rng.randrange(max(1, len(us) - 20))
    window = order[at : at + 20]
    rng.shuffle(window)
    order[at : at + 20] = window
    yield f"shuffle records {at}-{at + 20}", b"".join(u.data for u in order)


def byte_junk(data: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """NUL bytes (as a crashed file system leaves them), invalid UTF-8, CRLF line ends."""
    us = units(data)
    u = rng.choice(us[1:])
    yield "NUL run before a record", data[: u.start] + b"\0" * 5000 + data[u.start :]
    yield "NUL run replacing the tail", data[: len(data) - 3000] + b"\0" * 3000
    yield "NUL run at the start", b"\0" * 8192 + data
    mid = u.start + len(u.head) // 2
    yield "NUL inside a record line", data[:mid] + b"\0" + data[mid:]
    for bad in (b"\xff", b"\x80", b"\xe2\x82", b"\xed\xa0\x80"):
        j = u.data.find(b'"', u.data.find(b"] {") + 3)
        at = u.start + j + 1
        yield f"invalid UTF-8 {bad!r} in a JSON string", data[:at] + bad + data[at:]
    pay = [x for x in us if payload_of(x) is not None]
    if pay:
        p = rng.choice(pay)
        at = p.start + len(p.head) + 3
        yield "invalid UTF-8 in a payload", data[:at] + b"\xff\xfe" + data[at:]
    # what a program printed into the same file: text lines between records
    out, picks = data, sorted(rng.sample(range(1, len(us)), min(3, len(us) - 1)), reverse=True)
    for k, i in enumerate(picks):
        junk = (b"step 10 loss=0.25\n", b"\tindented text\n", b"Traceback (most recent...):\n")[k]
        out = out[: us[i].start] + junk + out[us[i].start :]
    yield "text lines between records", out
    yield "CRLF line ends", data.replace(b"\n", b"\r\n")
    half = data.split(b"\n")
    mixed = b"\n".join(ln + b"\r" if i % 2 and ln else ln for i, ln in enumerate(half))
    yield "CRLF on every other line", mixed


def interleave(a: bytes, b: bytes, rng: random.Random) -> bytes:
    """Records of two logs mixed in one file, each log's records in their own order."""
    ua, ub = units(a), units(b)
    if ua and not ua[-1].data.endswith(b"\n"):
        ua[-1] = Unit(ua[-1].start, ua[-1].data + b"\n", ua[-1].line)
    out, i, j = [], 0, 0
    while i < len(ua) or j < len(ub):
        if j >= len(ub) or (i < len(ua) and rng.random() < 0.5):
            out.append(ua[i].data)
            i += 1
        else:
            out.append(ub[j].data)
            j += 1
    return b"".join(out)


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def gunzip_prefix(data: bytes) -> bytes:
    """What can be decompressed from the start of a gzip stream cut short."""
    import zlib

    d = zlib.decompressobj(wbits=31)
    try:
        return d.decompress(data)
    except zlib.error:
        return b""


def doc_of(path: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    """`tlview report PATH --format json` in process, parsed; it must exit 0 cleanly."""
    res = run("report", str(path), "--format", "json", *extra, env=env)
    assert_clean_exit(res, EXIT_OK, str(path))
    return orjson.loads(res.stdout_bytes)
