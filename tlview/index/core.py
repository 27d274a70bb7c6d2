"""An indexer's state while reading, and the steps its record handlers share."""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tlview.aside import Loose
from tlview.index.compiles import Compiles
from tlview.index.digests import compared_kind, graph_md5
from tlview.index.finish import Finisher
from tlview.index.keep import Keep
from tlview.index.kinds import (
    FRAME_FIELDS,
    IN_FRAME,
    MAX_EVENTS,
    MAX_KINDS,
    METRICS_KINDS,
    is_int,
    parse_id,
    peek,
    wrong_fields,
)
from tlview.model import (
    BadLine,
    Compile,
    CompileId,
    Event,
    LogIndex,
    Payload,
    Phase,
    StackFrame,
    StorageDesc,
    TensorDesc,
)
from tlview.parse import MAX_BAD_KEPT, Record
from tlview.runtime.store import SHARED_MIN, Strings

# The types of a frame's (filename, line, name, loc) as torch writes them.
_PLAIN_FRAME = {(f, int, str, loc) for f in (str, int) for loc in (str, type(None))}
CLOSED_SHIFT = 20  # a later part's phase depth carries its count of earlier ends above this
MAX_SUBGRAPH = 200  # characters of a subgraph_name kept
MAX_LOOSE = MAX_KINDS  # (name, writer, compile, span) groups kept per log; the rest in one
OTHER_LOOSE = "(other records)"
MAX_LOGGED_FRAMES = 1 << 16  # frames found by their logged fields, per process (then forgotten)


@dataclass(slots=True)
class OpenState:
    """Per-compile state needed only while reading."""

    chromium: list[tuple[str, float, int]] = field(default_factory=list)  # open B events


