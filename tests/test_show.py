"""`tlview show`: a compile's artifacts listed, one written whole (its exact bytes into a file or
with --raw, its text made inert on a pipe or a terminal), every refusal one line, and shell
completion."""

from __future__ import annotations

import hashlib
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete
from helpers import FIXTURES, ROOT, corpus, run_cli

import tlview
from tlview.cli import main
from tlview.parse import Reader

EXIT_USAGE = 2


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def logged_md5s(log: Path) -> dict[int, str]:
    """Each record's has_payload md5, by its line: what torch computed of the payload's bytes."""
    return {r.line: r.meta["has_payload"] for r in Reader(log) if "has_payload" in r.meta}


def test_listing_names_each_artifact_once() -> None:
    """The listing is a table as the report draws them; inductor's per-graph artifacts say which
    graph they are of, beside their position."""
    res = run_cli("show", FIXTURES / "kernels.log", "--compile-id", "0/0")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"Artifacts of compile 0/0 (27) in {FIXTURES / 'kernels.log'}"
    assert [c.strip() for c in lines[1].split(" | ")] == ["name", "log line", "lines", "bytes"]
    assert set(lines[2]) == {"-", "+"}
    rows = [[c.strip() for c in ln.split(" | ")] for ln in lines[3:-1]]
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)) == 27
    # Forward, then backward: the second of a kind is KIND#2, in log order.
    assert ["inductor_output_code (forward)", "1608", "208", "10.0 KiB"] in rows
    assert ["inductor_output_code#2 (backward)", "3143", "258", "12.4 KiB"] in rows
    assert names.index("dynamo_cpp_guards_str") < names.index("fx_graph_runnable#2 (backward)")
    assert [int(r[1]) for r in rows] == sorted(int(r[1]) for r in rows)
    assert lines[-1].endswith("--compile-id 0/0 NAME writes one whole")
    assert all(ln == ln.rstrip() for ln in lines)
    # A record torch wrote without a payload says so.
    res = run_cli("show", FIXTURES / "cache_hit.log", "--compile-id", "0/0")
    row = next(ln for ln in res.stdout.splitlines() if "node_mappings " in ln)
    assert [c.strip() for c in row.split(" | ")] == [
        "inductor_provenance_tracking_node_mappings (forward)",
        "666",
        "0",
        "0 B",
        "no payload",
    ]


