"""Hostile logs, second round (issue 28): each crafted log a test writes itself, one per way a
log broke tlview's promises. Nothing from a log reaches a terminal raw; `--max-bytes` bounds
what is really allocated and written; a record, its payload and the lines after it are bounded;
no input gives an internal error; output stays in proportion to the log; no run writes over
its own input; every path stays linear in what the log holds.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from crafted import (
    PREFIX,
    arg_name,
    compile_of,
    graph,
    interned,
    limited,
    metrics,
    record,
    source,
    start,
    storage,
    tensor,
)
from damage import EXIT_OK, EXIT_REFUSED, assert_clean_exit, run, units

import tlview

EXIT_NO_REPRO = 6
# What a terminal obeys: escapes, C0/C1 controls, bidi overrides and isolates.
OBEYED = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
ESC = "\x1b]0;TITLE\x07\x1b[2J\x9b2J\u202e"
PACKAGE = Path(__file__).resolve().parents[2] / "tlview"


def _log(tmp: Path, name: str, *parts: bytes) -> Path:
    p = tmp / name
    p.write_bytes(b"".join(parts))
    return p


def one_input(cid: tuple[int, int] = (0, 0), name: str = "L['x']", **fields: Any) -> bytes:
    """A compile of one f32[4, 4] input, its graph and its metrics."""
    return b"".join(
        [
            start(cid),
            storage(0, 64, cid),
            tensor(0, [4, 4], [4, 1], 0, cid=cid, **fields),
            source(0, name, cid),
            graph([("L_x_", "f32[4, 4][4, 1]cpu")], cid=cid),
            metrics(cid),
        ]
    )


def doc_of(path: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    res = run("report", str(path), "--format", "json", *extra, env=env)
    assert_clean_exit(res, EXIT_OK, str(path))
    return orjson.loads(res.stdout_bytes)


# -- 1. one sanitiser for everything printed from a log ------------------------------------------
@pytest.mark.slow  # over a second in all (pytest --durations)
def test_nothing_prints_but_through_the_sanitiser() -> None:
    """Every line a command prints goes through funnel.say (render/clean.py's rule), rich's
    text through console.T: no click.echo, print or stream write of its own elsewhere."""
    allowed = {
        ("commands/funnel.py", "say"),  # the one way out
        ("commands/funnel.py", "run"),  # its flush at exit
        ("commands/funnel.py", "invoke"),  # "tlview: interrupted" and "terminated"
        ("commands/funnel.py", "_warned"),  # a warning, cleaned
        ("replay/make.py", "make_one"),  # the --run warning: tlview's text and the user's DIR
        ("replay/make.py", "make_all"),
        ("replay/run.py", "_pump"),  # what repros print, cleaned, as it comes
        ("replay/child.py", "run_one"),  # the repro's child: its stdout is run_scripts' pipe
        ("runtime/halves.py", "result"),  # TLVIEW_DEBUG only
    }
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = (
                    f.id
                    if isinstance(f, ast.Name)
                    else f"{ast.unparse(f.value)}.{f.attr}"
                    if isinstance(f, ast.Attribute)
                    else ""
                )
                if name in ("print", "click.echo", "sys.stdout.write", "sys.stderr.write"):
                    where = (str(path.relative_to(PACKAGE)), fn.name)
                    if where not in allowed:
                        found.append(f"{where[0]}:{node.lineno} in {fn.name}: {name}")
    assert not found, "\n".join(found)


@pytest.mark.slow  # over a second
def test_messages_of_every_command_are_inert(tmp_path: Path) -> None:
    """A command's one-line failures and notes name the log's text escaped, tty or pipe."""
    bad = _log(tmp_path, f"x{ESC}.log", b"")
    for env in ({"NO_COLOR": "1"}, {"FORCE_COLOR": "1", "NO_COLOR": None}):
        for args in (
            ("report", str(bad)),
            ("inputs", str(bad)),
            ("repro", str(bad), "--all", "-o", str(tmp_path / "o")),
            ("diff", str(bad), str(FIXTURES / "demo.log")),
        ):
            res = run(*args, env=env)
            assert res.exit_code == 1, res.output
            assert not OBEYED.search(res.stderr), (args, res.stderr)
            assert "\\x1b]0;TITLE\\x07" in res.stderr, res.stderr


def test_json_printed_from_a_log_is_inert_and_exact(tmp_path: Path) -> None:
    """JSON writers escape C0 controls but not C1 controls or bidi overrides: tlview's JSON
    (report, diff, trace) writes those as \\uXXXX too, the values unchanged."""
    name = "L['x\u202eevil\u2066\x85\x9b2J']"
    log = _log(tmp_path, "bidi\u202e.log", interned("/m\u2028.py"), one_input(name=name))
    for args in (
        ("report", str(log), "--format", "json"),
        ("report", str(log), "--format", "perfetto"),
        ("diff", str(log), str(FIXTURES / "demo.log"), "--format", "json"),
    ):
        res = run(*args)
        assert_clean_exit(res, EXIT_OK, args[0])
        assert not OBEYED.search(res.stdout_bytes.decode("utf-8")), args
    doc = doc_of(log)
    assert doc["compiles"][0]["inputs"][0]["sources"] == [name]


@pytest.mark.slow
def test_repro_notes_and_summary_lines_are_inert(tmp_path: Path) -> None:
    """A source holding OSC and clear-screen escapes: repro's notes (stderr) and --all's
    summary lines (stdout) show them escaped."""
    pytest.importorskip("torch")
    src = "L['x\x1b[\x07\x9b']"  # dynamo's name for it is still L_x_
    refused = f"L['{ESC}']"  # a quantized input: its repro is skipped, the reason names it
    cid = (1, 0)
    quantized = start(cid) + storage(0, 16, cid)
    quantized += tensor(0, [4], [1], 0, dtype="torch.qint8", cid=cid) + source(0, refused, cid)
    quantized += graph([(arg_name(refused), "f32[4][1]cpu")], cid=cid) + metrics(cid)
    log = _log(
        tmp_path, "esc.log", interned("/m.py"), one_input(name=src, is_inference=True), quantized
    )
    one = run("repro", str(log), "--compile-id", "0/0", "-o", str(tmp_path / "one"))
    assert_clean_exit(one, EXIT_OK, "repro one")
    assert "inference tensor" in one.stderr and "\\x1b[\\x07\\x9b" in one.stderr, one.stderr
    every = run("repro", str(log), "--all", "-o", str(tmp_path / "all"))
    assert every.exit_code == EXIT_NO_REPRO, every.output
    assert "\\x1b]0;TITLE\\x07" in every.stdout, every.stdout  # 1/0's reason quotes its source
    for stream in (one.stdout, one.stderr, every.stdout, every.stderr):
        assert not OBEYED.search(stream), stream


# -- 2. --max-bytes bounds what is allocated and written, views and copies included ------------
DTYPES = [
    ("torch.float32", 4),
    ("torch.float16", 2),
    ("torch.bfloat16", 2),
    ("torch.float64", 8),
    ("torch.int8", 1),
    ("torch.uint8", 1),
    ("torch.int16", 2),
    ("torch.int32", 4),
    ("torch.int64", 8),
    ("torch.complex64", 8),
    ("torch.bool", 1),
    ("torch.float8_e4m3fn", 1),
]


def twelve_views(tmp: Path, size: int) -> Path:
    """One storage of SIZE bytes viewed whole under 12 dtypes."""
    parts = [interned("/m.py"), start(), storage(0, size)]
    for i, (dt, item) in enumerate(DTYPES):
        parts += [tensor(i, [size // item], [1], 0, dtype=dt), source(i, f"L['x{i}']")]
    return _log(tmp, "views.log", *parts, metrics())


@pytest.mark.slow
def test_max_bytes_counts_the_copies_saving_makes(tmp_path: Path) -> None:
    """torch.save copies each view of another dtype: 12 views of 4 MiB need 48 MiB, refused
    under that before anything is allocated, and the file written is what was counted."""
    pytest.importorskip("torch")
    size = 4 << 20
    log = twelve_views(tmp_path, size)
    out = tmp_path / "o.pt"
    res = run("inputs", str(log), "--emit", str(out), "--max-bytes", str(12 * size - 1))
    assert_clean_exit(res, EXIT_REFUSED, "under the copies")
    assert "need 48.0 MiB of memory" in res.stderr and not out.exists(), res.stderr
    p = limited(["inputs", str(log), "--emit", str(out), "--max-bytes", str(12 * size)], 3 << 30)
    assert p.returncode == 0, p.stderr.decode()
    assert 12 * size <= out.stat().st_size < 12 * size + (1 << 20)


@pytest.mark.slow
def test_rarer_dtypes_fill_with_bounded_temporaries(tmp_path: Path) -> None:
    """A 128 MiB float8 storage is filled from random floats a part at a time: the process
    grows by about the storage, not by the four times more a whole float copy would take."""
    pytest.importorskip("torch")
    size = 128 << 20
    log = _log(
        tmp_path,
        "f8.log",
        interned("/m.py"),
        start(),
        storage(0, size),
        tensor(0, [size], [1], 0, dtype="torch.float8_e4m3fn"),
        source(0, "L['x']"),
        metrics(),
    )
    code = (
        "import resource, sys\nfrom tlview.cli import main\nimport torch\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base\n"
        "    print(f'GREW {grew * 1024}', file=sys.stderr)\n    raise\n"
    )
    import subprocess

    p = subprocess.run(
        [sys.executable, "-c", code, "inputs", str(log), "--emit", str(tmp_path / "o.pt")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    grew = int(re.search(r"GREW (\d+)", p.stderr).group(1))  # type: ignore[union-attr]
    assert grew < 2 * size, grew


# -- 3. repro's --max-bytes is over everything it writes --------------------------------------------
@pytest.mark.slow
def test_repro_all_stops_at_max_bytes_with_the_figure(tmp_path: Path) -> None:
    """Six graphs of 1 MiB inputs under --max-bytes 3M: two written, four skipped saying what
    they need and what is left; the disk holds about what was allowed."""
    pytest.importorskip("torch")
    parts = [interned("/m.py")]
    for i in range(6):
        parts.append(compile_of((i, 0), [("L['x']", [256, 1024], "torch.float32")]))
    log = _log(tmp_path, "six.log", *parts)
    out = tmp_path / "repros"
    res = run("repro", str(log), "--all", "-o", str(out), "--max-bytes", "3M")
    assert res.exit_code == EXIT_NO_REPRO, res.output
    summary = json.loads((out / "summary.json").read_text())
    statuses = [g["status"] for g in summary["graphs"]]
    assert statuses == ["written"] * 2 + ["skipped"] * 4, statuses
    reason = summary["graphs"][2]["reason"]
    assert "need 1.0 MiB of memory and as much on disk, over --max-bytes 3.0 MiB" in reason
    assert "taken by the repros before" in reason
    written = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert written < 3 << 20, written
    one = run(
        "repro", str(log), "--compile-id", "1/0", "-o", str(tmp_path / "x"), "--max-bytes", "1000K"
    )
    assert_clean_exit(one, EXIT_NO_REPRO, "one graph over")
    assert "need 1.0 MiB" in one.stderr and not (tmp_path / "x" / "inputs.pt").exists()


def test_the_repro_default_is_bounded_by_the_disk(tmp_path: Path) -> None:
    from tlview.replay.make import default_bytes
    from tlview.tensors.options import DEFAULT_MAX_BYTES

    got = default_bytes(tmp_path / "not" / "yet")
    import shutil

    assert got == min(DEFAULT_MAX_BYTES, shutil.disk_usage(tmp_path).free // 2)


# -- 4, 5. one bound for a record line, its payload and the lines after it ----------------------
def _bounded_cases(tmp: Path) -> dict[str, tuple[Path, int, str]]:
    """Logs with one over-long unit between two compiles: the path, its line, the reason's words."""
    n = 3 << 20
    head = interned("/m.py") + one_input()
    tail = one_input((1, 0))
    art = record("artifact", {"name": "a", "encoding": "string"})
    lines = {
        "record line": (
            PREFIX + b'{"artifact": {"name": "x", "v": "' + b"a" * n + b'"}}\n',
            "a line of",
        ),
        "junk line": (b"j" * n + b"\n", "a line of"),
        "payload": (
            record(
                "artifact",
                {"name": "p", "encoding": "string"},
                payload=b"q" * 100 + b"\nq" * (n // 2),
            ),
            "payload of artifact",
        ),
        "blank lines": (art + b"\n" * n, "after the artifact record, no payload"),
        "CRLF blank lines": (art + b"\r\n" * (n // 2), "after the artifact record, no payload"),
    }
    out = {}
    line = head.count(b"\n") + 1
    for what, (unit, words) in lines.items():
        for gz in (False, True):
            data = head + unit + tail
            p = tmp / (what.replace(" ", "_") + (".log.gz" if gz else ".log"))
            p.write_bytes(gzip.compress(data, mtime=0) if gz else data)
            out[f"{what}{' (gzip)' if gz else ''}"] = (p, line, words)
    return out


@pytest.mark.slow  # over a second
def test_one_record_over_the_bound_is_one_bad_line(tmp_path: Path) -> None:
    """TLVIEW_MAX_RECORD=1M, a 3 MB line, payload or run of blank lines: one bad line at its
    line with its size and the bound; both compiles and the lines after it are read; mapped,
    chunked and gzipped alike."""
    env = {"TLVIEW_MAX_RECORD": "1M"}
    for what, (p, line, words) in _bounded_cases(tmp_path).items():
        for mmap in ("", "1"):
            doc = doc_of(p, env={**env, "TLVIEW_NO_MMAP": mmap})
            assert [c["key"] for c in doc["compiles"]] == ["0/0", "1/0"], what
            bad = [(b["line"], b["reason"]) for b in doc["bad_lines"]]
            assert len(bad) == 1 and words in bad[0][1], (what, bad)
            assert "1,048,576 bytes, $TLVIEW_MAX_RECORD" in bad[0][1], bad
            assert bad[0][0] in (line, line + 1), (what, bad, line)
            whole = doc_of(p, env={"TLVIEW_NO_MMAP": mmap})  # under the default bound
            assert whole["stats"]["lines"] == doc["stats"]["lines"], what
            if "line" not in what:  # the record whose payload or flood was not read is kept
                assert whole["stats"]["records"] == doc["stats"]["records"], what


def test_a_bad_bound_is_a_usage_error(tmp_path: Path) -> None:
    res = run("report", str(FIXTURES / "demo.log"), env={"TLVIEW_MAX_RECORD": "lots"})
    assert res.exit_code == 2 and "TLVIEW_MAX_RECORD 'lots'" in res.stderr, res.stderr


@pytest.mark.slow
def test_long_lines_and_floods_in_bounded_memory(tmp_path: Path) -> None:
    """Under the default bound, in a child whose address space is 1.5 GB: a 96 MiB record line
    (orjson would die of a signal on it), and a gzip of a few hundred KB that expands to a
    record then 400 MB of blank lines, or to one line with no end. Each is one bad line."""
    base = interned("/m.py") + one_input()
    line = PREFIX + b'{"artifact": {"name": "x", "v": [' + b"NaN," * (24 << 20) + b"1]}}\n"
    _log(tmp_path, "line.log", base, line, one_input((1, 0)))
    for name, fill in (("flood.log.gz", b"\n"), ("endless.log.gz", b"x")):
        with gzip.open(tmp_path / name, "wb", compresslevel=1) as z:
            z.write(base + record("artifact", {"name": "a"}))
            for _ in range(25):
                z.write(fill * (16 << 20))  # 400 MB in all, a few hundred KB on disk
    for name in ("line.log", "flood.log.gz", "endless.log.gz"):
        p = tmp_path / name
        res = limited(["report", str(p), "--format", "json"], 3 << 29)
        err = res.stderr.decode()
        assert res.returncode == 0 and "Traceback" not in err, (name, res.returncode, err[-500:])
        doc = orjson.loads(res.stdout)
        assert "0/0" in [c["key"] for c in doc["compiles"]], name
        assert len(doc["bad_lines"]) == 1 and "TLVIEW_MAX_RECORD" in doc["bad_lines"][0]["reason"]


# -- 6. numbers beyond 64 bits --------------------------------------------------------------------
def test_a_compile_id_beyond_64_bits_is_a_bad_line(tmp_path: Path) -> None:
    body = {"compile_id": "99999999999999999999/0", "co_name": "f"}
    big = b'{"str": ["/m.py", 123456789012345678901234567890]}'
    log = _log(
        tmp_path,
        "big.log",
        interned("/m.py"),
        one_input(),
        record("compilation_metrics", body, None),
        PREFIX + big + b"\n",
    )
    for fmt in ("json", "text", "html", "perfetto"):
        assert_clean_exit(run("report", str(log), "--format", fmt), EXIT_OK, fmt)
    doc = doc_of(log)
    assert "0/0" in [c["key"] for c in doc["compiles"]]
    reasons = [b["reason"] for b in doc["bad_lines"]]
    assert any("compile_id is not a compile id: '99999999999999999999/0'" in r for r in reasons)
    assert any("str" in r for r in reasons), reasons  # the index over 64 bits: a wrong type


# -- 7, 15. one graph that cannot be written is one entry; folders unique and bounded ----------
@pytest.mark.slow
def test_a_graph_annotation_of_other_digits_loses_no_graph(tmp_path: Path) -> None:
    """`f32[\u0663+1]` (an Arabic-Indic digit) in one graph's annotation: repro --all writes every
    graph and summary.json; that graph's script parses."""
    pytest.importorskip("torch")
    odd = b"".join(
        [
            start((1, 0)),
            storage(0, 64, (1, 0)),
            tensor(0, [4, 4], [4, 1], 0, cid=(1, 0)),
            source(0, "L['x']", (1, 0)),
            graph([("L_x_", "f32[\u0663+1, 4][4, 1]cpu")], cid=(1, 0)),
            metrics((1, 0)),
        ]
    )
    log = _log(tmp_path, "digits.log", interned("/m.py"), one_input(), odd, one_input((2, 0)))
    out = tmp_path / "repros"
    res = run("repro", str(log), "--all", "-o", str(out))
    assert_clean_exit(res, EXIT_OK, "repro --all")
    summary = json.loads((out / "summary.json").read_text())
    assert [g["status"] for g in summary["graphs"]] == ["written"] * 3
    ast.parse((out / "1-0" / "repro.py").read_text())


@pytest.mark.slow
def test_repro_folders_are_unique_and_short(tmp_path: Path) -> None:
    """`a b.log` and `a_b.log` make one slug, a 251-character name too long a folder: every
    graph gets a folder of its own, each under 101 characters, and summary.json names it."""
    pytest.importorskip("torch")
    d = tmp_path / "logs"
    d.mkdir()
    one = interned("/m.py") + one_input()
    for name in ("a b.log", "a_b.log", "A_B.log", "L" * 247 + ".log"):
        (d / name).write_bytes(one)
    out = tmp_path / "repros"
    res = run("repro", str(d), "--all", "-o", str(out))
    assert_clean_exit(res, EXIT_OK, "repro --all")
    graphs = json.loads((out / "summary.json").read_text())["graphs"]
    dirs = [g["dir"] for g in graphs]
    assert len(graphs) == 4 and len({x.lower() for x in dirs}) == 4, dirs
    assert all(len(x) <= 100 and (out / x / "repro.py").exists() for x in dirs), dirs
    logs = {g["log"]: g["dir"] for g in graphs}
    assert logs["a b.log"] != logs["a_b.log"]


def test_slugs_are_bounded_and_folders_unique() -> None:
    from tlview.replay.make import Folders
    from tlview.replay.script import slug

    assert slug("0/1_2") == "0-1_2" and slug("!0/1/0") == "ca0-1-0"
    long = slug("x" * 300 + ".log:0/0")
    assert len(long) == 100 and long != slug("x" * 301 + ".log:0/0")
    f = Folders()
    assert [f.take(r) for r in ("a b.log:0/0", "a_b.log:0/0", "A_B.log:0/0")] == [
        "a_b.log--0-0",
        "a_b.log--0-0-2",
        "A_B.log--0-0-3",
    ]


# -- 8. output in proportion to the log -----------------------------------------------------------
@pytest.mark.slow  # over a second
def test_a_long_interned_name_is_cut_with_its_length(tmp_path: Path) -> None:
    """A 64 KB file name interned once and named by 20 stacks of 500 frames: JSON, HTML and
    -v text stay within a few times the log, the name shown cut, with its length."""
    name = "/" + "d" * 65_535
    stack = [{"line": i, "name": "f", "filename": 0} for i in range(500)]
    parts = [interned(name)] + [record("dynamo_start", {"stack": stack}, (k, 0)) for k in range(20)]
    log = _log(tmp_path, "names.log", *parts)
    size = log.stat().st_size
    for fmt, extra in (("json", ()), ("html", ()), ("text", ("-v",))):
        out = tmp_path / f"out.{fmt}"
        assert_clean_exit(run("report", str(log), "--format", fmt, "-o", str(out), *extra), 0, fmt)
        assert out.stat().st_size < 40 * size, (fmt, out.stat().st_size, size)
    frame = tlview.expand_report(doc_of(log))["compiles"][0]["stack"][0]  # the strings table
    assert "...[65,536 characters]..." in frame["file"] and len(frame["file"]) < 520, frame


# -- 9. a log is never overwritten by its own report ----------------------------------------------
def test_the_log_is_never_overwritten_by_its_report(tmp_path: Path) -> None:
    """A log whose first 4 KB hold tlview's JSON signature in a payload is no file of
    tlview's: `-o LOG` is refused, with --force too, through a link too; a copy of it needs
    --force; tlview's own files are still replaced."""
    payload = b'{"format": "tlview.report/1", "written_by": "tlview 0.1.0"}'
    data = record("artifact", {"name": "x", "encoding": "json"}, payload=payload)
    data += interned("/m.py") + one_input()
    log = _log(tmp_path, "run.log", data)
    (tmp_path / "link.json").symlink_to(log)
    for extra in ((), ("--force",)):
        for dest in (log, tmp_path / "link.json"):
            res = run("report", str(log), "--format", "json", "-o", str(dest), *extra)
            assert_clean_exit(res, EXIT_REFUSED, f"{dest.name} {extra}")
            assert "is a log this run reads" in res.stderr
    assert log.read_bytes() == data
    copy = _log(tmp_path, "copy.log", data)
    res = run("report", str(log), "--format", "json", "-o", str(copy))
    assert_clean_exit(res, EXIT_REFUSED, "copy") and "--force" in res.stderr
    mine = tmp_path / "mine.json"
    for _ in range(2):
        assert_clean_exit(run("report", str(log), "--format", "json", "-o", str(mine)), 0, "own")
    from tlview.runtime.output import written_by_tlview

    assert written_by_tlview(mine) and not written_by_tlview(copy)


# -- 10. a damaged payload is still its compile's record ------------------------------------------
def test_a_compile_whose_first_payload_is_cut_is_kept(tmp_path: Path) -> None:
    data = (FIXTURES / "demo.log").read_bytes()
    u = units(data)[0]  # the chromium_event that opens compile 0/0
    cut = _log(tmp_path, "cut.log", data[: u.start + len(u.head) + 1 + 20])
    doc = doc_of(cut)
    assert [c["key"] for c in doc["compiles"]] == ["0/0"]
    assert doc["compiles"][0]["status"] == "incomplete"
    assert [b["line"] for b in doc["bad_lines"]] == [2]


# -- 11. a size no tensor can have ----------------------------------------------------------------
@pytest.mark.slow
def test_a_size_beyond_what_torch_builds_is_a_refused_tensor(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    odd = b"".join(
        [
            start(),
            storage(0, "1048575**64"),
            tensor(0, [4, 4], [4, 1], 0),
            source(0, "L['x']"),
            storage(1, 64),
            tensor(1, ["2**62*8", 4], [4, 1], 1),
            source(1, "L['y']"),
            graph([("L_x_", "f32[4, 4][4, 1]cpu")]),
            metrics(),
        ]
    )
    log = _log(tmp_path, "pow.log", interned("/m.py"), odd, one_input((1, 0)))
    out = tmp_path / "o.pt"
    res = run("inputs", str(log), "--emit", str(out))
    assert_clean_exit(res, EXIT_OK, "inputs --emit")
    import torch

    saved = torch.load(out, weights_only=True)
    assert "more than torch can build" in saved["failed"]["0/0"]["L['x']"]
    assert "more than torch can build" in saved["failed"]["0/0"]["L['y']"]
    assert list(saved["compiles"]["1/0"]) == ["L['x']"]
    assert_clean_exit(run("inputs", str(log)), EXIT_OK, "inputs")
    res = run("repro", str(log), "--all", "-o", str(tmp_path / "r"))
    assert res.exit_code == EXIT_NO_REPRO and "internal error" not in res.output, res.output
    graphs = json.loads((tmp_path / "r" / "summary.json").read_text())["graphs"]
    assert [g["status"] for g in graphs] == ["skipped", "written"]
    assert "more than torch can build" in graphs[0]["reason"]


def test_byte_counts_beyond_a_float_are_written() -> None:
    from tlview.units import nbytes

    assert nbytes(1048575**64) == "about 2^1279 B" and nbytes(3 << 40) == "3.0 TiB"


# -- 12. a short gzip cut yields what it holds ----------------------------------------------------
def test_a_gzip_cut_after_1000_bytes_is_read(tmp_path: Path) -> None:
    z = gzip.compress((FIXTURES / "demo.log").read_bytes(), mtime=0)
    log = _log(tmp_path, "cut.log.gz", z[:1000])
    doc = doc_of(log)
    assert [c["key"] for c in doc["compiles"]] == ["-/-", "0/0"]  # -/-: the torch version
    assert any("compressed data is damaged" in b["reason"] for b in doc["bad_lines"])


# -- 13. no step is quadratic: operation counts, not timings --------------------------------------
def _python_lines(fn: Any) -> int:
    """Lines of tlview's own code executed while FN runs (each pass of a loop is a line event;
    torch's code, whose work is per tensor, is not counted)."""
    import tlview

    count = [0]
    package = os.path.dirname(tlview.__file__)  # the tlview imported, wherever it is

    def lines(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
        return lines

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return lines if frame.f_code.co_filename.startswith(package) else None

    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count[0]


def _many_inputs(tmp: Path, n: int) -> Path:
    parts = [interned("/m.py"), start()]
    for i in range(n):
        parts += [storage(i, 4), tensor(i, [1], [1], i), source(i, f"L['x{i}']")]
    return _log(tmp, f"many{n}.log", *parts, metrics())


def _grows_linearly(measure: Any, n: int) -> None:
    """Twice the inputs, records or frames, then four times: the work added the second time is
    about twice the work added the first (a linear step: 2, a quadratic one: 4), whatever it
    costs to start."""
    a, b, c = measure(n), measure(2 * n), measure(4 * n)
    assert (c - b) < 2.6 * (b - a), (a, b, c)


@pytest.mark.slow  # over a second
def test_reading_and_reporting_stay_linear(tmp_path: Path) -> None:
    """The index, the JSON and the -v text reports over many inputs, many frames in one stack,
    and many compiles' stacks (-v prints every frame)."""
    from tlview.load import read as load
    from tlview.render import REPORT_FORMATS, Options
    from tlview.runtime.output import Output

    def reported(log: Path) -> int:
        def go() -> None:
            rep = load(log, jobs=1)
            for fmt, v in (("json", 0), ("text", 1)):
                REPORT_FORMATS[fmt].renderer()(rep, Output(os.devnull, True), Options(verbosity=v))

        return _python_lines(go)

    def frames(n: int) -> int:
        stack = [{"line": i, "name": f"f{i}", "filename": 0} for i in range(n)]
        one = record("dynamo_start", {"stack": stack})
        return reported(_log(tmp_path, f"frames{n}.log", interned("/m.py"), one))

    def stacks(n: int) -> int:
        stack = [{"line": i, "name": "f", "filename": 0} for i in range(20)]
        starts = [record("dynamo_start", {"stack": stack}, (k, 0)) for k in range(n)]
        return reported(_log(tmp_path, f"stacks{n}.log", interned("/m.py"), *starts))

    _grows_linearly(lambda n: reported(_many_inputs(tmp_path, n)), 300)
    _grows_linearly(frames, 500)
    _grows_linearly(stacks, 50)


@pytest.mark.slow
def test_rebuilding_many_inputs_stays_linear(tmp_path: Path) -> None:
    """`inputs --emit` (meta and random) and `repro` over many one-element inputs: each tensor
    is checked once, not against every other (`emit._meta_losses` was)."""
    pytest.importorskip("torch")
    from tlview.load import read as load
    from tlview.tensors.emit import emit_file
    from tlview.tensors.options import RebuildOptions

    def emit(mode: str) -> Any:
        def measure(n: int) -> int:
            rep = load(_many_inputs(tmp_path, n), jobs=1)
            out = str(tmp_path / f"{mode}{n}.pt")
            return _python_lines(
                lambda: emit_file(rep, rep.compiles, out, RebuildOptions(mode=mode))  # type: ignore[arg-type]
            )

        return measure

    def repro(n: int) -> int:
        from tlview.replay.make import ReproOptions, graph_keep, make_one

        parts = [interned("/m.py"), start()]
        for i in range(n):
            parts += [storage(i, 4), tensor(i, [1], [1], i), source(i, f"L['x{i}']")]
        params = [(f"L_x{i}_", "f32[1][1]cpu") for i in range(n)]
        log = _log(tmp_path, f"graph{n}.log", *parts, graph(params), metrics())
        rep = load(log, keep=graph_keep(), jobs=1)
        out = tmp_path / f"repro{n}"
        return _python_lines(lambda: make_one(rep, "0/0", out, ReproOptions()))

    emit("meta")(20)  # torch's first use (imports, caches) outside the counts
    repro(10)
    for mode in ("meta", "random"):
        _grows_linearly(emit(mode), 150)
    _grows_linearly(repro, 100)


# -- 14. no control or bidi character from a log in a repro script -------------------------------
@pytest.mark.slow
def test_repro_scripts_hold_no_control_or_bidi_character(tmp_path: Path) -> None:
    """Graph code whose comment holds OSC 52, clear-screen and bidi overrides, and a string
    holding ESC: repro.py holds them as escapes, the comment reads as it runs, and it runs."""
    pytest.importorskip("torch")
    body = (
        "# File: m.py:3 \x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J x = 1 \u202e } \u2066 // tail\n"
        "s = 'a\x1bb'"
    )
    g = graph([("L_x_", "f32[4, 4][4, 1]cpu")], body=body)
    parts = [start(), storage(0, 64), tensor(0, [4, 4], [4, 1], 0), source(0, "L['x']"), g]
    log = _log(tmp_path, "bidi.log", interned("/m.py"), *parts, metrics())
    out = tmp_path / "r"
    res = run("repro", str(log), "--compile-id", "0/0", "-o", str(out), "--run")
    assert_clean_exit(res, EXIT_OK, "repro --run")
    text = (out / "repro.py").read_text()
    assert not OBEYED.search(text.replace("\t", ""))
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in text and "\\u202e" in text
    assert "s = 'a\\x1bb'" in text
