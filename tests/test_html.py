"""The HTML page as text: every field of the index on it, the budget, escaping, nothing from the environment.

What a browser does with the page is in test_html_browser.py.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html as htmllib
import os
import re
import shlex
import socket
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from helpers import CORPUS, FIXTURES, ROOT, corpus, only_log

import tlview
from tlview import __version__
from tlview.analyze.compiles import analysed, restarted
from tlview.analyze.names import Refs
from tlview.analyze.summary import overview
from tlview.index import compiles
from tlview.load import read as load
from tlview.model import Divergence, Report
from tlview.render.html import budget as kept
from tlview.render.html import inputs, metrics, page, payloads, pick, section, timeline
from tlview.render.html import report as html
from tlview.render.html.payloads import section_payloads
from tlview.runtime import halves, templates

DEMO = FIXTURES / "demo.log"


def real_paths() -> list[Path]:
    """Every real log the tests have: each corpus folder (and its subfolders), and the demo."""
    # reset: compile ids started over (0/0@2), also after a restart; refused: a recompile
    # error_on_recompile stopped; draft_export: export issues
    out = [
        DEMO,
        *(FIXTURES / f"{n}.log" for n in ("reset", "reset_break", "refused", "draft_export")),
    ]
    if CORPUS.is_dir():
        for d in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
            out += _launches(d)
            for sub in sorted(p for p in d.iterdir() if p.is_dir()):
                out += _launches(sub)
    return out


def _launches(folder: Path) -> list[Path]:
    """A folder torch wrote (every log named by it) as one path; a folder of logs gathered by
    hand (tlparse's tests: one program each) as its logs, one launch each."""
    logs = sorted(folder.glob("*.log"))
    if all(p.name.startswith("dedicated_log_torch_trace_") for p in logs):
        return [folder]
    return logs


def render(path: Path | str, full: bool = False) -> tuple[Report, str]:
    rep = load(path, kept.page_keep(full))
    return rep, html.render(rep, full=full)


def esc(s: str) -> str:
    """Text as Jinja's autoescape writes it."""
    return str(htmllib.escape(s, quote=True)).replace("&#x27;", "&#39;").replace("&quot;", "&#34;")


def esc_text(s: str) -> str:
    """Text as the page writes element content (the `text` filter): quotes stay."""
    return htmllib.escape(s, quote=False)


_PAYLOAD = re.compile(
    r'<details class="payload" id="([^"]+)"[^>]*>.*?(?:<pre class="code"><code([^>]*)>(.*?)</code></pre>)?\s*</details>',
    re.S,
)
_ATTR = re.compile(r'\s(id|data-gz|data-same)="([^"]*)"')


def page_payloads(text: str) -> dict[str, str | None]:
    """Each payload of a page by its anchor: the text it shows (as the page's script shows it:
    gzip in base64 unpacked, an equal payload's text for data-same), None if it shows none."""
    packed: dict[str, str] = {}
    found: list[tuple[str, dict[str, str], str | None]] = []
    for m in _PAYLOAD.finditer(text):
        attrs = dict(_ATTR.findall(m.group(2) or ""))
        body = None if m.group(3) is None else htmllib.unescape(m.group(3))
        if "data-gz" in attrs:
            body = gzip.decompress(base64.b64decode(attrs["data-gz"])).decode()
            packed[attrs["id"]] = body
        found.append((m.group(1), attrs, body))
    return {
        a: packed[attrs["data-same"]] if "data-same" in attrs else body for a, attrs, body in found
    }


# -- hostile text, through real records ----------------------------------------------------------------
HOSTILE = {
    "source": "L['</script><b class=\"pwn\">s</b>']",
    "file": '/tmp/"><img src=x onerror="window.pwned=1">/</script><b class="pwn">f</b>.py',
    "artifact": 'wrapper\'"><script>window.pwned=2</script><b class="pwn">a</b>',
    "graph": '# </script><b class="pwn">g</b><img src=x onerror=window.pwned=3><svg onload=window.pwned=4>',
    "log": 'h"><img src=x onerror=window.pwned=5><b class="pwn">l<b>.log',
}
_HEAD = re.compile(rb"^(?:\[rank\d+\]:)?[A-Z]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\n]*?\] (?=\{)")


def hostile_log(tmp: Path) -> Path:
    """The demo log with hostile text in a source, a file name, an artifact name and a graph.

    Record lines are edited as JSON and the graph's `has_payload` md5 recomputed, so every record
    is still valid: the text reaches the page the way a log written by torch would bring it.
    """
    units: list[list[bytes]] = []
    for line in DEMO.read_bytes().split(b"\n"):
        if line.startswith(b"\t") and units:
            units[-1].append(line)
        else:
            units.append([line])
    done: set[str] = set()
    seen_x = False
    out = []
    for unit in units:
        m = _HEAD.match(unit[0])
        if m is None:
            out.append(b"\n".join(unit))
            continue
        rec = orjson.loads(unit[0][m.end() :])
        payload = b"\n".join(ln[1:] for ln in unit[1:]) if len(unit) > 1 else None
        kind = next(iter(rec))
        body = rec[kind]
        if kind == "describe_source" and body["source"] == "L['x']" and "source" not in done:
            # The second: the first is of attempt 0/0, which restarted (the page shows 0/0_1).
            if seen_x:
                body["source"] = HOSTILE["source"]
                done.add("source")
            seen_x = True
        elif kind == "str" and body[0].endswith("demo.py"):
            body[0] = HOSTILE["file"]
            done.add("file")
        elif (
            kind == "artifact" and body["name"] == "compiled_fn_wrapper" and "artifact" not in done
        ):
            body["name"] = HOSTILE["artifact"]
            done.add("artifact")
        elif kind == "dynamo_output_graph" and payload is not None and "graph" not in done:
            payload += b"\n" + HOSTILE["graph"].encode()
            rec["has_payload"] = hashlib.md5(payload, usedforsecurity=False).hexdigest()
            done.add("graph")
        line = m.group(0) + orjson.dumps(rec)
        if payload is not None:
            line += b"\n" + b"\n".join(b"\t" + ln for ln in payload.split(b"\n"))
        out.append(line)
    assert done == {"source", "file", "artifact", "graph"}, done
    dest = tmp / HOSTILE["log"]
    dest.write_bytes(b"\n".join(out))
    return dest


# -- contents --------------------------------------------------------------------------------------
@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("path", real_paths(), ids=lambda p: p.name)
def test_page_shows_every_compile_input_and_metric(path: Path) -> None:
    rep, text = render(path)
    assert text.startswith("<!doctype html>")
    assert f"tlview {__version__}" in text[:4096]  # the marker that lets tlview overwrite it
    if rep.torch_version:
        assert f"<dd>{esc(rep.torch_version)}</dd>" in text
    refs = Refs.of(rep)
    anchors = [v.anchor for v in page.build(rep).compiles]
    # what torch counts, and what is outside any compile; restarted attempts nest in them
    shown = [a for a in analysed(rep) if not restarted(a.compile)]
    assert len(anchors) == len(set(anchors)) == len(shown)
    assert sum(1 + len(a.earlier) for a in shown) == len(list(rep.attempts))
    for a, anchor in zip(shown, anchors, strict=True):
        c = a.compile
        ref = refs(c)
        assert anchor.startswith("c-" + re.sub(r"[^A-Za-z0-9_.:/!@-]", "_", ref))
        sec = _section(text, anchor)
        assert f'<span class="cid" title="{esc(ref)}">' in sec
        assert f'"><a href="#{anchor}">{esc(c.key)}</a></td>' in text  # its row in the table
        for n, e in enumerate(a.earlier):  # each attempt that restarted, inside its compile's
            assert f'<details class="attempt" id="{anchor}-a{n}">' in sec
            assert f'<span class="cid" title="{esc(e.ref)}">{esc(e.compile.key)}</span>' in sec
            for p in e.compile.payloads():
                assert (
                    f'<code class="kind">{esc(p.kind)}</code> <span class="dim">line {p.line},'
                    in sec
                )
            for i in e.compile.inputs:
                for src in i.sources:
                    assert f"<code>{esc_text(src)}</code>" in sec, (e.ref, src)
        for i in c.inputs:
            for s in i.sources:
                assert f"<code>{esc_text(s)}</code>" in sec, (ref, s)
        nulls = re.search(r'<p class="dim">null: ([^<]*)</p>', sec)
        for k, v in (c.metrics or {}).items():
            if v is None:
                assert nulls is not None and k in nulls.group(1).split(", "), (ref, k)
            else:
                assert f"<dt>{esc_text(k)}</dt><dd>" in sec, (ref, k)
        for p in c.payloads():
            assert (
                f'<code class="kind">{esc(p.kind)}</code> <span class="dim">line {p.line} ' in sec
            )
        if c.fail_type:
            assert f"<strong>Failed: {esc(c.fail_type)}</strong>" in sec
    o = overview(rep)
    assert f'<span class="v">{o.compiles:,}</span> <span class="l">compiles</span>' in text
    for b in o.breaks:
        assert f'<td class="num">{b.count}</td>' in text
    for log in rep.logs:
        for bad in log.bad_lines:
            assert f'<td class="num">{bad.line}</td><td>{esc(bad.reason)}</td>' in text


def test_header_breaks_and_recompiles_of_the_demo() -> None:
    rep, text = render(DEMO)
    assert "<title>tlview: demo.log</title>" in text
    assert "<dd>2.13.0+cpu</dd>" in text
    assert "<dd>11-29 18:56:30 to 11-29 18:56:31</dd>" in text
    assert f"<dd>{__version__}</dd>" in text
    # One graph-break reason, twice, at one place, in two compiles (links to each).
    row = re.search(r'<tr id="gb-1">(.*?)</tr>', text, re.S)
    assert row is not None
    assert '<td class="num">2</td>' in row.group(1)
    assert 'demo.py:15 <span class="dim">×2</span>' in row.group(1)
    assert '<a href="#c-0/0_1">0/0_1</a>, <a href="#c-0/1_1">0/1_1</a>' in row.group(1)
    # The recompile of frame 0 is shown next to its compile, with what changed.
    sec = _section(text, "c-0/1_1")
    assert 'Recompiled</strong> after <a href="#c-0/0_1">0/0_1</a>' in sec
    assert "tensor &#39;x&#39; size mismatch at index 0. expected 4, actual 6" in sec
    assert (
        "<td><code>L[&#39;x&#39;]</code></td><td>size[0]</td><td><code>4</code></td><td><code>6</code></td>"
        in sec
    )


def _section(text: str, anchor: str) -> str:
    start = text.index(f'<section class="compile" id="{anchor}"')
    return text[start : text.index("</section>", start)]


def test_aliasing_picture_spans_the_bytes_each_tensor_covers() -> None:
    rep, text = render(DEMO)
    c = next(c for c in rep.attempts if c.key == "2/0")
    st, plain = inputs.storages(c)
    assert plain == 0
    # views(base.t(), base[2:, 1:5], randn(4, 4)[:, ::2]) with base a 6x10 float32 tensor.
    shared = st[0]
    assert shared.alias_group == 1 and shared.size == 240
    spans = {s.label: (s.start, s.end) for s in shared.spans}
    assert spans == {"L['a']": (0, 240), "L['b']": (84, 220), "base of L['a']": (0, 240)}
    assert {s.label: (s.start, s.end) for s in st[1].spans} == {
        "L['c']": (0, 60),
        "base of L['c']": (0, 64),
    }
    b = next(s for s in shared.spans if s.label == "L['b']")
    assert (b.x, b.w) == ("35.000", "56.667")  # 84/240 and 136/240 of the bar
    sec = _section(text, "c-2/0")
    assert 'storage 0 · 240 B · <span class="alias a1">shared #1</span>' in sec
    assert "[4, 4] stride [10, 1] offset 21 float32: bytes 84 to 220" in sec
    assert '<rect class="fill a1" x="35.000%" width="56.667%"' in sec


def test_span_of_symbolic_zero_size_and_unknown_dtype() -> None:
    from tlview.model import TensorDesc

    def t(**f: object) -> TensorDesc:
        return TensorDesc(1, {"dtype": "torch.float16", "storage": 0, **f})

    assert inputs.byte_range(t(size=[2, 3], stride=[3, 1], storage_offset=4)) == (8, 20)
    assert inputs.byte_range(t(size=[0, 3], stride=[3, 1], storage_offset=4)) == (8, 8)
    assert inputs.byte_range(t(size=["s0", 3], stride=[3, 1])) == (None, None)
    assert inputs.byte_range(t(size=[2], stride=[1], dtype="torch.mystery")) == (None, None)
    assert inputs.byte_range(t(size=[], stride=[], dtype="torch.complex128", storage_offset=2)) == (
        32,
        48,
    )


def test_every_storage_of_the_corpus_views_log_is_drawn() -> None:
    rep, text = render(corpus("views_aliasing"))
    drawn = 0
    for c in rep.attempts:
        keys = {i.storage_key for i in c.inputs if i.storage_key}
        views, plain = inputs.storages(c)
        drawn += len(views)
        assert keys <= {f"{i.describer}:{i.tensor.storage}" for i in c.inputs}
        assert len(views) + plain >= len(keys)
        for sv in views:
            for s in sv.spans:
                if s.start is not None and isinstance(sv.size, int) and sv.size:
                    assert s.end is not None and 0 <= s.start <= s.end, (c.key, s)
    assert drawn  # views share storages: some are drawn


def test_divergence_and_recompile_records_are_rendered() -> None:
    rep = load(DEMO, kept.page_keep(False))
    rep.divergence = [
        Divergence("compile ids", [1, 3], "ranks 1 and 3 compiled 0/2; the others did not")
    ]
    text = html.render(rep)
    sec = text[text.index('<section id="divergence"') :]
    sec = sec[: sec.index("</section>")]
    assert "<td>compile ids</td><td>1, 3</td>" in sec
    assert "ranks 1 and 3 compiled 0/2; the others did not" in sec
    assert text.index('id="divergence"') < text.index('id="compiles"')


def test_failures_show_reason_stack_and_dynamo_error() -> None:
    rep, text = render(corpus("compile_error"))
    failed = [c for c in rep.attempts if c.status == "failed"]
    assert len(failed) == 7
    refs = Refs.of(rep)
    for c in failed:
        sec = _section(text, "c-" + re.sub(r"[^A-Za-z0-9_.:/!-]", "_", refs(c)))
        assert f"<strong>Failed: {esc(c.fail_type or '')}</strong>" in sec
        assert esc((c.fail_reason or "").strip().splitlines()[0]) in sec
        assert '<details class="stack" open>' in sec
        for p in c.artifacts:
            if p.kind == "dynamo_error":
                assert '<details class="payload" id="' in sec and "Traceback" in sec


def test_timeline_of_a_compile_and_of_the_page() -> None:
    rep, text = render(DEMO)
    c = next(c for c in rep.attempts if c.key == "2/0")
    tl = timeline.compile_timeline(c.phases)
    assert tl is not None and len(tl.bars) == len(c.phases) == 8
    assert {b.name for b in tl.bars} >= {"dynamo", "entire_frame_compile", "build_guards"}
    outer = next(b for b in tl.bars if b.name == "dynamo")
    assert (outer.x, outer.w, outer.row) == ("0.000", "100.000", 0)
    sec = _section(text, "c-2/0")
    assert sec.count('class="bar  ph"') == 8
    lanes = re.findall(r'<a href="#(c-[^"]+)"><svg class="bar st-', text)
    # A lane per compile with phases; the attempts that restarted (0/0, 0/1) are their compile's.
    assert {c.key for c in rep.attempts if c.phases} == {"0/0", "0/1", *(k[2:] for k in lanes)}
    assert set(lanes) == {"c-0/0_1", "c-0/1_1", "c-1/0", "c-1/1", "c-2/0"}


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_truncated_log_shows_phases_that_never_ended() -> None:
    rep, text = render(corpus("truncated_log"))
    inc = [c for c in rep.attempts if c.status == "incomplete"]
    assert inc
    sec = _section(text, "c-" + inc[0].key)
    assert "<strong>Never finished.</strong>" in sec
    assert "began and never ended" in sec
    assert 'data-dur=""' in sec


def shown_by_line(rep: Report, text: str) -> dict[int, str | None]:
    """What the page shows of each payload of a one-log report, by the payload's log line."""
    shown = page_payloads(text)
    out: dict[int, str | None] = {}
    for r in page.build(rep).compiles:
        c = rep.logs[r.at[0]].compiles[r.at[1]]
        for pos, (_, p) in enumerate(section_payloads(c)):
            out[p.line] = shown[f"{r.anchor}-p{pos}"]
    return out


def test_budget_cuts_visibly_and_full_keeps_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    path = corpus("transformer_inductor")
    whole = {
        (p.line): p.text for c in load(path, kept.page_keep(True)).attempts for p in c.payloads()
    }
    monkeypatch.setattr(kept, "PAYLOAD_BYTES", 2000)
    monkeypatch.setattr(kept, "PAGE_PAYLOAD_BYTES", 20_000)
    rep, text = render(path)
    payloads = [p for c in rep.attempts for p in c.payloads()]
    cuts = re.findall(
        r"Cut: showing the first ([\d,]+) of ([\d,]+) lines \(([^)]*)\); the rest is at line (\d+) of ",
        text,
    )
    left = re.findall(r"Not on this page: [^;]+; it is at line (\d+) of ", text)
    assert cuts and left
    noted = {int(c[3]) for c in cuts} | {int(n) for n in left}
    assert len(noted) == len(cuts) + len(left)  # one note per payload
    assert {p.line for p in payloads if p.bytes > 2000} <= noted
    shown = shown_by_line(rep, text)
    for p in payloads:
        if p.line not in noted and p.bytes:
            assert shown[p.line] == whole[p.line], p.kind  # whole, as the page's script shows it
    for shown_lines, total, _, line in cuts:
        p = next(p for p in payloads if p.line == int(line))
        assert int(total.replace(",", "")) == p.lines
        assert int(shown_lines.replace(",", "")) < p.lines
        got = shown[p.line]
        assert got is not None and (whole[p.line] or "").startswith(got)
    for line in left:
        assert shown[int(line)] is None
    banner = re.search(r'<p class="budget" role="note" id="budget">(.*?)</p>', text, re.S)
    assert banner is not None
    assert f"{len(cuts)} payloads cut" in banner.group(1)
    assert f"{len(left)} payloads left out" in banner.group(1)
    assert "--full" in banner.group(1) and "tlview show PATH --compile-id ID NAME" in banner.group(
        1
    )
    # Each payload left out is listed, with the command that writes it whole.
    listed = re.findall(
        r'<tr><td class="id"><a href="#([^"]+)">[^<]*</a></td><td><code>([^<]+)</code></td>'
        r'<td class="num">[^<]*</td><td class="num">(\d+)</td>'
        r"<td><code>tlview show PATH --compile-id ([^ ]+) ([^<]+)</code></td><td>the page budget</td></tr>",
        text,
    )
    # The names are quoted for a shell (`'fx_graph_runnable#2'`): as a shell reads them.
    listed = [(a, n, ln, r, shlex.split(htmllib.unescape(x))[0]) for a, n, ln, r, x in listed]
    assert sorted(int(line) for _, _, line, _, _ in listed) == sorted(int(n) for n in left)
    for anchor, name, line, ref, again in listed:
        assert name == again and anchor.startswith(f"c-{ref}-p")
        named = dict(tlview.artifacts(rep, ref))
        assert named[name].line == int(line)
    # --full: every payload whole, no cut, no banner.
    rep, text = render(path, full=True)
    assert "Cut: showing" not in text and "Not on this page" not in text
    assert 'id="budget"' not in text
    shown = shown_by_line(rep, text)
    for c in rep.attempts:
        for p in c.payloads():
            assert p.text is not None and len(p.text.encode()) == p.bytes
            assert shown[p.line] == p.text


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_default_budget_holds_on_real_logs() -> None:
    shown = 0
    for path in real_paths():
        built = page.build(load(path, kept.page_keep(False)))
        assert built.budget.shown_bytes <= kept.PAGE_PAYLOAD_BYTES
        for v in section.compile_views(built):
            for pv in v.graphs + v.artifacts + v.errors + v.guards:
                assert pv.shown <= kept.PAYLOAD_BYTES
                assert (pv.note is None) == (pv.shown == pv.bytes or pv.bytes == 0), pv.kind
        shown += built.budget.shown_bytes
    assert shown > 0


def test_repeated_long_metrics_link_to_the_first_compile() -> None:
    rep, text = render(DEMO)
    built = page.build(rep)
    first, later = [v for v in section.compile_views(built) if v.metrics][:2]
    cfg = next(m for m in first.metrics if m.name == "dynamo_config")
    assert cfg.same_as is None and cfg.value.startswith("{\n")
    again = next(m for m in later.metrics if m.name == "dynamo_config")
    assert again.same_as == (first.anchor, first.ref)
    metrics = list(rep.attempts)[later.row.n].metrics or {}
    nulls = [k for k, v in metrics.items() if v is None]
    assert later.null_metrics == nulls


# -- safety ------------------------------------------------------------------------------------------
def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    log = hostile_log(tmp_path)
    rep, text = render(log)
    for name, s in HOSTILE.items():
        assert s not in text, name
        assert esc(s) in text or esc_text(s) in text, name
    assert f"<title>tlview: {esc(HOSTILE['log'])}</title>" in text
    assert text.count("<script") == 1  # only the page's own
    assert re.search(r"<(img|svg onload|b class=\"pwn\")", text) is None


def test_content_security_policy_allows_only_the_inline_assets() -> None:
    _, text = render(DEMO)
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text)
    assert csp is not None
    policy = htmllib.unescape(csp.group(1))
    assert "default-src 'none'" in policy
    script = re.search(r"<script>(.*?)</script>", text, re.S)
    style = re.search(r"<style>(.*?)</style>", text, re.S)
    assert script is not None and style is not None
    for body, directive in ((script.group(1), "script-src"), (style.group(1), "style-src")):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy
    assert not re.search(r"<(link|img|iframe|object|embed)\b", text)
    assert not re.search(r"\s(src|srcset)=", text)
    assert " style=" not in text  # style attributes would need 'unsafe-inline'