def test_every_artifact_is_written_byte_for_byte() -> None:
    # Text without control characters: the payload's exact bytes even when not into a file,
    # whose md5 is the one torch logged.
    log = FIXTURES / "demo.log"
    want = logged_md5s(log)
    for ref in ("0/0_1", "2/0"):
        named = tlview.artifacts(log, ref)
        assert named
        for name, p in named:
            res = run_cli("show", log, "--compile-id", ref, name)
            assert res.exit_code == 0, res.output
            assert res.stderr == ""
            assert len(res.stdout_bytes) == p.bytes
            assert md5(res.stdout_bytes) == want[p.line], (ref, name)


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_odd_text_is_exact_in_a_file_and_inert_on_a_pipe_or_terminal(tmp_path: Path) -> None:
    # Line breaks other than \n, form feeds, TABs of the payload's own, non-ASCII text.
    log = FIXTURES / "payloads.log"
    want = logged_md5s(log)
    out = tmp_path / "odd.txt"
    with out.open("wb") as f:
        done = subprocess.run(
            [sys.executable, "-m", "tlview", "show", str(log), "--compile-id", "-/-", "odd_breaks"],
            stdout=f,
            cwd=ROOT,
            timeout=300,
        )
    assert done.returncode == 0
    data = out.read_bytes()
    assert md5(data) == want[8]
    assert "\u2028".encode() in data and b"\x0c" in data
    tabs = tlview.artifact(log, "-/-", "tabs_inside").data
    assert tabs is not None and md5(tabs) == want[11] and b"\treturn x\t#" in tabs
    # Through a pipe (`| less`): the same text made inert; with --raw, the exact bytes.
    inert = "line one\\u2028still one\\x0cform feed\\x85next\nline two: caf\u00e9 \u2603"
    cmd = [sys.executable, "-m", "tlview", "show", str(log), "--compile-id", "-/-", "odd_breaks"]
    piped = subprocess.run(cmd, capture_output=True, cwd=ROOT, check=True, timeout=300)
    assert piped.stdout.decode() == inert and piped.stderr == b""
    raw = subprocess.run([*cmd, "--raw"], capture_output=True, cwd=ROOT, check=True, timeout=300)
    assert raw.stdout == data
    # On a terminal: the text, its control characters shown as escapes, not obeyed.
    main_fd, child_fd = pty.openpty()
    cmd = [sys.executable, "-m", "tlview", "show", str(log), "--compile-id", "-/-", "odd_breaks"]
    proc = subprocess.Popen(cmd, stdout=child_fd, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(child_fd)
    seen = b""
    while True:
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(main_fd)
    assert proc.wait(240) == 0
    shown = seen.decode().replace("\r\n", "\n")
    assert shown == "line one\\u2028still one\\x0cform feed\\x85next\nline two: caf\u00e9 \u2603\n"


def test_an_altered_payload_is_written_as_the_log_holds_it(tmp_path: Path) -> None:
    # A payload byte changed after torch wrote it (its md5 no longer matches).
    lines = (FIXTURES / "demo.log").read_text().split("\n")
    k = next(
        i for i, ln in enumerate(lines) if '{"dynamo_output_graph"' in ln and '"frame_id": 2' in ln
    )
    lines[k + 3] = lines[k + 3].replace("a", "A", 1)
    log = tmp_path / "altered.log"
    log.write_text("\n".join(lines))
    res = run_cli("show", log, "--compile-id", "2/0", "dynamo_output_graph")
    assert res.exit_code == 0
    assert res.stderr == (
        "tlview: dynamo_output_graph: its md5 does not match (cut short or altered): "
        "written as the log holds it\n"
    )
    assert res.stdout_bytes.decode().split("\n")[2] == lines[k + 3][1:]


def test_refusals_are_one_line() -> None:
    log = FIXTURES / "demo.log"
    res = run_cli("show", log, "--compile-id", "2/0", "inductor_output_code")
    assert res.exit_code == EXIT_USAGE
    assert res.stderr == (
        f"tlview: {log}: compile 2/0 has no artifact 'inductor_output_code'; it has: "
        "dynamo_output_graph, dynamo_cpp_guards_str\n"
    )
    res = run_cli("show", log, "--compile-id", "9/0")
    assert res.exit_code == EXIT_USAGE and "no compile '9/0'" in res.stderr
    assert len(res.stderr.splitlines()) == 1
    res = run_cli("show", log)
    assert res.exit_code == EXIT_USAGE and "--compile-id" in res.stderr
    # Several logs: a compile named by its rank.
    job = corpus("multirank_gloo")
    res = run_cli("show", job, "--compile-id", "0/0")
    assert res.exit_code == EXIT_USAGE and "is in several logs" in res.stderr
    res = run_cli("show", job, "--compile-id", "rank1:0/0")
    assert res.exit_code == 0 and res.stdout.startswith("compile rank1:0/0 of ")


def complete(words: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the shell is offered for the last of WORDS (as bash gives them to tlview)."""
    monkeypatch.setenv("COMP_WORDS", words)
    args = words.split()[1:]
    incomplete = "" if words.endswith(" ") else args.pop()
    sc = ShellComplete(main, {}, "tlview", "_TLVIEW_COMPLETE")
    return [c.value for c in sc.get_completions(args, incomplete)]


def test_ids_and_artifact_names_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    log = FIXTURES / "demo.log"
    ids = complete(f"tlview show {log} --compile-id ", monkeypatch)
    assert ids == [c.key for c in tlview.read(log).attempts]
    assert complete(f"tlview show {log} --compile-id 0/0", monkeypatch) == ["0/0", "0/0_1"]
    names = complete(f"tlview show {log} --compile-id 2/0 ", monkeypatch)
    assert names == ["dynamo_output_graph", "dynamo_cpp_guards_str"]
    assert complete(f"tlview show {log} --compile-id 2/0 dynamo_c", monkeypatch) == [
        "dynamo_cpp_guards_str"
    ]
    # Nothing to offer (no such log) is no error.
    assert complete("tlview show /nonexistent.log --compile-id ", monkeypatch) == []
