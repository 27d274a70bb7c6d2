"""The HTML page in a real headless Chromium: no script error, no network, everything shown, usable.

One Chromium for the whole module, driven over the DevTools protocol on a pipe (no extra package).
Screenshots of the pages are saved under the test's tmp directory (see the paths printed by -s).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus
from test_html import DEMO, HOSTILE, hostile_log, page_payloads, real_paths

from tlview.analyze.names import Refs, compile_ref
from tlview.analyze.provenance import cross_links
from tlview.load import read as load
from tlview.model import Report
from tlview.render.html import budget as kept
from tlview.render.html import report as html
from tlview.render.html.payloads import section_payloads

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT = 60.0  # seconds for any one reply or event of chromium's, then the test fails
pytestmark = pytest.mark.slow  # a headless Chromium loads every page


_PLACE_FDS = """
import fcntl, os, sys
r, w = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])
os.dup2(r, 3)
os.dup2(w, 4)
os.execv(sys.argv[3], sys.argv[3:])
"""


class Chromium:
    """Headless Chromium over `--remote-debugging-pipe`: fd 3 carries commands in, fd 4 replies out."""

    def __init__(self, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        args = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        # A small Python puts the pipe ends at fd 3 and 4, then becomes Chromium (no preexec_fn,
        # which is unsafe with threads).
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PLACE_FDS, str(to_child_r), str(from_child_w), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_child_r, from_child_w),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session = ""

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._from_child, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while b"\0" in buf:
                    msg, buf = buf.split(b"\0", 1)
                    m = json.loads(msg)
                    if "id" in m:
                        with self._lock:
                            q = self._replies.get(m["id"])
                        if q is not None:
                            q.put(m)
                    else:
                        self.events.put(m)
        # Chromium went away: wake every waiter.
        with self._lock:
            for q in self._replies.values():
                q.put({"error": {"message": "chromium exited"}})
        self.events.put({"method": "<exit>"})

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            n = self._next
            q: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[n] = q
        msg: dict[str, Any] = {"id": n, "method": method, "params": params}
        sid = self.session if session is None else session
        if sid:
            msg["sessionId"] = sid
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=WAIT)
        except queue.Empty:
            raise RuntimeError(f"{method}: chromium gave no reply in {WAIT:g} s") from None
        with self._lock:
            del self._replies[n]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, method: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
        """The next event named `method`; every event on the way is appended to `seen`."""
        while True:
            try:
                ev = self.events.get(timeout=WAIT)
            except queue.Empty:
                raise RuntimeError(f"no {method} from chromium in {WAIT:g} s") from None
            if ev["method"] == "<exit>":
                raise RuntimeError("chromium exited")
            seen.append(ev)
            if ev["method"] == method:
                return ev

    def settled(self) -> list[dict[str, Any]]:
        """The events since the last call, once the page has run its pending tasks."""
        self.eval("new Promise(r => requestAnimationFrame(() => setTimeout(() => r(1), 0)))")
        seen: list[dict[str, Any]] = []
        self.drain(seen)
        return seen

    def drain(self, seen: list[dict[str, Any]]) -> None:
        while True:
            try:
                seen.append(self.events.get_nowait())
            except queue.Empty:
                return

    def open_tab(self) -> None:
        target = self.call("Target.createTarget", session="", url="about:blank")["targetId"]
        self.session = self.call(
            "Target.attachToTarget", session="", targetId=target, flatten=True
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )

    def load(self, path: Path) -> list[dict[str, Any]]:
        """Open a page and wait for it to load; the events seen while loading are returned."""
        seen: list[dict[str, Any]] = []
        self.drain([])
        self.call("Page.navigate", url=path.as_uri())
        self.wait_for("Page.loadEventFired", seen)
        self.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
        self.drain(seen)
        return seen

    def eval(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(
                f"script error in test expression {expr!r}: {r['exceptionDetails']}"
            )
        return r["result"].get("value")

    def screenshot(self, dest: Path, dark: bool = False, full: bool = False) -> Path:
        self.call(
            "Emulation.setEmulatedMedia",
            features=[{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}],
        )
        params: dict[str, Any] = {"format": "png"}
        if full:
            h = self.eval("Math.min(document.documentElement.scrollHeight, 6000)")
            params["clip"] = {"x": 0, "y": 0, "width": 1280, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        dest.write_bytes(base64.b64decode(data))
        return dest

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.call("Browser.close", session="")
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT)
        os.close(self._to_child)


def problems(events: list[dict[str, Any]], page: Path) -> list[str]:
    """Script errors, console errors and any request other than the page itself."""
    out = []
    for ev in events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            out.append(f"script error: {p['exceptionDetails']}")
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            out.append(f"console: {p['entry']['text']}")
        elif m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            out.append(f"console.{p['type']}: {p['args']}")
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if url != page.as_uri():
                out.append(f"request: {url}")
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: apt-get install -y chromium (.ci/run does this)")
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    b.open_tab()
    yield b
    b.close()


# -- the pages -------------------------------------------------------------------------------------
def page_for(path: Path, dest: Path, full: bool = False) -> tuple[Report, Path]:
    rep = load(path, kept.page_keep(full))
    with dest.open("wb") as f:
        html.stream(rep, f, full=full)
    return rep, dest


# Every block opened, and the payloads the page holds compressed unpacked (the toggle events
# that start it come as tasks, then <html data-unpacking> counts down to 0).
SETTLE = """(async () => {
  await new Promise(r => setTimeout(r, 0));
  while (document.documentElement.dataset.unpacking !== "0") await new Promise(r => setTimeout(r, 5));
  return 1;
})()"""
ALL_TEXT = (
    """(async () => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  await """
    + SETTLE
    + """;
  return document.body.innerText;
})()"""
)


@pytest.mark.parametrize("path", real_paths(), ids=lambda p: p.name)
def test_real_log_pages(browser: Chromium, path: Path, tmp_path: Path) -> None:
    rep, dest = page_for(path, tmp_path / f"{path.stem}.html")
    events = browser.load(dest)
    assert problems(events, dest) == []
    many = len({log.name for log in rep.logs}) > 1
    refs = Refs.of(rep)
    shown = browser.eval(
        "Array.from(document.querySelectorAll('section.compile'),"
        " s => [s.id, s.querySelector('.cid').innerText, s.querySelector('.cid').title])"
    )
    # a section per compile and per `-/-`; an attempt that restarted is inside its compile's
    sections = [c for c in rep.attempts if c.status != "restarted"]
    assert len(shown) == len(sections) == len({a for a, _, _ in shown})
    for (_, label, title), c in zip(shown, sections, strict=True):
        assert title == refs(c)  # the full name: rank or log file, and compile id
        assert label == c.key or (many and label.endswith(" " + c.key)), (label, c.key)
    rows = browser.eval("document.querySelectorAll('#ctable tbody tr').length")
    assert rows == len(shown)
    text = browser.eval(ALL_TEXT)  # opening every block colours its code: no error either
    assert problems(browser.settled(), dest) == []
    # Everything open, the page still fits its width: long lines wrap or scroll in their box.
    wide = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    width, room = browser.eval(wide)
    assert width <= room, (path.name, width, room)
    for c in rep.attempts:  # restarted attempts' inputs too, in their compile's section
        for i in c.inputs:
            for s in i.sources:
                assert s in text, (compile_ref(c, many), s)
    # Nothing but the page itself was requested, and no element could have fetched anything.
    assert (
        browser.eval("document.querySelectorAll('[src],[srcset],link,iframe,object,embed').length")
        == 0
    )
    assert problems(browser.load(dest), dest) == []
    if path.name in ("demo.log", "compile_error", "views_aliasing"):
        browser.screenshot(tmp_path / f"{path.stem}-light.png", full=True)
        browser.screenshot(tmp_path / f"{path.stem}-dark.png", dark=True, full=True)
        browser.call(
            "Emulation.setEmulatedMedia",
            features=[{"name": "prefers-color-scheme", "value": "light"}],
        )
        print(f"screenshots: {tmp_path}")


def _visible_ids(browser: Chromium) -> list[str]:
    return browser.eval(
        "Array.from(document.querySelectorAll('#ctable tbody tr'))"
        ".filter(tr => !tr.hidden).map(tr => tr.cells[0].textContent.trim())"
    )


def _press(browser: Chromium, key: str, code: str, text: str = "") -> None:
    for kind in ("keyDown", "keyUp"):
        params: dict[str, Any] = {"type": kind, "key": key, "code": code}
        if text and kind == "keyDown":
            params["text"] = text
        browser.call("Input.dispatchKeyEvent", **params)


def test_sort_filter_and_keys(browser: Chromium, tmp_path: Path) -> None:
    rep, dest = page_for(DEMO, tmp_path / "demo.html")
    assert problems(browser.load(dest), dest) == []
    rows = [c for c in rep.attempts if c.status != "restarted"]  # restarts: inside their compile
    keys = [c.key for c in rows]
    assert _visible_ids(browser) == keys
    times = {c.key: c.compile_time_s for c in rows}
    timed = sorted((k for k in keys if times[k] is not None), key=lambda k: times[k] or 0)
    untimed = [k for k in keys if times[k] is None]
    th = "document.querySelectorAll('#ctable thead th')"
    col = browser.eval(f"Array.from({th}, t => t.textContent.trim()).indexOf('time')")
    browser.eval(f"{th}[{col}].querySelector('button').click()")
    assert browser.eval(f"{th}[{col}].getAttribute('aria-sort')") == "ascending"
    assert browser.eval(f"{th}[0].getAttribute('aria-sort')") == "none"
    assert _visible_ids(browser) == timed + untimed  # compiles without a time go last
    browser.eval(f"{th}[{col}].querySelector('button').click()")
    assert browser.eval(f"{th}[{col}].getAttribute('aria-sort')") == "descending"
    assert _visible_ids(browser) == timed[::-1] + untimed
    # Keyboard: focus the id header's button with Tab-free focus(), Enter sorts by id again.
    browser.eval(f"{th}[0].querySelector('button').focus()")
    _press(browser, "Enter", "Enter", "\r")
    assert browser.eval(f"{th}[0].getAttribute('aria-sort')") == "ascending"
    assert _visible_ids(browser) == keys
    # "/" focuses the filter; typing filters; Escape clears.
    browser.eval("document.activeElement.blur()")
    _press(browser, "/", "Slash", "/")
    assert browser.eval("document.activeElement.id") == "filter"
    browser.call("Input.insertText", text="views")
    assert _visible_ids(browser) == ["2/0"]
    assert browser.eval("document.getElementById('shown').textContent") == f"1 of {len(keys)} rows"
    _press(browser, "Escape", "Escape")
    assert _visible_ids(browser) == keys
    browser.eval(
        "const s = document.getElementById('status'); s.value = 'graph_break'; s.dispatchEvent(new Event('change')); 1"
    )
    assert _visible_ids(browser) == [c.key for c in rows if c.status == "graph_break"] != []
    # j and k walk the compile sections; Enter opens the one with the focus.
    browser.eval("document.activeElement.blur(); 1")
    _press(browser, "j", "KeyJ", "j")
    _press(browser, "j", "KeyJ", "j")
    here = "document.activeElement.closest('section.compile')"
    assert browser.eval(f"{here}.id") == "c-0/0_1"
    _press(browser, "k", "KeyK", "k")
    assert browser.eval(f"{here}.id") == "c--/-"
    _press(browser, "Enter", "Enter", "\r")
    assert browser.eval(f"{here}.querySelector('details').open") is True


def test_failing_compile_reason_and_inputs_in_two_clicks(browser: Chromium, tmp_path: Path) -> None:
    rep, dest = page_for(corpus("compile_error"), tmp_path / "errors.html")
    assert problems(browser.load(dest), dest) == []
    failed = [c for c in rep.attempts if c.status == "failed"]
    # Click 1: the "failed" figure filters the table to the failed compiles.
    browser.eval("document.querySelector('button.fig[data-status=failed]').click()")
    shown = _visible_ids(browser)
    assert len(shown) == len(failed) and set(shown) == {c.key for c in failed}
    # Click 2: a failed compile's id opens its section, with the reason and the inputs in view.
    c = failed[-1]
    anchor = browser.eval(
        "(() => { const a = Array.from(document.querySelectorAll('#ctable tbody tr'))"
        ".filter(tr => !tr.hidden).pop().querySelector('a'); a.click(); return a.hash.slice(1); })()"
    )
    browser.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
    sec = f"document.getElementById({anchor!r})"
    assert browser.eval(f"{sec}.querySelector('details').open") is True
    reason = browser.eval(f"{sec}.querySelector('.callout.failed').innerText")
    assert (c.fail_type or "") in reason
    assert (c.fail_reason or "").strip().splitlines()[0] in reason
    visible_inputs = browser.eval(
        f"Array.from({sec}.querySelectorAll('table.inputs td.src code'))"
        ".filter(e => e.checkVisibility()).map(e => e.textContent)"
    )
    assert visible_inputs == [s for i in c.inputs for s in i.sources]
    browser.screenshot(tmp_path / "failed-compile.png")


def test_hostile_text_is_inert(browser: Chromium, tmp_path: Path) -> None:
    log = hostile_log(tmp_path)
    _, dest = page_for(log, tmp_path / "hostile.html")
    assert problems(browser.load(dest), dest) == []
    text = browser.eval(ALL_TEXT)
    assert problems(browser.settled(), dest) == []
    for name, s in HOSTILE.items():
        assert s in text, name  # shown as text, exactly
    assert browser.eval("typeof window.pwned") == "undefined"
    assert (
        browser.eval(
            "document.querySelectorAll('.pwn, img, script:not(:last-of-type), [onerror], [onload]').length"
        )
        == 0
    )
    assert browser.eval("document.scripts.length") == 1


def download_trace(browser: Chromium, dest: Path, downloads: Path) -> dict[str, Any]:
    """Click the page's trace download link; the Chrome trace it gives."""
    assert problems(browser.load(dest), dest) == []
    downloads.mkdir()
    browser.call(
        "Browser.setDownloadBehavior",
        session="",
        behavior="allow",
        downloadPath=str(downloads),
        eventsEnabled=True,
    )
    browser.eval("document.getElementById('dl-trace').click(); 1")
    seen: list[dict[str, Any]] = []
    while True:
        ev = browser.wait_for("Browser.downloadProgress", seen)
        if ev["params"]["state"] in ("completed", "canceled"):
            break
    assert ev["params"]["state"] == "completed"
    (f,) = downloads.iterdir()
    return json.loads(f.read_text())