class State:
    """What every record handler of an Indexer reads and writes, and the steps they share: the
    one state of one process's records, handed to each handler (handlers.py)."""

    def __init__(self, log: LogIndex, keep: Keep | None = None) -> None:
        self.log = log
        self.keep = keep or Keep()
        self.strings: dict[int, str] = {}
        self.shared = Strings()  # long strings kept once and pickled by reference
        self.open: dict[CompileId | None, OpenState] = {}
        # The last few describers' tensors and storages, for sources and links that name a
        # tensor described under another compile id (describers are process-wide).
        self.tensors: OrderedDict[int, dict[int, TensorDesc]] = OrderedDict()
        self.storages: OrderedDict[int, dict[int, StorageDesc]] = OrderedDict()
        self.started: set[CompileId | None] = set()  # compiles with a dynamo_start record
        # torch._dynamo.reset() starts compile ids over: a dynamo_start for an id already
        # started begins the process's next run, and ids from there on carry its number.
        self.run = 0
        self.in_run: dict[CompileId, CompileId] = {}  # id as logged -> id in the current run
        self.ended: set[CompileId] = set()  # compiles with compilation_metrics, this run
        self.fallback_strings: Callable[[int], str | None] | None = None
        self.interned: dict[str, str] = {}
        # One copy of each stack frame: every compile of a frame, and every recompile, logs the
        # same stack, and every compile keeps it.
        self.frames: dict[StackFrame, StackFrame] = {}
        # ... and found again by its fields as logged, unchecked: a well-typed frame seen
        # before needs neither a check nor a new StackFrame (a symbol's stack is one per record).
        self.logged_frames: dict[tuple[int | str, int, str, str | None], StackFrame] = {}
        # Reading a later part of a split log: events that end here began in the part before.
        self.part = False
        self.unmatched: list[tuple[CompileId | None, str, float]] = []
        self.closed: dict[CompileId | None, int] = {}  # unmatched ends so far, per compile
        # Reading a later part: each compile's first metrics as the event it is to one reader
        # when the part before has metrics for the compile too (see merge_compile).
        self.metrics_events: dict[CompileId | None, Event] = {}
        # ... and how many symbols each compile made before it described inputs in this part.
        self.undescribed: dict[CompileId | None, int] = {}
        self.bad_at = 0  # the line of the last bad line
        # Records outside any compile id, grouped (index/beside.py): each group's place in the
        # `-/-` compile's `loose` list, by (name, writer, compile open, span open).
        self.loose_at: dict[tuple[str, str | None, str | None, str | None], int] = {}
        self.compiles = Compiles(Finisher(log, self.started, self.closed))

    def __getstate__(self) -> dict[str, Any]:
        # Sent back by the reader of another part: what it keeps for cross-references while
        # reading is not needed any more.
        state = dict(self.__dict__)
        state["tensors"] = OrderedDict()
        state["storages"] = OrderedDict()
        state["interned"] = {}
        state["logged_frames"] = {}
        state["fallback_strings"] = None  # a closure over the reader's lookups
        return state

    def bad(self, rec: Record, reason: str) -> None:
        kept = self.log.bad_lines
        if rec.line == self.bad_at:  # one line is one bad line, whatever is wrong in it
            if kept and kept[-1].line == rec.line:
                kept[-1] = BadLine(self.log.name, rec.line, f"{kept[-1].reason}; {reason}")
            return
        self.bad_at = rec.line
        add_bad(self.log, BadLine(self.log.name, rec.line, f"{rec.kind}: {reason}"))

    def intern(self, s: str) -> str:
        """One copy of each repeated string (configs, versions, reprs) across compiles."""
        if len(s) > SHARED_MIN:
            return self.shared.intern(s)
        return self.interned.setdefault(s, s)

    def saw_version(self, version: str) -> None:
        """The torch version a record names: the log's is the first one it names (a torch_version
        record, a compile's metrics, a runnable graph's header), wherever that is."""
        if self.log.torch_version is None and version.strip():
            self.log.torch_version = self.intern(version.strip()[:64])

    def compile_for(self, rec: Record, cid: CompileId | None) -> Compile:
        c = self.compiles.get(cid)
        if c is None:
            c = Compile(id=cid, log=self.log.name, pid=self.log.pid, first_log_line=rec.line)
            c.start = rec.time
            if cid is None:
                c.status = "outside"
            self.compiles.put(cid, c)
        c.last_log_line = rec.line
        c.end = rec.time
        if rec.rank is not None and c.rank is None:
            c.rank = rec.rank
        return c

    def id_of(self, rec: Record) -> CompileId | None:
        """The compile a record belongs to, as named in this run: its context's ids, else (for
        metrics) the compile id its body names."""
        cid = rec.compile_id
        if cid is None:
            ctx = rec.meta
            if ("frame_id" in ctx) != ("frame_compile_id" in ctx):
                # torch writes both or neither: with one, the record is read as outside a compile.
                self.bad(rec, "frame_id and frame_compile_id come together: one is missing")
            if rec.kind in METRICS_KINDS and isinstance(rec.body, dict):
                cid = self.named_id(rec, rec.body.get("compile_id"))
        if cid is not None and self.run:
            cid = self.ran(cid)
        return cid

    def named_id(self, rec: Record, named: object) -> CompileId | None:
        """The compile id a record's field names as text; a bad line if it names none."""
        cid = parse_id(named)
        if cid is None and isinstance(named, str) and named != "None":
            self.bad(rec, f"compile_id is not a compile id: {peek(named)}")
        return cid

    def compile_of(self, rec: Record) -> Compile:
        """The compile a record belongs to, made at its first record."""
        cid = rec.compile_id
        if cid is None or self.run:  # most records name theirs, in the first run
            cid = self.id_of(rec)
        c = self.compile_for(rec, cid)
        if cid is None:
            self.loose(rec, c)
        return c

    def loose(self, rec: Record, c: Compile) -> None:
        """Count a record outside any compile id by what wrote it, and note the compile whose
        span alone was open when it was written (same process: certain)."""
        frames = self.stack(rec.meta.get("stack"))
        writer = str(frames[-1]) if frames else None
        inside, (span, began) = self.open_compile(), self.open_span()
        key = (record_name(rec), writer, inside, f"{span}@{began}" if span else None)
        at = self.loose_at.get(key)
        if at is None and len(self.loose_at) >= MAX_LOOSE:
            key = (OTHER_LOOSE, None, None, None)
            at = self.loose_at.get(key)
        if at is not None and at < len(c.loose):
            c.loose[at].count += 1
            return
        self.loose_at[key] = len(c.loose)
        user_frame = innermost_user(frames)
        user = f"{user_frame.file}:{user_frame.line}" if user_frame else None
        torch = bool(frames) and is_torch_file(frames[-1].file)
        if key[0] == OTHER_LOOSE:
            writer = user = inside = span = began = None
        c.loose.append(Loose(key[0], writer, torch, user, inside, span, 1, rec.line, began))

    def open_compile(self) -> str | None:
        """The compile whose chromium span is open now, when exactly one is."""
        open_ = [cid for cid, st in self.open.items() if cid is not None and st.chromium]
        return str(open_[0]) if len(open_) == 1 else None

    def open_span(self) -> tuple[str | None, float | None]:
        """The outermost span open now outside any compile id (fullgraph_capture, ...), and
        when it began."""
        st = self.open.get(None)
        if st is None or not st.chromium:
            return None, None
        name, began, _ = st.chromium[0]
        return name, began

    def filename(self, v: object) -> str:
        if isinstance(v, str):
            return v
        if is_int(v):
            name = self.strings.get(v)
            if name is None and self.fallback_strings is not None:
                name = self.fallback_strings(v)
            return name if name is not None else f"<file {v}>"
        return "?"

    def stack(self, v: object, rec: Record | None = None, field: str = "stack") -> list[StackFrame]:
        """The frames of a logged stack; with `rec`, a frame of the wrong shape is a bad line."""
        if not isinstance(v, list):
            if v is not None and rec is not None:
                self.bad(rec, f"{field} is not a list of frames: {peek(v)}")
            return []
        out = []
        problem = None
        seen = self.logged_frames
        for k, fr in enumerate(v):
            if type(fr) is dict:
                f, line, name, loc = key = (
                    fr.get("filename"),
                    fr.get("line"),
                    fr.get("name"),
                    fr.get("loc"),
                )
                # Exactly the types torch writes (no bool for an int): nothing to check.
                if (type(f), type(line), type(name), type(loc)) in _PLAIN_FRAME:
                    out.append(seen.get(key) or self._logged_frame(key))  # type: ignore[arg-type]
                    continue
            sf, wrong = self._odd_frame(fr, f"{field}[{k}]")
            problem = problem or wrong
            if sf is not None:
                out.append(sf)
        if problem is not None and rec is not None:
            self.bad(rec, problem)
        return out

    def _logged_frame(self, key: tuple[int | str, int, str, str | None]) -> StackFrame:
        """A well-typed frame met for the first time: one copy of it, found again by its key."""
        f, line, name, loc = key
        sf = StackFrame(self.filename(f), line, name, loc)
        sf = self.frames.setdefault(sf, sf)
        if type(f) is str or f in self.strings:  # an unknown index: not yet
            if len(self.logged_frames) >= MAX_LOGGED_FRAMES:
                self.logged_frames.clear()
            self.logged_frames[key] = sf
        return sf

    def _odd_frame(self, fr: object, where: str) -> tuple[StackFrame | None, str | None]:
        """A frame of another shape than torch writes: as much of it as is there, and what is
        wrong with it."""
        if not isinstance(fr, dict):
            return None, f"{where} is not a frame object: {peek(fr)}"
        line, loc, name = fr.get("line"), fr.get("loc"), fr.get("name", "?")
        problem = wrong_fields(fr, FRAME_FIELDS, f"{where}.", IN_FRAME)
        sf = StackFrame(
            self.filename(fr.get("filename")),
            line if isinstance(line, int) and not isinstance(line, bool) else 0,
            name if isinstance(name, str) else "?",
            loc if isinstance(loc, str) else None,
        )
        return self.frames.setdefault(sf, sf), problem

    def user_frame(self, v: object, rec: Record | None = None) -> StackFrame | None:
        """The innermost frame of a stack that is not torch's own code."""
        frames = self.stack(v, rec)
        return innermost_user(frames) or (frames[0] if frames else None)

    def payload(
        self,
        rec: Record,
        kind: str,
        c: Compile,
        meta: dict[str, Any] | None = None,
        keep: bool = True,
    ) -> Payload:
        if self.keep.checks(kind, c.key):
            # Used: a text a renderer may show is checked whatever the budget (the same
            # payloads whether one process reads the log or two).
            rec.check()
        size = rec.payload_size
        limit = self.keep.take(kind, c.key, size, rec.line) if keep and rec.present else 0
        text = rec.text(limit) if limit else None
        compared = compared_kind(kind, meta) if self.keep.ranks else None
        data = rec.payload if self.keep.wants_data(kind, c.key, rec.line) else None
        return Payload(
            kind=kind,
            line=rec.line,
            bytes=size,
            lines=rec.payload_lines,
            md5=_text_or_none(rec.meta.get("has_payload")),
            ok=rec.ok,
            encoding=_text_or_none(
                rec.body.get("encoding") if isinstance(rec.body, dict) else None
            ),
            text=text,
            cut=max(0, size - limit) if text is not None else 0,
            meta=meta,
            masked_md5=graph_md5(compared, rec.payload) if compared is not None else None,
            data=data,
            checked=rec.payload_checked,
            subgraph=self.subgraph(rec),
        )

    def subgraph(self, rec: Record) -> str | None:
        """The record's `subgraph_name` (regional inductor's region), cut and kept once; a
        value of another type is a bad line."""
        v = rec.meta.get("subgraph_name")
        if v is None or isinstance(v, str):
            return None if v is None else self.intern(v[:MAX_SUBGRAPH])
        self.bad(rec, f"subgraph_name is not a string: {peek(v)}")
        return None

    def ran(self, cid: CompileId) -> CompileId:
        """A logged id as the id of its compile in the current run."""
        got = self.in_run.get(cid)
        if got is None:
            got = self.in_run[cid] = cid.in_run(self.run)
        return got

    def next_run(self, cid: CompileId) -> CompileId:
        """Begin the process's next run at the dynamo_start of `cid`, started and ended before."""
        self.run += 1
        self.in_run.clear()
        self.ended.clear()
        new = self.ran(cid.in_run(0))
        # Events begun since the last compile of `cid` ended (dynamo, entire_frame_compile)
        # are this compile's: they come before its dynamo_start.
        st = self.open.pop(cid, None)
        if st is not None:
            self.open[new] = st
        return new

    def event(self, rec: Record, c: Compile, kind: str, summary: str, caller: bool = False) -> None:
        if len(c.events) >= MAX_EVENTS:
            c.events_dropped += 1
            return
        c.events.append(self.as_event(rec, kind, summary, caller))

    def as_event(
        self, rec: Record, kind: str, summary: str | dict[str, Any], caller: bool = False
    ) -> Event:
        """The record as an event, at its user_stack's frame; with `caller`, else at the user's
        innermost frame of the record's own stack (torch's frames left out)."""
        if isinstance(summary, dict):
            summary = metrics_summary(summary)
        where = None
        if isinstance(rec.body, dict):
            user = self.stack(rec.body.get("user_stack"), rec, "user_stack")
            where = user_line(user)
        if where is None and caller:
            frames = self.stack(rec.meta.get("stack"), rec)
            where = innermost_user(frames)
        return Event(kind, rec.line, summary, where)

    def small_dict(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            k: self.intern(v) if isinstance(v, str) and len(v) > 64 else v for k, v in body.items()
        }

    def end_event(
        self, cid: CompileId | None, name: str, ts: float, c: Compile | None = None
    ) -> bool:
        """Close the begun event `name` as a phase; False if nothing had begun it."""
        for owner in [cid] if cid is None or not cid.attempt else self._owners(cid):
            ost = self.open.get(owner)
            begun = _last_begun(ost.chromium, name) if ost is not None else None
            if ost is None or begun is None:
                continue
            _, t0, depth = ost.chromium.pop(begun)
            if not ost.chromium:
                self.open.pop(owner, None)
            target = self.compiles.get(owner) or c
            if target is not None:
                add_phase(target, Phase(name, t0, ts - t0, depth))
            return True
        return False

    def _owners(self, cid: CompileId) -> list[CompileId | None]:
        """Where an event that ends in a later attempt may have begun: an event begun before a
        restart (dynamo, entire_frame_compile) ends in a later attempt, and is the earlier one's."""
        return [cid, *(o for o in self.open if o is not None and o != cid and o.base == cid.base)]


