"""Compare two runs: frames matched by function and place (ids shift between runs), then what changed.

Matching, in order: the same (process, function, file, first line); the same function and file
name at the same line (the checkout moved); the same function and file name when only one frame
on each side has them (lines moved); resume functions (`torch_dynamo_resume_in_f_at_13`) by the
function they resume when their line moved. The nth compile of a frame is matched with the nth
compile of its match. Times differing by less than the noise floor are never a change.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tlview.analyze.breaks import break_title
from tlview.analyze.changes import change_text
from tlview.analyze.compiles import PHASE_NAMES
from tlview.analyze.phases import span_totals
from tlview.analyze.summary import Overview, frame_label, overview, short, short_place
from tlview.index.recompiles import input_changes, limit_text
from tlview.model import Compile, CompileId, InputChange, LogIndex, Report, severity

TIME_NOISE_S = 1.0  # compile-time differences smaller than this are noise
TIME_NOISE_REL = 0.2  # ... and so are those smaller than this fraction of BASE
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_BIG_NUMBER = re.compile(r"\b\d{9,}\b")  # type ids and object ids in guard text
_ID_PREFIX = re.compile(r"^\s*!?\d+/\d+(?:_\d+)?:\s*")
# A local as torch 2.6 and older name it in a guard (`tensor 'L['x']'`, `L['n'] == 2`), and later
# torch (2.8 on) as `x`: compared by the name alone.
_LOCAL = re.compile(r"\bL\['([A-Za-z_]\w*)'\]")
_RESUME_AT = re.compile(r"^(torch_dynamo_resume_in_.+)_at_\d+$")


@dataclass(frozen=True, slots=True)
class FrameKey:
    """What identifies a frame across runs: where its code is, in which process."""

    process: str  # "" for one process, "rank N", or "process N" in start order
    function: str
    file: str
    line: int | None

    def __str__(self) -> str:
        text = frame_label(self.function, self.file, self.line)
        return f"{self.process}: {text}" if self.process else text


@dataclass(slots=True)
class Frame:
    """One frame of one run: its compiles (final attempts) and every attempt, in order."""

    key: FrameKey
    compiles: list[Compile] = field(default_factory=list)
    attempts: list[Compile] = field(default_factory=list)


@dataclass(slots=True)
class ComparedCompile:
    """The nth compile of a frame in both runs (one side None when a run compiled it less)."""

    index: int
    base: Compile | None
    new: Compile | None
    input_changes: list[InputChange] = field(default_factory=list)
    compared: bool = False  # both described their inputs


@dataclass(slots=True)
class FrameDiff:
    """A frame of BASE and its match in NEW (one of them None: the frame came or went)."""

    base: Frame | None
    new: Frame | None
    match: str  # exact | moved | renamed | added | removed
    compiles: list[ComparedCompile] = field(default_factory=list)

    @property
    def key(self) -> FrameKey:
        side = self.new or self.base
        assert side is not None
        return side.key


@dataclass(slots=True)
class Figure:
    """One measure of both runs."""

    name: str
    base: float | None
    new: float | None
    changed: bool = False  # differs beyond noise
    seconds: bool = False  # a time, compared with the noise floor
    more_is_worse: bool = True

    @property
    def delta(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        return self.new - self.base

    def value(self, v: float | None) -> str:
        """One run's value as every format writes it: seconds to 2 places, counts whole."""
        if v is None:
            return "-"
        return f"{v:.2f}" if self.seconds else str(int(v))


@dataclass(slots=True)
class CacheFigure:
    """Hits, misses and bypasses of one cache in both runs."""

    cache: str
    base: dict[str, int]
    new: dict[str, int]

    @staticmethod
    def rate(counts: dict[str, int]) -> float | None:
        """Hits of the lookups (a disabled cache looked nothing up)."""
        total = sum(v for k, v in counts.items() if k != "disabled")
        return None if not total else counts.get("hit", 0) / total