def test_download_link_gives_the_phases_as_a_chrome_trace(
    browser: Chromium, tmp_path: Path
) -> None:
    rep, dest = page_for(DEMO, tmp_path / "demo.html")
    trace = download_trace(browser, dest, tmp_path / "downloads")
    phases = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    assert len(phases) == sum(len(c.phases) for c in rep.attempts)
    by_id: dict[str, int] = {}
    for e in phases:
        by_id[e["args"]["compile_id"]] = by_id.get(e["args"]["compile_id"], 0) + 1
    assert by_id == {c.key: len(c.phases) for c in rep.attempts if c.phases}
    first = min(phases, key=lambda e: e["ts"])
    assert first["name"] == "dynamo" and first["ph"] == "X" and first["dur"] > 0


def test_downloaded_trace_keeps_ranks_of_one_pid_apart(browser: Chromium, tmp_path: Path) -> None:
    """Ranks 0 and 2 of tlparse's 4-rank job logged the same pid: four processes, each with
    its own rank's phases."""
    rep, dest = page_for(corpus("tlparse-tests", "multi_rank_logs"), tmp_path / "ranks.html")
    trace = download_trace(browser, dest, tmp_path / "downloads")
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert sorted(names.values()) == ["rank 0", "rank 1", "rank 2", "rank 3"]
    got = Counter(names[e["pid"]] for e in trace["traceEvents"] if e["ph"] != "M")
    want = Counter(f"rank {c.rank}" for c in rep.attempts for _ in c.phases)
    assert got == want and len(want) == 4