def test_nothing_from_the_environment(tmp_path: Path) -> None:
    secret = "zq81-secret-value"
    env = dict(
        os.environ,
        TLVIEW_TEST_SECRET=secret,
        USER="zq81user",
        LOGNAME="zq81user",
        HOME=str(tmp_path / "zq81home"),
    )
    log = tmp_path / "run" / "demo.log"
    log.parent.mkdir()
    log.write_bytes(DEMO.read_bytes())
    out = tmp_path / "report.html"
    code = "import sys; from tlview.cli import main; sys.exit(main())"
    r = subprocess.run(
        [sys.executable, "-c", code, "report", str(log), "--format", "html", "-o", str(out)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    logtext = DEMO.read_text()
    for k, v in env.items():
        if len(v) >= 6 and v not in logtext:
            assert v not in text, k
    for v in (str(tmp_path), socket.gethostname(), "zq81"):
        assert v not in text or v in logtext, v
    assert "demo.log" in text


# -- packaging and the command -------------------------------------------------------------------------------
@pytest.mark.slow
def test_templates_from_a_built_wheel(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    (wheel,) = tmp_path.glob("tlview-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for t in ("report.html.j2", "macros.html.j2", "report.css", "report.js"):
            assert f"tlview/templates/{t}" in names
        assert "tlview/py.typed" in names  # the API's annotations reach users' type checkers
        z.extractall(tmp_path / "site")
    out = tmp_path / "page.html"
    code = (
        "import sys, tlview; assert tlview.__file__.startswith(sys.argv[1]), tlview.__file__; "
        "from tlview.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tmp_path / "site"),
            "report",
            str(DEMO),
            "--format",
            "html",
            "-o",
            str(out),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    assert '<section class="compile" id="c-2/0"' in text and "<code>L['c']</code>" in text


def test_cli_writes_and_rewrites_its_own_page(tmp_path: Path) -> None:
    from helpers import run_cli

    out = tmp_path / "r.html"
    for _ in range(2):  # the second run replaces the page it wrote, without --force
        r = run_cli("report", DEMO, "--format", "html", "-o", out)
        assert r.exit_code == 0, r.output
    # 5 compiles and the records outside any compile; the attempts that restarted are their
    # compile's (0/0 in 0/0_1's section).
    assert out.read_text().count('<section class="compile" id="c-') == 6
    r = run_cli("report", DEMO, "--format", "html", "--full", "-o", out)
    assert r.exit_code == 0
    assert 'id="budget"' not in out.read_text()


def test_compiles_beyond_the_detail_budget_keep_status_reasons_and_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pick, "DETAIL_COMPILES", 3)
    rep, text = render(DEMO)
    built = page.build(rep)
    detailed = [v.key for v in built.compiles if v.detail]
    # Graph breaks, restarts and recompiles come before plain compiles.
    assert detailed == ["0/0_1", "0/1_1", "1/1"]
    assert built.budget.light == len(built.compiles) - 3
    assert f"{built.budget.light} compiles shown without details" in text
    views = list(section.compile_views(built))
    assert [v.key for v in views] == [r.key for r in built.compiles]
    compiles = list(rep.attempts)
    for v in views:
        sec = _section(text, v.anchor)
        note = "for this one it shows the status, reasons and inputs" in sec
        assert note == (not v.detail)
        c = compiles[v.row.n]
        for i in c.inputs:
            for s in i.sources:
                assert f"<code>{esc_text(s)}</code>" in sec
        assert ("compilation_metrics" in sec) == (v.detail and bool(c.metrics))
    assert "Recompiled</strong> after" in _section(text, "c-1/1")
    # --full shows every compile in full.
    assert all(v.detail for v in page.build(rep, full=True).compiles)


def _dangling(text: str) -> set[str]:
    """Links within the page that point at nothing on it."""
    ids = set(re.findall(r'\sid="([^"]*)"', text))
    return {h for h in re.findall(r'\shref="#([^"]*)"', text) if h not in ids}


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("path", real_paths(), ids=lambda p: p.name)
def test_every_link_on_the_page_has_its_target(path: Path) -> None:
    _, text = render(path)
    assert _dangling(text) == set()


def test_compiles_beyond_the_page_cap_are_counted_and_full_shows_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = corpus("compile_error")  # two logs, 13 compiles, 7 of them failed
    monkeypatch.setattr(pick, "PAGE_COMPILES", 9)
    rep, text = render(path)
    compiles = list(rep.attempts)
    failed = [k for k, c in enumerate(compiles) if c.status == "failed"]
    rest = [k for k, c in enumerate(compiles) if c.status != "failed"]
    assert len(compiles) == 13 and len(failed) == 7
    # Failures first, then the rest in log order; the page lists them in log order.
    shown = sorted(failed + rest[:2])
    refs = [Refs.of(rep)(compiles[k]) for k in shown]
    built = page.build(rep)
    assert [r.ref for r in built.compiles] == refs
    b = built.budget
    assert (b.compiles, b.hidden, b.hidden_problems) == (13, 4, 0)
    assert len(re.findall(r'<section class="compile" id="', text)) == 9
    assert len(re.findall(r'<td class="id" data-sort="', text)) == 9
    for k, c in enumerate(compiles):
        anchor = "c-" + re.sub(r"[^A-Za-z0-9_.:/!-]", "_", Refs.of(rep)(c))
        assert (f'<section class="compile" id="{anchor}"' in text) == (k in shown)
    # Every failure has its row among the failures and its section; the figures count all.
    problems = text[text.index('<section id="problems"') :]
    problems = problems[: problems.index("</section>")]
    assert problems.count('<td class="id"><a href="#c-') == 7
    o = overview(rep)
    assert f'<span class="v">{o.compiles:,}</span> <span class="l">compiles</span>' in text
    assert f'<span class="v">{o.failures:,}</span> <span class="l">failed</span>' in text
    # Said at the top and above the table, with how to see them all.
    banner = re.search(r'<p class="budget" role="note" id="budget">(.*?)</p>', text, re.S)
    assert banner is not None
    assert "4 of 13 compiles not on this page" in banner.group(1)
    assert "--full" in banner.group(1) and "--format json" in banner.group(1)
    note = re.search(r'<p class="budget" role="note" id="compiles-left-out">(.*?)</p>', text, re.S)
    assert note is not None
    assert "<strong>4 of 13 compiles are not on this page</strong>: it shows 9" in note.group(1)
    assert "--full" in note.group(1) and "--format json" in note.group(1)
    assert _dangling(text) == set()
    # --full: every compile, no note.
    rep, text = render(path, full=True)
    assert page.build(rep, full=True).budget.hidden == 0
    assert len(re.findall(r'<section class="compile" id="', text)) == 13
    assert 'id="compiles-left-out"' not in text


def test_page_cap_keeps_problems_first_and_counts_left_out_recompiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pick, "PAGE_COMPILES", 3)
    rep, text = render(DEMO)
    built = page.build(rep)
    # Graph breaks, restarts and recompiles come before plain compiles, then log order.
    assert [r.key for r in built.compiles] == ["0/0_1", "0/1_1", "1/1"]
    assert built.budget.hidden == 3  # 1/0, 2/0 and the records outside any compile
    assert built.budget.hidden_recompiles == 0  # both recompiles (0/1_1, 1/1) are shown
    sec = text[text.index('<section id="recompiles"') :]
    sec = sec[: sec.index("</section>")]
    assert 'Recompiles <span class="count">2</span>' in sec
    assert "more recompiles are not on this page" not in sec
    assert [v.key for v in section.compile_views(built)] == ["0/0_1", "0/1_1", "1/1"]
    assert _dangling(text) == set()


def _reachable(root: object, stop: list[object]) -> list[object]:
    """Every object `root` refers to, directly or not, without going through those in `stop`."""
    import gc
    import types

    seen = {id(x) for x in stop}
    out, todo = [], [root]
    while todo:
        x = todo.pop()
        if id(x) in seen or isinstance(x, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(x))
        out.append(x)
        todo.extend(gc.get_referents(x))
    return out


@pytest.mark.slow
def test_page_holds_one_compile_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import io
    import tracemalloc
    import weakref

    from tlview.model import Compile, Input, Payload

    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    path = corpus("tlparse-tests", "multi_rank_logs")  # 4 logs, 25 compiles (16 in one)
    rep = load(path, kept.page_keep(False))
    assert sum(log.compiles.on_disk for log in rep.logs) == 2  # type: ignore[attr-defined]
    every = len(list(rep.attempts))
    # The page-wide parts keep no compile, payload or input: only rows.
    built = page.build(rep)
    assert len(built.compiles) == every
    the_report = [rep, *rep.logs, *(log.compiles for log in rep.logs)]
    held = [x for x in _reachable(built, the_report) if isinstance(x, Compile | Payload | Input)]
    assert held == []

    # Each section is dropped once written: while one is made, only the one written last lives.
    class Tracked(section.CompileView):
        __slots__ = ("__weakref__",)

    made: list[weakref.ref[section.CompileView]] = []
    real_section = section.section

    def tracked(*args: object, **kw: object) -> section.CompileView:
        alive = [r for r in made if r() is not None]
        assert len(alive) <= 1, [r().key for r in alive]  # type: ignore[union-attr]
        v = real_section(*args, **kw)  # type: ignore[arg-type]
        made.append(weakref.ref(v))
        return v

    monkeypatch.setattr(section, "CompileView", Tracked)
    monkeypatch.setattr(section, "section", tracked)
    monkeypatch.setattr(halves, "MIN_COST", 1 << 62)  # every section in this process, counted
    sink = io.BytesIO()
    html.stream(rep, sink)
    assert len(made) == every
    for c in rep.attempts:
        for i in c.inputs:
            for s in i.sources:
                assert f"<code>{esc_text(s)}</code>".encode() in sink.getvalue()

    # So writing the page takes less memory than the compiles would all at once.
    class Null(io.RawIOBase):
        def write(self, b: object) -> int:
            return len(b)  # type: ignore[arg-type]

    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        html.stream(rep, Null())  # type: ignore[arg-type]  # write() is all stream needs
        peak = tracemalloc.get_traced_memory()[1] - start
        gc.collect()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        everything = list(rep.attempts)
        held_all = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert len(everything) == every
    assert peak < held_all, (peak, held_all)


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_compiled_templates_are_cached_and_a_broken_cache_is_ignored(tmp_path: Path) -> None:
    # The page's template is compiled once per machine, not per run; a cache that cannot be
    # written or holds garbage costs a compile, never the page.
    import jinja2

    rep = load(DEMO)
    want = html.render(rep)

    def page_with(cache: jinja2.BytecodeCache) -> str:
        env = html.page_environment()
        saved = env.bytecode_cache
        env.bytecode_cache = cache
        env.cache.clear()  # type: ignore[union-attr]
        try:
            return html.render(rep)
        finally:
            env.bytecode_cache = saved
            env.cache.clear()  # type: ignore[union-attr]

    good = tmp_path / "cache"
    good.mkdir()
    assert page_with(templates._Cache(str(good))) == want
    files = sorted(good.iterdir())
    # the page's template, its sections', their macros, phases and facts, a section's passes
    assert len(files) == 6
    assert page_with(templates._Cache(str(good))) == want  # read back
    files[0].write_bytes(files[0].read_bytes()[: files[0].stat().st_size // 2])  # cut short
    files[1].write_bytes(jinja2.bccache.bc_magic + b"not a pickled checksum")
    files[2].write_bytes(b"")
    assert page_with(templates._Cache(str(good))) == want
    files[1].write_bytes(b"j2 not a cache file")
    assert page_with(templates._Cache(str(good))) == want
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert page_with(templates._Cache(str(not_a_dir))) == want


def test_the_metric_digest_cache_stays_small(monkeypatch: pytest.MonkeyPatch) -> None:
    # Long metric values (configs) are digested once each; the cache holds the texts, so it is
    # bounded in characters, and a value too long for it is digested without being kept.
    monkeypatch.setattr(metrics, "DIGESTS_CHARS", 8_000)
    monkeypatch.setattr(metrics, "_DIGESTS", {})
    monkeypatch.setattr(metrics, "_DIGESTED", 0)
    texts = [f"{k:04d}" * 100 for k in range(100)]  # 400 characters each
    first = [metrics.digest(t) for t in texts]
    assert len(set(first)) == 100
    assert sum(map(len, metrics._DIGESTS)) <= 8_000 and metrics._DIGESTED <= 8_000
    assert [metrics.digest(t) for t in texts] == first  # the same, kept or not
    huge = "x" * 2_000  # over an eighth of the budget: not kept
    assert metrics.digest(huge) == metrics.digest("x" * 2_000) and huge not in metrics._DIGESTS


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_compile_id_page_shows_that_compile_alone_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # truncated_log 0/1: a recompile whose joint graph (90 KB) is past a page budget of 64 KiB
    # a payload (the whole page's, below).
    log = corpus("truncated_log")
    rep = load(log, kept.page_keep(True))
    c = next(c for c in rep.attempts if c.key == "0/1")
    graph = next(p for p in c.graphs if p.kind == "aot_joint_graph")
    assert graph.text is not None and len(graph.text) > 64 * 1024
    tail = graph.text[-300:]
    out = tmp_path / "one.html"
    res = subprocess.run(
        [sys.executable, "-m", "tlview", "report", str(log), "--compile-id", "0/1", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert re.findall(r'<section class="compile" id="([^"]*)"', text) == ["c-0/1"]
    assert "This page shows compile <code>0/1</code> alone</strong>" in text
    assert 'id="budget"' not in text  # nothing cut, nothing left out but by choice
    assert any(
        t and t.endswith(tail)
        for t in page_payloads(_section(text, "c-0/1") + "</section>").values()
    )
    # The figures count every compile of the log.
    assert (
        f'<span class="v">{overview(rep).compiles:,}</span> <span class="l">compiles</span>' in text
    )
    assert f"The figures above count all {overview(rep).compiles:,} compiles;" in text
    # The whole page cuts that graph to its budget.
    monkeypatch.setattr(kept, "PAYLOAD_BYTES", 64 * 1024)
    _, whole = render(log)
    shown = page_payloads(_section(whole, "c-0/1"))
    assert not any(t and t.endswith(tail) for t in shown.values())


def test_compile_time_section_links_the_slowest_compiles() -> None:
    rep, text = render(corpus("dynamic_shapes"))
    o = overview(rep)
    sec = text[
        text.index('<section id="time"') : text.index(
            "</section>", text.index('<section id="time"')
        )
    ]
    assert f'<span class="count">{o.compile_time_s:.2f} s</span>' in sec
    assert '<td class="id">all 12</td>' in sec
    anchors = {v.ref: v.anchor for v in page.build(rep).compiles}
    for s in o.slowest:
        assert (
            f'<a href="#{anchors[s.ref]}">{esc(s.ref)}</a></td><td>{esc(s.function or "")}</td>'
            in sec
        )
    assert '<a href="#time">Compile time</a>' in text


def test_compile_time_names_a_ranks_compiles_as_the_page_does() -> None:
    """A job's page names a compile `rank 0 4/0` in its tables and chips: the compile-time table
    too (it said `rank0:4/0`, the terminal's form)."""
    rep, text = render(corpus("multirank_gloo"))
    sec = text[
        text.index('<section id="time"') : text.index(
            "</section>", text.index('<section id="time"')
        )
    ]
    views = {v.ref: v for v in page.build(rep).compiles}
    slowest = overview(rep).slowest
    assert {s.ref for s in slowest[:2]} == {"rank0:4/0", "rank1:4/0"}
    for s in slowest:
        v = views[s.ref]
        assert f'<a href="#{v.anchor}">{esc(v.label)}</a></td>' in sec
    assert '<a href="#c-rank0:4/0">rank 0 4/0</a></td><td>allred</td>' in sec
    assert "rank0:" not in re.sub(r'href="[^"]*"', "", sec)


def test_figures_filter_only_to_rows_that_exist() -> None:
    """A figure of 0 ("0 failed") is no button: it would filter the table to nothing it has.
    The table's count says rows (it also has the row of records outside any compile)."""
    _, quiet = render(corpus("mlp_aot_eager"))
    # No row is an attempt that restarted: its compile's row says it restarted.
    assert 'data-status="failed"' not in quiet and 'data-status="restarted"' not in quiet
    assert '<span id="shown" aria-live="polite">5 rows</span>' in quiet
    _, failing = render(corpus("compile_error"))
    assert 'class="fig failed" data-status="failed"' in failing


@pytest.mark.parametrize(
    "path",
    [lambda: corpus("subclasses"), lambda: corpus("tlparse-tests", "multi_rank_logs")],
    ids=["subclasses", "multi_rank_logs"],
)
def test_timeline_bars_never_cover_each_other(path: Callable[[], Path]) -> None:
    """A short compile's bar is drawn wider than its time: the next bar of its row starts after
    it as drawn (in the shared last row alone, overlaps are left)."""
    p = page.build(load(path(), kept.page_keep(False)))
    seen = 0
    for lane in p.lanes:
        for row in range(min(lane.rows, timeline.MAX_LANE_ROWS - 1)):
            bars = sorted((b for b in lane.bars if b.row == row), key=lambda b: float(b.x))
            for a, b in zip(bars, bars[1:], strict=False):
                assert float(b.x) >= float(a.x) + float(a.w) - 0.01, (lane.label, a.name, b.name)
                seen += 1
    assert seen > 0


def test_logs_of_one_rank_are_told_apart_in_labels(tmp_path: Path) -> None:
    """Two logs of rank 1 in one directory (a job run twice): a compile is `rank 1 (a5) 0/0`,
    not `rank 1 a5 0/0`, where the log's name reads as part of the id."""
    (rank1,) = corpus("multirank_gloo").glob("*rank_1*.log")
    for name in ("a5", "b7"):
        (tmp_path / f"dedicated_log_torch_trace_rank_1_{name}.log").write_bytes(rank1.read_bytes())
    rep, text = render(tmp_path)
    assert sorted({r.log_short for r in page.build(rep).compiles}) == ["rank 1 (a5)", "rank 1 (b7)"]
    assert '<span class="lg">rank 1 (a5)</span> 0/0' in text
    assert '<span class="lg">rank 1 a5</span>' not in text


def test_a_page_over_budget_keeps_what_a_reader_opens_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five real logs in one report: failed compiles (compile_error), restarts, graph breaks
    and recompiles (mlp_aot_eager, dynamic_shapes), inductor's slowest compiles
    (transformer_inductor); five launches of one folder, each read with --launch and put in one
    report. With a page budget of 600 KB of their 1.7 MB of payload text, the
    graphs, code and guards of the failed and recompiled compiles are all on the page; what is
    left out is of the others, and the page lists exactly that, each with its command."""
    for src in (
        corpus("compile_error", "dedicated_log_torch_trace_y1oz5uyn.log"),
        only_log("mlp_aot_eager"),
        only_log("transformer_inductor"),
        only_log("dynamic_shapes"),
        only_log("views_aliasing"),
    ):
        (tmp_path / src.name).write_bytes(src.read_bytes())
    monkeypatch.setattr(kept, "PAGE_PAYLOAD_BYTES", 600_000)
    keep = kept.page_keep(False)
    parts = [load(tmp_path, keep, launch=n) for n in range(1, 6)]
    rep = Report(path=str(tmp_path), logs=[lg for p in parts for lg in p.logs])
    text = html.render(rep)
    built = page.build(rep)
    slowest = {s.ref for s in built.o.slowest}
    shown = page_payloads(text)
    tiers = {r.anchor: payloads.compile_tier(r, slowest) for r in built.compiles}
    assert {tiers[r.anchor] for r in built.compiles} >= {0, 1, 2, 4}
    missing = set()
    for r in built.compiles:
        for pl in r.payloads:
            anchor = f"{r.anchor}-p{pl.pos}"
            if shown[anchor] is None and pl.bytes:
                missing.add(anchor)
                assert tiers[r.anchor] >= 2 or pl.tier == 2, (r.ref, pl.name)
            elif tiers[r.anchor] <= 1 and pl.tier <= 1 and pl.bytes:
                assert shown[anchor] is not None, (r.ref, pl.name)
    assert missing and built.budget.left_out == len(missing)
    at = text.index('id="left-out"')
    table = text[at : text.index("</details>", at)]
    listed = set(re.findall(r'<tr><td class="id"><a href="#([^"]+)">', table))
    assert listed == missing
    summary = re.search(
        r'<details class="budget" id="left-out">\s*<summary>(.*?)</summary>', text, re.S
    )
    assert summary is not None
    assert summary.group(1).startswith(f"The {len(missing)} payloads left out (")
    by_tier = [0] * len(payloads.COMPILE_TIERS)
    for r in built.compiles:
        by_tier[tiers[r.anchor]] += sum(f"{r.anchor}-p{pl.pos}" in missing for pl in r.payloads)
    said = ", ".join(
        f"{n} of {t} compiles" for t, n in zip(payloads.COMPILE_TIERS, by_tier, strict=True) if n
    )
    assert f"): {said}, and how to get each" in summary.group(1)
    assert by_tier[2] > 0  # the budget ran out among the slowest compiles' payloads
