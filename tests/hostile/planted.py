"""A log planted with what must never run, be imported, unpickled or opened (code, pickles, a
module that leaves a marker when imported, a secret file, a FIFO, URLs, terminal escapes), and
Python's audit hooks watching what the process does: the trust tests' shared helpers.

Tests take the log as the `evil` fixture (`from planted import evil  # noqa: F401`)."""

from __future__ import annotations

import base64
import os
import pickle
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from damage import (
    payload_of,
    record_json,
    unit_bytes,
    units,
)
from helpers import FIXTURES

DEMO = FIXTURES / "demo.log"


TOKEN = "tlview_pwned_5e1f"  # in every path and every piece of code the hostile log holds


# What a log may try to do to a terminal: set the title (OSC), clear it, colour it, move the
# cursor, ring the bell, rewrite the line, reverse the text (bidi), hide text (zero width).
ESCAPES = "\x1b]0;TITLE\x07\x1b[2J\x1b[31mRED\x1b[0m\x1b[1A\r\x08\u202eREVERSED\u2066\u200f\x9b2J"


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
            body[0] = [str(secret), f"/src/{ESCAPES}/model.py", _code(h, "str")][n]
        elif kind == "describe_source" and n < 2:
            body["source"] = [_code(h, "source"), f"L['{ESCAPES}']"][n]
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
                    {"dtype": _code(h, "dtype"), "device": f"{_code(h, 'device')}{ESCAPES}"},
                    {"size": [_code(h, "size"), 16], "storage_offset": _code(h, "offset")},
                    {"type": "<class 'pickle.loads'>", "layout": _code(h, "layout")},
                ][n]
            )
        elif kind == "dynamo_start" and n == 0:
            body["stack"][-1].update(name=f"fn{ESCAPES}", loc=_code(h, "loc"))
        elif kind == "compilation_metrics" and n == 0:
            body.update(
                co_name=f"forward{ESCAPES}",
                co_filename=str(secret),
                fail_reason=_code(h, "fail_reason") + ESCAPES,
                dynamo_config=_code(h, "config"),
                graph_node_shapes=_code(h, "shapes"),
            )
        elif kind == "artifact" and body.get("name") == "dynamo_graph_break_reason":
            payload = (
                f"Graph Break Reason: {ESCAPES} {_code(h, 'break')}\nUser code traceback:".encode()
            )
        elif kind == "artifact" and body.get("name") == "torch_version":
            payload = orjson.dumps({"pytorch_version": _code(h, "version") + ESCAPES})
        elif kind == "dynamo_output_graph" and n == 0:
            payload = graph
        elif kind == "chromium_event" and n == 0:
            payload = orjson.dumps(
                {"name": ESCAPES + _code(h, "event"), "ph": "X", "ts": 1, "dur": 2}
            )
        out.append(unit_bytes(meta, payload, u))
    assert ctx is not None
    extra = [
        ({"dump_file": {"name": str(fifo)}}, _code(h, "dump_fifo").encode()),
        ({"dump_file": {"name": str(secret)}}, _code(h, "dump_secret").encode()),
        ({"link": {"name": f"a{ESCAPES}", "url": f"file://{secret}"}}, None),
        ({"link": {"name": "b", "url": f"http://127.0.0.1:9/{TOKEN}"}}, None),
        ({"artifact": {"name": "pickled", "encoding": "pickle"}}, proto0),
        ({"artifact": {"name": "pickled_b64", "encoding": "base64"}}, base64.b64encode(binary)),
        ({"artifact": {"name": "fx_graph_runnable", "encoding": "string"}}, graph),
        ({f"kind{ESCAPES}": {"x": _code(h, "unknown_kind")}}, None),
        ({"graph_dump": {"name": str(secret)}}, graph),
    ]
    like = units(DEMO.read_bytes())[0]
    for rec, payload in extra:
        out.append(unit_bytes({**rec, **ctx}, payload, like))
    h.log.write_bytes(b"".join(out))
    return h


def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    """The `evil` fixture of the tests that use it: the log, its module importable by name
    (only ever imported when named), forgotten after the test."""
    h = hostile(tmp_path)
    monkeypatch.syspath_prepend(str(h.module_dir))
    yield h
    sys.modules.pop(h.module, None)


def secret_untouched(h: Hostile) -> None:
    assert h.secret.read_text() == "SECRET = 1\n"


def check_inert(h: Hostile, events: list[tuple[str, tuple[Any, ...]]]) -> None:
    found = violations(events)
    assert not found, "\n".join(found[:20])
    assert h.marks() == [], h.marks()
    assert h.module not in sys.modules
    secret_untouched(h)