@dataclass(slots=True)
class Change:
    """One thing NEW does differently from BASE, said once."""

    kind: str  # see KINDS
    frame: str  # the frame it is about ("" for the whole run)
    what: str  # in words
    before: Any = None
    after: Any = None
    worse: bool | None = None  # NEW is worse (True), better (False), or neither (None)
    base_compile: str | None = None
    new_compile: str | None = None
    input: InputChange | None = None  # for kind "input"


CHANGE_KINDS = (
    "frame-added",
    "frame-removed",
    "compiles",
    "graph-break-new",
    "graph-break-gone",
    "graph-break-moved",
    "graph-break-count",
    "recompile-reason-new",
    "recompile-reason-gone",
    "failure-new",
    "failure-gone",
    "status",
    "graph-ops",
    "input",
    "compile-time",
    "cache",
)


@dataclass(slots=True)
class Diff:
    """Everything `tlview diff` shows, computed once for every renderer and for the gate."""

    base_path: str
    new_path: str
    base_torch: str | None
    new_torch: str | None
    base: Overview
    new: Overview
    figures: list[Figure]
    phases: list[Figure]
    cache: list[CacheFigure]
    frames: list[FrameDiff]
    changes: list[Change]
    notes: list[str] = field(default_factory=list)
    # Each compile phase's time in both runs, by span name (analyze/phases.span_totals):
    # what `--fail-on phase:NAME` compares.
    spans: dict[str, Figure] = field(default_factory=dict)


def norm(text: str) -> str:
    """Text from a log with the parts that change from run to run (ids, addresses) taken out."""
    text = _ID_PREFIX.sub("", text)
    text = _ADDRESS.sub("0x…", text)
    return _BIG_NUMBER.sub("…", text).strip()


def _processes(report: Report, many: bool) -> dict[int, str]:
    """A label per log that names the same process in another run: its rank, or start order.
    None when both runs are one process each: those pair up, whatever their ranks."""
    if not many:
        return {id(lg): "" for lg in report.logs}
    order = sorted(report.logs, key=lambda lg: (lg.first_time or "", lg.name))
    return {
        id(lg): f"rank {lg.rank}" if lg.rank is not None else f"process {order.index(lg)}"
        for lg in report.logs
    }


def frames_of(report: Report, many: bool = False) -> list[Frame]:
    """The frames of a run, each with its compiles in order (MANY: label processes)."""
    labels = _processes(report, many or len(report.logs) > 1)
    out: list[Frame] = []
    for log in report.logs:
        out.extend(_log_frames(log, labels[id(log)]))
    return out


def _log_frames(log: LogIndex, process: str) -> list[Frame]:
    groups: dict[tuple[int, int | None, int | None], list[Compile]] = {}
    for c in log.compiles:
        if c.id is None:
            continue
        ag = c.id.autograd if c.id.frame is None else None
        groups.setdefault((c.id.run, ag, c.id.frame), []).append(c)
    out: list[Frame] = []
    for (_, autograd, frame), cs in groups.items():
        cs.sort(key=lambda c: c.id.sort_key if c.id else (0, 0, 0, 0))
        key = FrameKey(process, *_frame_name(cs, autograd, frame))
        finals = [c for c in cs if c.status != "restarted"]
        out.append(Frame(key, finals, cs))
    return out


def _frame_name(
    cs: list[Compile], autograd: int | None, frame: int | None
) -> tuple[str, str, int | None]:
    """(function, file, line) a frame is known by: its first named compile's, else its id."""
    if frame is None:
        return f"<compiled autograd {autograd}>", "", None
    named = next((c for c in cs if c.function), None)
    if named is None:
        return f"<frame {frame}>", "", None
    return named.function or "", named.file or "", named.source_line


def _merge(frames: list[Frame]) -> dict[FrameKey, Frame]:
    """One frame per key (the same code compiled as two frames, e.g. after a reset, is one)."""
    out: dict[FrameKey, Frame] = {}
    for f in frames:
        if f.key in out:
            out[f.key].compiles.extend(f.compiles)
            out[f.key].attempts.extend(f.attempts)
        else:
            out[f.key] = Frame(f.key, list(f.compiles), list(f.attempts))
    return out