def _last_begun(begun: list[tuple[str, float, int]], name: str) -> int | None:
    """The index of the latest begun event of this name, if any."""
    return next((k for k in range(len(begun) - 1, -1, -1) if begun[k][0] == name), None)


def _text_or_none(v: object) -> str | None:
    """A field the log should give as a string: None when it gives anything else."""
    return v if isinstance(v, str) else None


def record_name(rec: Record) -> str:
    """A record's name: its kind, or an artifact's (or a graph dump's) own name."""
    body = rec.body
    if rec.kind in ("artifact", "graph_dump") and isinstance(body, dict):
        name = body.get("name")
        if isinstance(name, str):
            return name[:200]
    return rec.kind


def add_bad(log: LogIndex, bad: BadLine) -> None:
    log.bad_count += 1
    if len(log.bad_lines) < MAX_BAD_KEPT:
        log.bad_lines.append(bad)


def innermost_user(frames: list[StackFrame]) -> StackFrame | None:
    """The innermost frame of a stack outside torch's own code (None: all of it is torch's)."""
    return next((f for f in reversed(frames) if not is_torch_file(f.file)), None)


def user_line(frames: list[StackFrame]) -> StackFrame | None:
    """The user's line of a user_stack: its innermost frame outside torch (a higher-order op such
    as while_loop or invoke_subgraph leaves torch's own frames below the user's), else the last."""
    return innermost_user(frames) or (frames[-1] if frames else None)