def test_the_harness_sees_script_errors_and_requests(browser: Chromium, tmp_path: Path) -> None:
    """The checks above would catch a failing script or a fetch: this page has both."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!doctype html><img src="http://127.0.0.1:9/x.png">'
        "<script>document.title = 'x'; null.boom();</script>"
    )
    found = problems(browser.load(bad), bad)
    assert any(p.startswith("script error") for p in found), found
    assert any(p == "request: http://127.0.0.1:9/x.png" for p in found), found


def test_one_compile_page(browser: Chromium, tmp_path: Path) -> None:
    # --compile-id's page: one section, open, its table row, no script error.
    log = corpus("dynamic_shapes")
    rep = load(log, kept.page_keep(False, "0/1"))
    dest = tmp_path / "one.html"
    dest.write_text(html.render(rep, only=("0/1", lambda c: c.key == "0/1")))
    assert problems(browser.load(dest), dest) == []
    shown = browser.eval(
        "Array.from(document.querySelectorAll('section.compile'), s => [s.id,"
        " s.querySelector('details').open])"
    )
    assert shown == [["c-0/1", True]]
    assert browser.eval("document.querySelectorAll('#ctable tbody tr').length") == 1
    assert "This page shows compile 0/1 alone" in browser.eval("document.body.innerText")
    assert problems(browser.settled(), dest) == []


def test_compressed_payloads_open_as_their_text(browser: Chromium, tmp_path: Path) -> None:
    """The page holds long payloads gzip-compressed: opened, each shows its exact text (also one
    that is an equal payload's), coloured, with nothing fetched."""
    rep, dest = page_for(FIXTURES / "kernels.log", tmp_path / "kernels.html")
    assert problems(browser.load(dest), dest) == []
    c = next(c for c in rep.attempts if c.key == "0/0")
    code = next(p for p in c.graphs if p.kind == "inductor_output_code")
    pos = next(k for k, (_, p) in enumerate(section_payloads(c)) if p is code)
    anchor = f"c-0/0-p{pos}"
    el = f"document.getElementById({anchor!r})"
    assert browser.eval(f"{el}.querySelector('pre code').dataset.gz.length") > 0
    browser.eval(
        f"{el}.closest('section').querySelector('details').open = true; {el}.open = true; 1"
    )
    browser.eval(SETTLE)
    assert browser.eval(f"{el}.querySelector('pre code').textContent") == code.text
    assert browser.eval(f"{el}.querySelectorAll('pre code span.k').length") > 10  # coloured
    # Payloads equal to another (same md5) show its text.
    same = browser.eval(
        "Array.from(document.querySelectorAll('code[data-same]'), c => c.closest('details').id)"
    )
    assert same
    for a in same:
        browser.eval(
            f"(d => {{ d.closest('section').querySelector('details').open = true; d.open = true; }})(document.getElementById({a!r})); 1"
        )
    browser.eval(SETTLE)
    want = page_payloads(dest.read_text())
    for a in same:
        got = browser.eval(f"document.getElementById({a!r}).querySelector('pre code').textContent")
        assert got == want[a] and got
    assert problems(browser.settled(), dest) == []
    # A browser without DecompressionStream says what to do instead.
    assert problems(browser.load(dest), dest) == []
    browser.eval(f"delete window.DecompressionStream; {el}.open = true; 1")
    browser.eval(SETTLE)
    said = browser.eval(f"{el}.querySelector('pre code').textContent")
    assert said.startswith("(not shown: this browser has no DecompressionStream; tlview show")


def test_pass_diffs_open_as_their_text(browser: Chromium, tmp_path: Path) -> None:
    """A compile's pass steps, each folded: opened, a diff the page holds compressed shows its
    text, with no script error and nothing fetched."""
    _, dest = page_for(FIXTURES / "passes.log", tmp_path / "passes.html")
    assert "+++ merge_splits_pass_pre_grad" not in dest.read_text()  # compressed in the page
    assert problems(browser.load(dest), dest) == []
    text = browser.eval(ALL_TEXT)
    assert "--- before_pre_grad_graph\n+++ merge_splits_pass_pre_grad" in text
    assert "+++ after_pre_grad_graph" in text  # a short diff, as text
    assert problems(browser.settled(), dest) == []


PROVENANCE_LOGS = [
    # torch 2.13 (node mapping version 2.0: each kernel call by its debug handle), JIT forward
    ("kernels", lambda: FIXTURES / "kernels.log", "0/0", "c-0/0", "relu"),
    # torch 2.8 on CUDA (kernels by name alone), JIT and AOTInductor (outside any compile id)
    (
        "jit",
        lambda: corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt"),
        "0/0",
        "c-0/0",
        "x_1",
    ),
    (
        "aot",
        lambda: corpus("tlparse-tests", "inductor_provenance_aot_cuda_log.txt"),
        "-/-",
        "c--/-",
        "relu",
    ),
]


def _marked(browser: Chromium, view: str, role: str) -> list[int]:
    """The 1-based lines the view marks in one pane."""
    return browser.eval(
        f"Array.from(document.getElementById({view!r}).querySelector('pre[data-pane={role}]')"
        ".children).flatMap((s, i) => s.classList.contains('hl') ? [i + 1] : [])"
    )


def _click_line(browser: Chromium, view: str, role: str, line: int) -> None:
    browser.eval(
        f"document.getElementById({view!r}).querySelector('pre[data-pane={role}]')"
        f".children[{line - 1}].click(); 1"
    )


@pytest.mark.parametrize("case", PROVENANCE_LOGS, ids=[c[0] for c in PROVENANCE_LOGS])
def test_provenance_view_links_nodes_and_kernels(
    browser: Chromium, tmp_path: Path, case: tuple[Any, ...]
) -> None:
    """tlparse's -i view: click a pre-grad node, its post-grad nodes and its kernels' lines are
    marked; click a kernel's line, its nodes are; click a post-grad node, both others are."""
    name, log, key, section, node = case
    rep, dest = page_for(log(), tmp_path / f"{name}.html")
    c = next(c for c in rep.attempts if c.key == key)
    (x,) = cross_links(c, lambda p: p.text)
    assert x.pre and x.post and x.code
    view = f"{section}-prov1"
    assert problems(browser.load(dest), dest) == []
    browser.eval(
        f"(v => {{ v.closest('section').querySelector('details').open = true; v.open = true; }})"
        f"(document.getElementById({view!r})); 1"
    )
    browser.eval(SETTLE)
    texts = browser.eval(
        f"Array.from(document.getElementById({view!r}).querySelectorAll('pre.prov-text'),"
        " p => [p.dataset.pane, Array.from(p.children, s => s.textContent).join('\\n')])"
    )
    assert dict(texts) == {
        "pre": x.pre.payload.text,
        "post": x.post.payload.text,
        "code": x.code.payload.text,
    }

    def lines_of(pane: Any, names: list[str]) -> list[int]:
        return sorted({n for k in names for n in pane.lines.get(k, [])})

    # A pre-grad node: its post-grad nodes, and the kernels that compute them.
    post = x.pre_to_post[node]
    kernels = sorted({k for p in post for k in x.post_to_code.get(p, [])})
    assert kernels
    _click_line(browser, view, "pre", x.pre.lines[node][0])
    assert _marked(browser, view, "pre") == lines_of(x.pre, [node])
    assert _marked(browser, view, "post") == lines_of(x.post, post)
    assert _marked(browser, view, "code") == lines_of(x.code, kernels) != []
    said = browser.eval(
        f"document.getElementById({view!r}).querySelector('.prov-said').textContent"
    )
    assert said.startswith(f"pre-grad: {node}; post-grad: ") and all(k in said for k in kernels)
    # And back: a kernel's line marks the post-grad nodes it computes, and their pre-grad nodes.
    kernel = kernels[0]
    _click_line(browser, view, "code", x.code.lines[kernel][-1])
    on_line = [k for k, ls in x.code.lines.items() if x.code.lines[kernel][-1] in ls]
    nodes = sorted({p for k in on_line for p in x.code_to_post.get(k, [])})
    assert _marked(browser, view, "post") == lines_of(x.post, nodes) != []
    pres = sorted({q for p in nodes for q in x.post_to_pre.get(p, [])})
    assert _marked(browser, view, "pre") == lines_of(x.pre, pres)
    # A post-grad node: its pre-grad node and its kernels.
    p = post[0]
    _click_line(browser, view, "post", x.post.lines[p][0])
    assert _marked(browser, view, "pre") == lines_of(x.pre, x.post_to_pre[p])
    assert _marked(browser, view, "code") == lines_of(x.code, x.post_to_code[p])
    assert problems(browser.settled(), dest) == []
    browser.eval(f"document.getElementById({view!r}).scrollIntoView(); 1")
    browser.screenshot(tmp_path / f"provenance-{name}.png")