def match(base: list[Frame], new: list[Frame]) -> list[FrameDiff]:
    """Pair the frames of two runs, closest key first; the rest came or went."""
    left, right = _merge(base), _merge(new)
    pairs: list[FrameDiff] = []

    def take(how: str, keyfn: Any, unique: bool) -> None:
        lk: dict[Any, list[FrameKey]] = {}
        rk: dict[Any, list[FrameKey]] = {}
        for k in left:
            lk.setdefault(keyfn(k), []).append(k)
        for k in right:
            rk.setdefault(keyfn(k), []).append(k)
        for kk, ls in lk.items():
            rs = rk.get(kk)
            if not rs or kk is None:
                continue
            if unique and (len(ls) != 1 or len(rs) != 1):
                continue
            for a, b in zip(ls, rs, strict=False):
                pairs.append(FrameDiff(left.pop(a), right.pop(b), how))

    take("exact", lambda k: k, False)
    take("moved", lambda k: (k.process, k.function, short(k.file), k.line), False)
    take("moved", lambda k: (k.process, k.function, short(k.file)), True)
    take("renamed", _resume_key, True)
    for f in left.values():
        pairs.append(FrameDiff(f, None, "removed"))
    for f in right.values():
        pairs.append(FrameDiff(None, f, "added"))
    for p in pairs:
        p.compiles = _pair_compiles(p)
    pairs.sort(key=lambda p: (p.key.process, _first_line(p)))
    return pairs


def _resume_key(k: FrameKey) -> tuple[str, str, str] | None:
    m = _RESUME_AT.match(k.function)
    return (k.process, m.group(1), short(k.file)) if m else None


def _first_line(p: FrameDiff) -> int:
    side = p.new or p.base
    assert side is not None
    return min((c.first_log_line for c in side.attempts), default=0)


def _described(frame: Frame) -> dict[CompileId, Compile]:
    """Per compile of FRAME (its base id), the attempt that described its inputs last (a
    restart describes again): one pass over the frame's attempts, however many there are."""
    out: dict[CompileId, Compile] = {}
    for a in frame.attempts:
        if a.id is not None and a.input_sets:
            out[a.id.base] = a  # attempts are in order: the last one wins
    return out


def _pair_compiles(p: FrameDiff) -> list[ComparedCompile]:
    bs = p.base.compiles if p.base else []
    ns = p.new.compiles if p.new else []
    both = p.base is not None and p.new is not None
    left = _described(p.base) if both and p.base else {}
    right = _described(p.new) if both and p.new else {}
    out = []
    for i in range(max(len(bs), len(ns))):
        cc = ComparedCompile(i, bs[i] if i < len(bs) else None, ns[i] if i < len(ns) else None)
        _compare_inputs(cc, left, right)
        out.append(cc)
    return out


def _compare_inputs(
    cc: ComparedCompile, left: dict[CompileId, Compile], right: dict[CompileId, Compile]
) -> None:
    """The input changes of two paired compiles, when both described their inputs."""
    b, n = cc.base, cc.new
    if b is None or n is None or b.id is None or n.id is None:
        return
    db, dn = left.get(b.id.base), right.get(n.id.base)
    if db is not None and dn is not None:
        cc.input_changes = input_changes(db, dn)
        cc.compared = True


# -- what changed -------------------------------------------------------------------------------


def _breaks(f: Frame | None) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for c in f.attempts if f else []:
        for g in c.graph_breaks:
            out[(norm(break_title(g.reason)), short_place(g.where or ""))] += 1
    return out


def _reasons(f: Frame | None) -> dict[str, str]:
    """The guards that failed in a frame, by what they check (torch 2.8 adds no comment after
    a guard, later torch its source line), each as it is shown."""
    out: dict[str, str] = {}
    for c in f.compiles if f else []:
        reasons = c.recompile.reasons if c.recompile is not None else c.recompile_reasons
        for r in reasons:
            shown = _guard(r)
            out.setdefault(_GUARD_COMMENT.sub("", shown), shown)
    return out


# The values a failed guard saw: "expected 5, actual 9" (the inputs' changes say them).
_GUARD_VALUES = re.compile(r"\b(expected|actual) -?\d+")


