"""Hostile logs: nothing in a log is executed, imported, unpickled, opened or fetched; huge claims
allocate nothing; output files are replaced only when tlview wrote them; no terminal escape
sequence from a log reaches the screen (README "Trust", issue 6)."""

from __future__ import annotations

import base64
import os
import pickle
import re
import subprocess
import sys
import threading
import time
import tracemalloc
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from damage import (
    EXIT_OK,
    EXIT_REFUSED,
    assert_clean_exit,
    payload_of,
    record_json,
    run,
    unit_bytes,
    units,
)

from tlview.index.log import read_log
from tlview.parse import Reader

DEMO = FIXTURES / "demo.log"
TOKEN = "tlview_pwned_5e1f"  # in every path and every piece of code the hostile log holds
# What a log may try to do to a terminal: set the title (OSC), clear it, colour it, move the
# cursor, ring the bell, rewrite the line, reverse the text (bidi), hide text (zero width).
ESC = "\x1b]0;TITLE\x07\x1b[2J\x1b[31mRED\x1b[0m\x1b[1A\r\x08\u202eREVERSED\u2066\u200f\x9b2J"
# Bytes a terminal may obey: anything but rich's own colour codes (SGR) is a failure.
_OBEYED = re.compile(
    r"\x1b(?!\[[0-9;]*m)"
    r"|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


# -- watching what the process does ---------------------------------------------------------------
_EVENTS: list[tuple[str, tuple[Any, ...]]] = []
_WATCHING = [False]
_WATCHED = (
    "exec",
    "import",
    "open",
    "pickle.find_class",
    "urllib.Request",
    "webbrowser.open",
)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHING[0] and (
        event in _WATCHED or event.startswith(("os.", "subprocess.", "socket.", "shutil."))
    ):
        _EVENTS.append((event, args))


sys.addaudithook(_hook)  # hooks cannot be removed: this one records only inside `watch`


@contextmanager
def watch() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Record, through Python's audit hooks, what the code under it opens, imports, runs."""
    _EVENTS.clear()
    _WATCHING[0] = True
    try:
        yield _EVENTS
    finally:
        _WATCHING[0] = False


def _has_token(code: types.CodeType) -> bool:
    for c in code.co_consts:
        if isinstance(c, str) and TOKEN in c:
            return True
        if isinstance(c, types.CodeType) and _has_token(c):
            return True
    return TOKEN in code.co_filename


def _strings(v: Any) -> Iterator[str]:
    if isinstance(v, str | bytes | os.PathLike):
        yield os.fsdecode(v)
    elif isinstance(v, tuple | list):
        for x in v:
            yield from _strings(x)


def violations(events: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    """What the watched code did with the log's contents that it must never do."""
    out = []
    for event, args in events:
        if event == "exec" and args and isinstance(args[0], types.CodeType):
            if _has_token(args[0]):
                out.append(f"executed code from the log ({args[0].co_filename})")
        elif event == "pickle.find_class":
            out.append(f"unpickled a reference to {args[0]}.{args[1]}")
        elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen"):
            out.append(f"ran a program: {event} {args!r:.200}")
        elif event.startswith("socket.") or event == "urllib.Request":
            out.append(f"used the network: {event} {args!r:.200}")
        elif any(TOKEN in s for s in _strings(args)):
            out.append(f"{event} on a name from the log: {args!r:.300}")
    return out


# -- the hostile log ------------------------------------------------------------------------------
@dataclass
class Hostile:
    """A real log edited to hold code, pickles, module names and paths in every field read."""

    log: Path
    named: Path  # every path the log names is in here
    markers: Path  # code from the log, if run, leaves a file here
    module: str  # a module that leaves a marker when imported
    module_dir: Path
    secret: Path
    fifo: Path

    def marks(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


def _code(h: Hostile, what: str) -> str:
    return f"__import__('os').system('touch {h.markers}/{what}')"


class _Reduce:
    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.cmd,))


def hostile(tmp: Path) -> Hostile:
    """The demo log with hostile text in every field tlview reads (md5s recomputed).

    Sources, file names, function names, graph-break reasons, dtypes, devices, sizes, subclass
    types and contexts hold Python code or terminal escapes; graphs and artifacts hold code and
    pickles; dump_file and link records name a secret file, a FIFO and a URL.
    """
    named = tmp / f"{TOKEN}_named"
    markers = tmp / f"{TOKEN}_markers"
    mod_dir = tmp / "site"
    for d in (named, markers, mod_dir):
        d.mkdir()
    module = f"{TOKEN}_mod"
    (mod_dir / f"{module}.py").write_text(
        f"open({str(markers / 'imported')!r}, 'w').write('imported')\n"
        "import torch\n\n\nclass Evil(torch.Tensor):\n"
        "    @staticmethod\n    def __tensor_unflatten__(inner, ctx, size, stride):\n"
        "        return inner['a']\n"
    )
    secret = named / "secret.py"
    secret.write_text("SECRET = 1\n")
    fifo = named / "fifo"
    os.mkfifo(fifo)
    h = Hostile(tmp / "hostile.log", named, markers, module, mod_dir, secret, fifo)
    proto0 = f"cos\nsystem\n(S'touch {markers}/pickle0'\ntR.".encode()
    binary = pickle.dumps(_Reduce(f"touch {markers}/pickle_b64"))
    graph = (
        f"import os\nos.system('touch {markers}/graph_module')\n\n"
        "class GraphModule(torch.nn.Module):\n"
        f'    def forward(self, L_x_: "f32[4, 16]"):\n        {_code(h, "graph_forward")}\n'
    ).encode()
    done: dict[str, int] = {}
    out = []
    ctx = None
    for u in units(DEMO.read_bytes()):
        meta = record_json(u, lenient=False)
        assert meta is not None
        kind = next(iter(meta))
        body = meta[kind]
        payload = payload_of(u)
        n = done.get(kind, 0)
        done[kind] = n + 1
        if kind == "str" and n < 3:
            body[0] = [str(secret), f"/src/{ESC}/model.py", _code(h, "str")][n]
        elif kind == "describe_source" and n < 2:
            body["source"] = [_code(h, "source"), f"L['{ESC}']"][n]
        elif kind == "describe_tensor" and n < 4:
            ctx = ctx or {k: v for k, v in meta.items() if k != kind}
            body.update(
                [
                    {
                        "type": f"<class '{module}.Evil'>",
                        "is_traceable_wrapper_subclass": True,
                        "ctx": _code(h, "ctx"),
                        "fake_mode": _code(h, "fake_mode"),
                        "view_func": _code(h, "view_func"),
                    },
                    {"dtype": _code(h, "dtype"), "device": f"{_code(h, 'device')}{ESC}"},
                    {"size": [_code(h, "size"), 16], "storage_offset": _code(h, "offset")},
                    {"type": "<class 'pickle.loads'>", "layout": _code(h, "layout")},
                ][n]
            )
        elif kind == "dynamo_start" and n == 0:
            body["stack"][-1].update(name=f"fn{ESC}", loc=_code(h, "loc"))
        elif kind == "compilation_metrics" and n == 0:
            body.update(
                co_name=f"forward{ESC}",
                co_filename=str(secret),
                fail_reason=_code(h, "fail_reason") + ESC,
                dynamo_config=_code(h, "config"),
                graph_node_shapes=_code(h, "shapes"),
            )
        elif kind == "artifact" and body.get("name") == "dynamo_graph_break_reason":
            payload = (
                f"Graph Break Reason: {ESC} {_code(h, 'break')}\nUser code traceback:".encode()
            )
        elif kind == "artifact" and body.get("name") == "torch_version":
            payload = orjson.dumps({"pytorch_version": _code(h, "version") + ESC})
        elif kind == "dynamo_output_graph" and n == 0:
            payload = graph
        elif kind == "chromium_event" and n == 0:
            payload = orjson.dumps({"name": ESC + _code(h, "event"), "ph": "X", "ts": 1, "dur": 2})
        out.append(unit_bytes(meta, payload, u))
    assert ctx is not None
    extra = [
        ({"dump_file": {"name": str(fifo)}}, _code(h, "dump_fifo").encode()),
        ({"dump_file": {"name": str(secret)}}, _code(h, "dump_secret").encode()),
        ({"link": {"name": f"a{ESC}", "url": f"file://{secret}"}}, None),
        ({"link": {"name": "b", "url": f"http://127.0.0.1:9/{TOKEN}"}}, None),
        ({"artifact": {"name": "pickled", "encoding": "pickle"}}, proto0),
        ({"artifact": {"name": "pickled_b64", "encoding": "base64"}}, base64.b64encode(binary)),
        ({"artifact": {"name": "fx_graph_runnable", "encoding": "string"}}, graph),
        ({f"kind{ESC}": {"x": _code(h, "unknown_kind")}}, None),
        ({"graph_dump": {"name": str(secret)}}, graph),
    ]
    like = units(DEMO.read_bytes())[0]
    for rec, payload in extra:
        out.append(unit_bytes({**rec, **ctx}, payload, like))
    h.log.write_bytes(b"".join(out))
    return h


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    h = hostile(tmp_path)
    monkeypatch.syspath_prepend(str(h.module_dir))
    yield h
    sys.modules.pop(h.module, None)


def _secret_untouched(h: Hostile) -> None:
    assert h.secret.read_text() == "SECRET = 1\n"


def check_inert(h: Hostile, events: list[tuple[str, tuple[Any, ...]]]) -> None:
    found = violations(events)
    assert not found, "\n".join(found[:20])
    assert h.marks() == [], h.marks()
    assert h.module not in sys.modules
    _secret_untouched(h)


# -- the detectors detect -------------------------------------------------------------------------
@pytest.mark.slow
def test_the_watch_sees_what_it_must_forbid(evil: Hostile) -> None:
    """Positive control: running, importing, unpickling or opening what the log holds is seen."""
    with watch() as events:
        exec(compile(_code(evil, "exec"), "<log>", "exec"))  # noqa: S102
        __import__(evil.module)
        pickle.loads(f"cos\nsystem\n(S'touch {evil.markers}/pickle'\ntR.".encode())  # noqa: S301
        evil.secret.read_text()
    found = " ".join(violations(events))
    for what in ("executed code", "unpickled", "open on a name", "import on a name"):
        assert what in found, (what, found)
    assert evil.marks() == ["exec", "imported", "pickle"]


# -- nothing executed, imported, unpickled, opened ------------------------------------------------
REPORTS = [
    ("text",),
    ("text", "-v"),
    ("text", "--compile-id", "0/0"),
    ("json",),
    ("html",),
    ("html", "--full"),
    ("perfetto",),
]


@pytest.mark.parametrize("args", REPORTS, ids=" ".join)
def test_report_runs_nothing_from_the_log(evil: Hostile, args: tuple[str, ...]) -> None:
    fmt, *rest = args
    with watch() as events:
        res = run("report", str(evil.log), "--format", fmt, "--jobs", "1", *rest)
    assert_clean_exit(res, EXIT_OK, " ".join(args))
    check_inert(evil, events)
    assert TOKEN in res.stdout  # the hostile text is shown, as text


def test_report_written_to_a_file_runs_nothing(evil: Hostile, tmp_path: Path) -> None:
    for fmt in ("text", "json", "html"):
        dest = tmp_path / f"out.{fmt}"
        with watch() as events:
            res = run("report", str(evil.log), "--format", fmt, "-o", str(dest))
        assert_clean_exit(res, EXIT_OK, fmt)
        check_inert(evil, events)
        assert TOKEN in dest.read_text()


@pytest.mark.slow
def test_inputs_runs_nothing_from_the_log(evil: Hostile, tmp_path: Path) -> None:
    """The listing and --emit rebuild tensors from the log's metadata, never from its code."""
    pytest.importorskip("torch")
    import tlview.rebuild  # noqa: F401  (torch imported before watching: its imports are noise)

    runs = [
        (),
        ("--mode", "meta", "--emit", str(tmp_path / "meta.pt")),
        ("--compile-id", "0/0", "--emit", str(tmp_path / "real.pt")),
    ]
    for extra in runs:
        with watch() as events:
            res = run("inputs", str(evil.log), *extra)
        assert_clean_exit(res, EXIT_OK, f"inputs {extra}")
        check_inert(evil, events)
    listing = run("inputs", str(evil.log)).stdout
    assert f"--allow-import {evil.module}" in listing  # says why the type was not imported


@pytest.mark.slow
def test_allow_import_is_the_only_way_in(evil: Hostile, tmp_path: Path) -> None:
    """Positive control: the module the log names is imported when the user names it."""
    pytest.importorskip("torch")
    res = run("inputs", str(evil.log), "--compile-id", "0/0", "--allow-import", evil.module)
    assert_clean_exit(res, EXIT_OK, "--allow-import")
    assert evil.marks() == ["imported"]


def test_diff_runs_nothing_from_the_log(evil: Hostile) -> None:
    for fmt in ("text", "json", "html"):
        with watch() as events:
            res = run("diff", str(DEMO), str(evil.log), "--format", fmt)
        assert_clean_exit(res, EXIT_OK, f"diff {fmt}")
        check_inert(evil, events)


@pytest.mark.slow
def test_as_a_process_nothing_is_run_and_the_fifo_is_never_opened(evil: Hostile) -> None:
    """The real command: no marker appears, and no one ever opens the FIFO the log names.

    Opening a FIFO to read blocks until a writer comes; a thread here tries to be that writer
    the whole time the command runs, so an open is seen (and released), never a hang.
    """
    opened: list[str] = []
    done = threading.Event()

    def writer() -> None:
        while not done.is_set():
            try:
                fd = os.open(evil.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader, as it should be
                time.sleep(0.005)
                continue
            opened.append("opened")
            os.close(fd)

    env = dict(
        os.environ, PYTHONPATH=f"{evil.module_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    )
    atime = _atime_is_kept(evil.markers.parent)
    os.utime(evil.secret, (0, evil.secret.stat().st_mtime))
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        for args in (
            ("report", str(evil.log)),
            ("report", str(evil.log), "--format", "json"),
            ("report", str(evil.log), "--format", "html"),
            ("inputs", str(evil.log), "--compile-id", "0/0"),
        ):
            p = subprocess.run(
                [sys.executable, "-m", "tlview", *args],
                capture_output=True,
                env=env,
                check=False,
                timeout=300,
            )
            err = p.stderr.decode()
            assert p.returncode == EXIT_OK, (args, p.returncode, err)
            assert "Traceback" not in err and "internal error" not in err, err
    finally:
        done.set()
        t.join()
    assert opened == []
    assert evil.marks() == []
    if atime:  # the secret file the log names was never read
        assert evil.secret.stat().st_atime == 0
    _secret_untouched(evil)


def _atime_is_kept(tmp: Path) -> bool:
    """Whether reading a file here updates its access time (not on noatime mounts)."""
    probe = tmp / "atime_probe"
    probe.write_text("x")
    os.utime(probe, (0, probe.stat().st_mtime))
    probe.read_text()
    return probe.stat().st_atime != 0


# -- no escape sequence from the log reaches a terminal -------------------------------------------
def _obeyed(text: str) -> list[str]:
    return sorted(
        {repr(m.group()) for m in _OBEYED.finditer(text.replace("\n", "").replace("\t", ""))}
    )


@pytest.mark.parametrize("color", [False, True], ids=["piped", "colour"])
def test_no_escape_sequence_from_the_log_reaches_the_terminal(evil: Hostile, color: bool) -> None:
    env = {"FORCE_COLOR": "1", "NO_COLOR": None} if color else {"NO_COLOR": "1"}
    cases = [
        ("report", str(evil.log)),
        ("report", str(evil.log), "-v"),
        ("report", str(evil.log), "--compile-id", "0/0"),
        ("report", str(evil.log), "-q"),
        ("diff", str(DEMO), str(evil.log)),
        ("diff", str(DEMO), str(evil.log), "-v"),
        ("report", str(evil.log), "--format", "markdown"),
        ("report", str(evil.log), "-o", os.devnull, "--annotations", "github"),
        ("report", str(evil.log), "-o", os.devnull, "--annotations", "plain"),
        ("diff", str(DEMO), str(evil.log), "--format", "markdown"),
    ]
    for args in cases:
        res = run(*args, env=env)
        assert_clean_exit(res, EXIT_OK, " ".join(args))
        for stream in (res.stdout, res.stderr):
            assert _obeyed(stream) == [], (args, _obeyed(stream))
        if args[0] == "report" and "-q" not in args and len(args) < 4:
            # the text is shown, its control characters as escapes
            assert "\\x1b]0;TITLE" in res.stdout and "REVERSED" in res.stdout, args


@pytest.mark.slow
def test_no_escape_sequence_in_the_inputs_listing(evil: Hostile) -> None:
    res = run("inputs", str(evil.log), env={"FORCE_COLOR": "1", "NO_COLOR": None})
    assert_clean_exit(res, EXIT_OK, "inputs")
    assert _obeyed(res.stdout) == [] and _obeyed(res.stderr) == []


def test_file_names_are_cleaned_too(tmp_path: Path) -> None:
    """A log (and a decoy) named with escapes, in a directory: the notes and ids stay inert."""
    d = tmp_path / "trace"
    d.mkdir()
    (d / f"rank{ESC}.log").write_bytes(DEMO.read_bytes())
    (d / "b.log").write_bytes(DEMO.read_bytes())
    (d / f"decoy{ESC}.txt").write_bytes(b"x")
    (d / f"empty{ESC}.log").write_bytes(b"")
    for args in ((), ("-v",)):
        res = run(
            "report", str(d), "--jobs", "1", *args, env={"FORCE_COLOR": "1", "NO_COLOR": None}
        )
        assert_clean_exit(res, EXIT_OK, "directory")
        assert _obeyed(res.stdout) == [] and _obeyed(res.stderr) == []
    bad = tmp_path / f"x{ESC}.log"
    bad.write_bytes(b"")
    res = run("report", str(bad))
    assert res.exit_code == 1 and _obeyed(res.stderr) == [], res.stderr


# -- huge claims allocate nothing -----------------------------------------------------------------
def huge(tmp: Path) -> Path:
    """The demo log claiming a 10^12-byte storage and tensors of 10^9 and 10^15 elements."""
    out = []
    n = 0
    for u in units(DEMO.read_bytes()):
        meta = record_json(u, lenient=False)
        assert meta is not None
        kind = next(iter(meta))
        body = meta[kind]
        if kind == "describe_storage" and body["id"] in (0, 2):
            body["size"] = 10**12
        elif kind == "describe_tensor" and n < 3:
            body["size"], body["stride"] = [
                ([10**9], [1]),
                ([10**5, 10**5, 10**5], [10**10, 10**5, 1]),
                ([2**62, 2], [2, 1]),
            ][n]
            body["ndim"] = len(body["size"])
            n += 1
        out.append(unit_bytes(meta, payload_of(u), u))
    dest = tmp / "huge.log"
    dest.write_bytes(b"".join(out))
    return dest


def _peak(*args: str) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        res = run(*args)
        return tracemalloc.get_traced_memory()[1], res
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_huge_claims_allocate_nothing_in_report(tmp_path: Path, fmt: str) -> None:
    log = huge(tmp_path)
    run("report", str(DEMO), "--format", fmt, "-v", "--jobs", "1")  # imports done before measuring
    base, _ = _peak("report", str(DEMO), "--format", fmt, "-v", "--jobs", "1")
    peak, res = _peak("report", str(log), "--format", fmt, "-v", "--jobs", "1")
    assert_clean_exit(res, EXIT_OK, fmt)
    assert peak < base * 1.5 + (8 << 20), (peak, base)
    if fmt == "json":
        doc = orjson.loads(res.stdout_bytes)
        sizes = [i["size"] for c in doc["compiles"] for i in c["inputs"]]
        assert [10**9] in sizes and [10**5, 10**5, 10**5] in sizes
        assert 10**12 in [i["storage_bytes"] for c in doc["compiles"] for i in c["inputs"]]


@pytest.mark.slow
def test_huge_claims_real_rebuild_is_refused_meta_and_fake_work(tmp_path: Path) -> None:
    """tlview inputs: real tensors past --max-bytes stop with one line (exit 4); meta and the
    listing (fake and meta rebuilds) still work, in a process that never grows past 1.5 GB."""
    pytest.importorskip("torch")
    log = huge(tmp_path)
    # VmHWM, the peak of this process's own memory: getrusage's ru_maxrss keeps, across exec,
    # the peak of the forked copy of pytest it started as (a large suite's parent).
    code = (
        "import re, sys\nfrom tlview.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    status = open('/proc/self/status').read()\n"
        "    r = re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1)\n"
        "    print(f'MAXRSS {r}', file=sys.stderr)\n    raise\n"
    )

    def inputs(*args: str) -> tuple[int, str, int]:
        p = subprocess.run(
            [sys.executable, "-c", code, "inputs", str(log), *args],
            capture_output=True,
            check=False,
            timeout=300,
        )
        err = p.stderr.decode()
        m = re.search(r"MAXRSS (\d+)", err)
        assert m is not None, err
        return p.returncode, err.replace(m.group(0), "").strip(), int(m.group(1)) * 1024

    status, err, rss = inputs("--compile-id", "0/0", "--emit", str(tmp_path / "real.pt"))
    assert status == EXIT_REFUSED, err
    assert err.startswith("tlview: ") and len(err.splitlines()) == 1 and "--max-bytes" in err, err
    assert rss < 1536 << 20, rss
    status, err, rss = inputs(
        "--compile-id", "0/0", "--mode", "meta", "--emit", str(tmp_path / "m.pt")
    )
    assert status == EXIT_OK and "Traceback" not in err, err
    assert rss < 1536 << 20, rss
    status, err, rss = inputs()
    assert status == EXIT_OK and "Traceback" not in err, err
    assert rss < 1536 << 20, rss


# -- many tiny records: the reader and the index stay flat ---------------------------------------
_GEN = r"""
import hashlib, sys
n, path = int(sys.argv[1]), sys.argv[2]
pre = b"V1129 17:41:15.872000 2142 torch/_dynamo/utils.py:1] "
ev = b'{\n"name": "dynamo",\n"ts": %d,\n"ph": "B",\n"args": {\n"compile_id": "0/%d"\n}\n}'
with open(path, "wb") as w:
    batch = []
    for i in range(n):
        r = i % 5
        if r == 0:  # a chromium event begun and never ended, with its md5-checked payload
            pay = ev % (i, i % 8)
            head = b'{"chromium_event": {}, "frame_id": 0, "frame_compile_id": %d, "has_payload": "%s"}'
            rec = pre + head % (i % 8, hashlib.md5(pay).hexdigest().encode()) + b"\n"
            rec += b"".join(b"\t" + ln + b"\n" for ln in pay.split(b"\n"))
        elif r == 1:
            rec = pre + b'{"guard_added_fast": {"expr": "s0 > %d"}, "frame_id": 0, "frame_compile_id": %d}\n' % (i, i % 8)
        elif r == 2:
            rec = b"not a record %d\n" % i
        elif r == 3:
            rec = pre + b'{"kind_%d": {"n": %d}}\n' % (i, i)
        else:
            rec = pre + b'{"str": ["/a/model.py", %d]}\n' % (i % 16)
        batch.append(rec)
        if len(batch) >= 10000:
            w.write(b"".join(batch))
            batch.clear()
    w.write(b"".join(batch))
"""


def _stream_peak(tmp: Path, n: int, index: bool) -> tuple[int, int]:
    """Peak traced memory while reading N generated records from a pipe (never a file)."""
    fifo = tmp / f"stream{n}{index}"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", _GEN, str(n), str(fifo)])
    tracemalloc.start()
    try:
        if index:
            logs = read_log(fifo)
            count = logs[0].records
        else:
            count = sum(1 for _ in Reader(fifo))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        writer.wait(240)


@pytest.mark.parametrize("index", [False, True], ids=["reader", "index"])
@pytest.mark.slow
def test_memory_stays_flat_over_many_tiny_records(
    tmp_path: Path, index: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten times the records, the same memory: nothing is kept per record (distinct kinds,
    events never ended, bad lines, repeated file names are all bounded)."""
    from tlview import parse

    monkeypatch.setattr(parse, "CHUNK", 1 << 16)  # both streams span many chunks
    small_n, big_n = 20_000, 200_000
    small, small_peak = _stream_peak(tmp_path, small_n, index)
    big, big_peak = _stream_peak(tmp_path, big_n, index)
    assert (small, big) == (small_n * 4 // 5, big_n * 4 // 5)  # every record line was read
    assert big_peak < small_peak * 1.5 + (1 << 20), (small_peak, big_peak)


# -- output files ---------------------------------------------------------------------------------
def test_output_replaces_only_what_tlview_wrote(tmp_path: Path) -> None:
    """A file tlview did not write is refused (exit 4, untouched) unless --force; its own files
    (every format) are replaced; nothing is left behind under a temporary name."""
    for fmt in ("text", "json", "html", "perfetto", "markdown"):
        dest = tmp_path / f"report.{fmt}"
        for _ in range(2):  # the second run replaces tlview's own file
            assert_clean_exit(run("report", str(DEMO), "--format", fmt, "-o", str(dest)), 0, fmt)
        assert dest.stat().st_size > 0
    mine = tmp_path / "notes.md"
    text = "# my notes on tlview 1.0 and tlview.report\nwritten by hand\n"
    for content in (text, "", "{}", "tlview"):
        mine.write_text(content)
        before = mine.stat()
        res = run("report", str(DEMO), "--format", "json", "-o", str(mine))
        assert_clean_exit(res, EXIT_REFUSED, repr(content))
        assert "--force" in res.stderr and str(mine) in res.stderr
        assert mine.read_text() == content and mine.stat().st_mtime_ns == before.st_mtime_ns
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    assert_clean_exit(run("report", str(DEMO), "-o", str(link)), EXIT_REFUSED, "symlink")
    assert mine.read_text() == content
    res = run("report", str(DEMO), "--format", "json", "-o", str(mine), "--force")
    assert_clean_exit(res, EXIT_OK, "--force")
    assert orjson.loads(mine.read_bytes())["format"] == "tlview.report/1"
    log = tmp_path / "copy.log"
    log.write_bytes(DEMO.read_bytes())
    assert_clean_exit(run("report", str(log), "-o", str(log)), EXIT_REFUSED, "over the log")
    assert log.read_bytes() == DEMO.read_bytes()
    assert_clean_exit(run("report", str(DEMO), "-o", str(tmp_path)), EXIT_REFUSED, "a directory")
    missing = tmp_path / "no" / "such" / "dir" / "r.json"
    assert_clean_exit(run("report", str(DEMO), "-o", str(missing)), EXIT_REFUSED, "no parent")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_crash_while_writing_leaves_no_half_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renderer dies halfway: the old file is intact, no new one appears, no temp is left."""
    from tlview.render.json import report as json_render

    def half(report: Any, out: Any, *a: Any, **k: Any) -> None:
        out.write(b'{"format":"tlview.report/1","half":')
        raise RuntimeError("renderer crashed")

    old = tmp_path / "old.json"
    assert_clean_exit(run("report", str(DEMO), "--format", "json", "-o", str(old)), 0, "first")
    before = old.read_bytes()
    monkeypatch.setattr(json_render, "stream", half)
    for dest in (old, tmp_path / "new.json"):
        res = run("report", str(DEMO), "--format", "json", "-o", str(dest))
        assert res.exit_code == 70 and "internal error" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


@pytest.mark.slow
def test_repro_writes_but_runs_nothing_from_the_log(evil: Hostile, tmp_path: Path) -> None:
    """`tlview repro` (without --run) writes scripts from the log and runs none of it."""
    pytest.importorskip("torch")
    import tlview.replay.make  # noqa: F401  (torch imported before watching)

    with watch() as events:
        res = run("repro", str(evil.log), "--all", "-o", str(tmp_path / "repros"))
    assert res.exit_code in (0, 6), res.stderr  # 6: some graph gave no repro (README)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    check_inert(evil, events)