# torch's own code, by a frame's file: an install (site- or dist-packages), a checkout or a
# bundle that keeps torch's layout (its packages and modules as torch 2.13 ships them:
# `.../pytorch/torch/_dynamo/`, `.../torch/jit/`, `.../torch/_tensor.py`, a buck link-tree's
# `torch/_inductor/`), or code torch generates and runs (`<eval_with_key>.3`,
# `<string>`); code typed at a prompt (`<stdin>`, IPython's `<ipython-input-...>`) is the user's.
_TORCH_FILE = re.compile(
    r"(?:^|[/\\])(?:site|dist)-packages[/\\]torch[/\\]"
    r"|(?:^|[/\\])torch[/\\](?:_[A-Za-z]\w*|accelerator|amp|ao|autograd|backends|compiler"
    r"|contrib|cpu|cuda|distributed|distributions|export|fft|func|futures|fx|jit|library|linalg"
    r"|masked|monitor|mps|mtia|multiprocessing|nativert|nested|nn|numa|onnx|optim|package"
    r"|profiler|quantization|signal|sparse|special|testing|utils|xpu)[/\\]"
    r"|(?:^|[/\\])torch[/\\](?:_\w+|functional|hub|library|overrides|quasirandom|random"
    r"|return_types|serialization|storage|torch_version|types|version)\.py$"
    r"|^<(?!stdin>|ipython-input-)"
)


@functools.lru_cache(maxsize=1 << 12)  # a log names few files, each in many frames
def is_torch_file(path: str) -> bool:
    """Whether a frame's file is torch's own code, not the user's: the one rule of every
    stage, so a frame the index skips as torch's is skipped alike by annotations and pages."""
    return _TORCH_FILE.search(path) is not None


def add_phase(c: Compile, p: Phase) -> None:
    if len(c.phases) < MAX_EVENTS:
        c.phases.append(p)
    else:
        c.events_dropped += 1


def metrics_summary(body: dict[str, Any]) -> str:
    keys = ("co_name", "fail_type", "fail_reason", "entire_frame_compile_time_s")
    return ", ".join(f"{k}={peek(body.get(k), 200)}" for k in keys if body.get(k) is not None)