# A source line a guard's comment names: "# new/n03.py:33 in f". torch cuts the path to what
# differs from its own install's, so the same file reads differently in another environment.
# It starts where a path can (the lookbehind): a search that started again at every character of
# a long path would read the path once per character.
_GUARD_WHERE = re.compile(r"(?<![^\s#'\"()])[^\s#'\"()]*/([^/\s'\"()]+:\d+ in )")


# The comment torch 2.9 and newer write after a guard: its source line and where it is.
_GUARD_COMMENT = re.compile(r"\s+#\s.*")


def _guard(reason: str) -> str:
    """Which guard failed, the same in two runs: its first line (not the stack torch adds,
    with the paths of one checkout), without the values it saw or the folders of its files."""
    first = _LOCAL.sub(r"\1", reason.strip().partition("\n")[0])
    return _GUARD_WHERE.sub(r"\1", _GUARD_VALUES.sub(r"\1 …", norm(first)))


def failure(c: Compile) -> str | None:
    """A failed or unfinished compile in one line, the same in both runs."""
    if c.status == "incomplete":
        return "never finished (the run stopped during this compile)"
    if c.status != "failed":
        return None
    limit = limit_text(c)  # each torch words it its own way (Unsupported, RecompileLimitExceeded)
    if limit is not None:
        # By the limit's name alone: torch 2.7 renamed cache_size_limit, and older torch does
        # not log its value (the report says it where the log does).
        name = limit.partition(" (")[0].replace("cache_size_limit", "recompile_limit")
        return f"hit {name}: dynamo stopped compiling the frame"
    first = (c.fail_reason or "").strip().splitlines()
    return f"{c.fail_type}: {norm(first[0])}" if first else str(c.fail_type)


def _failures(f: Frame | None) -> Counter[str]:
    return Counter(x for c in (f.compiles if f else []) if (x := failure(c)) is not None)


def _counter_changes(
    out: list[Change], frame: str, base: Counter[Any], new: Counter[Any], kinds: tuple[str, str]
) -> None:
    for k in new:
        if k not in base:
            out.append(Change(kinds[0], frame, str(k), None, new[k], True))
    for k in base:
        if k not in new:
            out.append(Change(kinds[1], frame, str(k), base[k], None, False))


def frame_changes(p: FrameDiff) -> list[Change]:
    """What changed in one frame: its coming or going, breaks, reasons, failures, compiles."""
    name = str(p.key)
    out = _presence(p, name) + _break_changes(p, name) + _reason_changes(p, name)
    _counter_changes(
        out, name, _failures(p.base), _failures(p.new), ("failure-new", "failure-gone")
    )
    for cc in p.compiles:
        out.extend(_compile_changes(name, cc))
    return out


def _presence(p: FrameDiff, name: str) -> list[Change]:
    """A frame only one run compiled."""
    if p.match == "added":
        n = len(p.new.compiles) if p.new else 0
        return [Change("frame-added", name, f"{n} compile(s)", None, n)]
    if p.match == "removed":
        n = len(p.base.compiles) if p.base else 0
        return [Change("frame-removed", name, f"{n} compile(s)", n, None)]
    return []


def _break_changes(p: FrameDiff, name: str) -> list[Change]:
    """Graph breaks new, gone, moved (one title at another place) or more or fewer."""
    out = []
    b_br, n_br = _breaks(p.base), _breaks(p.new)
    new_breaks = [k for k in n_br if k not in b_br]
    gone_breaks = [k for k in b_br if k not in n_br]
    for k in list(new_breaks):
        moved = [g for g in gone_breaks if g[0] == k[0]]
        if len(moved) == 1:
            g = moved[0]
            out.append(Change("graph-break-moved", name, k[0], g[1], k[1], None))
            new_breaks.remove(k)
            gone_breaks.remove(g)
    out += [Change("graph-break-new", name, k[0], None, k[1], True) for k in new_breaks]
    out += [Change("graph-break-gone", name, k[0], k[1], None, False) for k in gone_breaks]
    for k in b_br.keys() & n_br.keys():
        b, n = b_br[k], n_br[k]
        if b != n:
            out.append(Change("graph-break-count", name, f"{k[0]} at {k[1]}", b, n, n > b))
    return out


def _reason_changes(p: FrameDiff, name: str) -> list[Change]:
    """More or fewer compiles of a frame, and failed guards new or gone."""
    if not (p.base and p.new):
        return []
    out = []
    bn, nn = len(p.base.compiles), len(p.new.compiles)
    if bn != nn:
        out.append(Change("compiles", name, f"{bn} -> {nn} compiles", bn, nn, nn > bn))
    b_rs, n_rs = _reasons(p.base), _reasons(p.new)
    for guard in sorted(n_rs.keys() - b_rs.keys()):
        out.append(Change("recompile-reason-new", name, n_rs[guard], None, n_rs[guard], True))
    for guard in sorted(b_rs.keys() - n_rs.keys()):
        out.append(Change("recompile-reason-gone", name, b_rs[guard], b_rs[guard], None, False))
    return out


def _compile_changes(frame: str, cc: ComparedCompile) -> list[Change]:
    b, n = cc.base, cc.new
    if b is None or n is None:
        return []
    out: list[Change] = []
    keys: dict[str, Any] = {"base_compile": b.key, "new_compile": n.key}
    label = f"compile #{cc.index + 1}"
    if b.status != n.status:
        worse = severity(n.status) < severity(b.status)
        out.append(Change("status", frame, label, b.status, n.status, worse, **keys))
    if b.graph_ops != n.graph_ops:
        out.append(Change("graph-ops", frame, label, b.graph_ops, n.graph_ops, None, **keys))
    for x in cc.input_changes:
        out.append(
            Change(
                "input",
                frame,
                f"{label}: {x.source} {x.field}",
                x.before,
                x.after,
                None,
                input=x,
                **keys,
            )
        )
    return out


# Lower is worse: failed < incomplete < graph_break < empty < ok.
def beyond_noise(base: float, new: float) -> bool:
    """A time difference that is more than timing noise (TIME_NOISE_S and TIME_NOISE_REL)."""
    d = abs(new - base)
    return d >= TIME_NOISE_S and d >= TIME_NOISE_REL * abs(base)


def _cache(report: Report) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in report.attempts:
        for e in c.cache:
            d = out.setdefault(e.cache, {})
            d[e.outcome] = d.get(e.outcome, 0) + 1
    return out


def _ops(report: Report) -> int:
    return sum(
        c.graph_ops or 0 for c in report.attempts if c.id is not None and c.status != "restarted"
    )


def _figures(base: Report, new: Report, ob: Overview, on: Overview) -> list[Figure]:
    """The headline figures of both runs, each marked changed beyond noise or not."""
    figures = [
        Figure("compiles", ob.compiles, on.compiles),
        Figure("graph breaks", ob.graph_breaks, on.graph_breaks),
        Figure("recompiles", ob.recompiles, on.recompiles),
        Figure("failures", ob.failures + ob.incomplete, on.failures + on.incomplete),
        Figure("restarts", ob.restarts, on.restarts),
        Figure("graph ops", _ops(base), _ops(new), more_is_worse=False),
        Figure(
            "compile time (s)",
            round(ob.compile_time_s, 6),
            round(on.compile_time_s, 6),
            seconds=True,
        ),
    ]
    for f in figures:
        if f.base is not None and f.new is not None:
            f.changed = beyond_noise(f.base, f.new) if f.seconds else f.base != f.new
    return figures


def _phases(ob: Overview, on: Overview) -> list[Figure]:
    """Each phase of compile time (summary.PHASE_NAMES) either run logged."""
    pb, pn = ob.phases, on.phases
    out = []
    for name in PHASE_NAMES:
        if name in pb or name in pn:
            b, n = round(pb.get(name, 0.0), 6), round(pn.get(name, 0.0), 6)
            out.append(Figure(name, b, n, beyond_noise(b, n), seconds=True))
    return out


def _run_changes(phases: list[Figure], cache: list[CacheFigure]) -> list[Change]:
    """The changes of the whole run: a phase's time, a cache's hit rate."""
    out = [
        Change(
            "compile-time", "", f"{ph.name} compile time (s)", ph.base, ph.new, (ph.delta or 0) > 0
        )
        for ph in phases
        if ph.changed
    ]
    for cf in cache:
        rb, rn = CacheFigure.rate(cf.base), CacheFigure.rate(cf.new)
        if cf.base != cf.new and rb != rn:
            worse = None if rb is None or rn is None else rn < rb
            out.append(Change("cache", "", f"{cf.cache} cache hit rate", rb, rn, worse))
    return out


def _run_notes(base: Report, new: Report) -> list[str]:
    """What sets the two runs apart before any compile: processes, ranks, torch."""
    notes = []
    lb, ln = {lg.rank for lg in base.logs}, {lg.rank for lg in new.logs}
    if len(base.logs) != len(new.logs):
        notes.append(f"BASE has {len(base.logs)} process log(s), NEW has {len(new.logs)}")
    elif lb != ln:
        notes.append("the two runs have different ranks")
    if base.torch_version != new.torch_version:
        notes.append(f"torch {base.torch_version or 'unknown'} -> {new.torch_version or 'unknown'}")
    return notes


def compare(base: Report, new: Report) -> Diff:
    """The difference between two runs, for the renderers and the --fail-on gate."""
    ob, on = overview(base), overview(new)
    phases = _phases(ob, on)
    cb, cn = _cache(base), _cache(new)
    cache = [CacheFigure(k, cb.get(k, {}), cn.get(k, {})) for k in sorted(cb.keys() | cn.keys())]
    many = len(base.logs) > 1 or len(new.logs) > 1
    pairs = match(frames_of(base, many), frames_of(new, many))
    changes = [c for p in pairs for c in frame_changes(p)] + _run_changes(phases, cache)
    return Diff(
        spans=span_figures(base, new),
        base_path=base.path,
        new_path=new.path,
        base_torch=base.torch_version,
        new_torch=new.torch_version,
        base=ob,
        new=on,
        figures=_figures(base, new, ob, on),
        phases=phases,
        cache=cache,
        frames=pairs,
        changes=changes,
        notes=_run_notes(base, new),
    )


def span_figures(base: Report, new: Report) -> dict[str, Figure]:
    """Each compile phase's time in both runs (seconds; a phase one run lacks is 0 there)."""
    b, n = span_totals(base.attempts), span_totals(new.attempts)
    out = {}
    for name in sorted(b.keys() | n.keys()):
        vb, vn = round(b.get(name, 0.0), 6), round(n.get(name, 0.0), 6)
        out[name] = Figure(name, vb, vn, beyond_noise(vb, vn), seconds=True)
    return out


# -- words shared by the renderers --------------------------------------------------------------


def _value(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def change_words(c: Change) -> str:
    """A change in words, for one table cell."""
    if c.input is not None:
        return f"{c.what.partition(': ')[0]}: {change_text(c.input)}"
    if c.kind.startswith("graph-break-"):
        where = {
            "graph-break-new": f"at {c.after}",
            "graph-break-gone": f"was at {c.before}",
            "graph-break-moved": f"{c.before} -> {c.after}",
            "graph-break-count": f"{c.before} -> {c.after} times",
        }[c.kind]
        return f"{c.what} ({where})"
    if c.kind in ("failure-new", "failure-gone"):
        n = c.after if c.kind == "failure-new" else c.before
        return c.what + (f" (x{n})" if isinstance(n, int) and n > 1 else "")
    if c.kind in (
        "recompile-reason-new",
        "recompile-reason-gone",
        "frame-added",
        "frame-removed",
        "compiles",  # "1 -> 2 compiles" says the counts
    ):
        return c.what
    if c.kind == "cache":
        return f"{c.what}: {_pct(c.before)} -> {_pct(c.after)}"
    return f"{c.what}: {_value(c.before)} -> {_value(c.after)}"


def _pct(v: object) -> str:
    return f"{v:.0%}" if isinstance(v, float) else "-"
