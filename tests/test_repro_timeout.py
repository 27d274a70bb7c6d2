"""`repro --run --timeout S`: a repro running past S is stopped with whatever it started, the
next repro still runs, and the child's output is streamed with only its tail kept.

The repro scripts here are written by hand: they stand for a graph that hangs or floods, which
no small torch program does on demand; replay/child.py runs them as it runs tlview's own."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import run_cli

from tlview.replay import DEFAULT_TIMEOUT
from tlview.replay.run import TAIL_BYTES, Tail, run_scripts

pytestmark = pytest.mark.slow  # each case starts Python processes and waits out a timeout

# What replay/script.py's repro.py gives the child: COMPILE_ID, describe and run.
ENDING = """
COMPILE_ID = {cid!r}
def describe(o):
    return str(o)
def run():
    {body}
    return {{"outputs": [1], "problems": []}}
"""


def _repro(tmp: Path, name: str, body: str, head: str = "") -> Path:
    d = tmp / name
    d.mkdir()
    (d / "repro.py").write_text(head + ENDING.format(cid=name, body=body), encoding="utf-8")
    return d


def test_a_repro_past_its_timeout_is_stopped_and_the_next_runs(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    hang = _repro(
        tmp_path,
        "hang",
        "import subprocess, time, sys\n"
        f"    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "    print('started', flush=True)\n"
        "    time.sleep(300)",
    )
    ok = _repro(tmp_path, "ok", "pass")
    got = run_scripts([hang, ok], timeout=1.5)
    assert got[hang]["status"] == "failed"
    assert got[hang]["reason"].startswith(
        "it ran past the timeout of 1.5 s (--timeout) and was stopped"
    ), got[hang]
    assert "started" in got[hang]["tail"]
    assert got[ok]["status"] == "ran" and got[ok]["outputs"] == ["1"]
    pid = int(pid_file.read_text())
    for _ in range(50):  # the grandchild is killed with the group; its parent reaps it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {pid} that the repro started still runs")


def test_output_is_streamed_and_only_its_tail_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repro printing 8 MB and then dying: all of it echoed (made inert), a tail kept."""
    flood = _repro(
        tmp_path,
        "flood",
        "import os, sys\n"
        "    for i in range(100_000):\n"
        "        print(f'line {i:06d} ' + 'x' * 64)\n"
        "    print('bell \\x07 end', flush=True)\n"
        "    sys.stderr.write('RuntimeError: it broke\\n'); sys.stderr.flush()\n"
        "    os._exit(9)",
    )
    got = run_scripts([flood], echo=True, timeout=60)[flood]
    out = capsys.readouterr().out
    assert out.count("\n") == 100_001 and "line 099999 " in out
    assert "bell \\x07 end" in out and "\x07" not in out
    assert got["status"] == "failed"
    assert (
        got["reason"]
        == "the Python process running it died (exit status 9): RuntimeError: it broke"
    )
    assert got["tail"][-2:] == ["bell \\x07 end", "RuntimeError: it broke"]
    assert len(got["tail"]) <= 40


def test_tail_keeps_at_most_its_limit() -> None:
    t = Tail(limit=1000)
    for i in range(10_000):
        t.add(f"{i}\n".encode())
    assert t.total == sum(len(f"{i}\n") for i in range(10_000))
    assert t.size < 1000 + 8 and t.text().endswith("9998\n9999\n")
    assert len(t.text()) == 1000 and t.lines(2) == ["9998", "9999"]
    assert TAIL_BYTES == 64 * 1024


def test_timeout_option_is_checked_and_documented() -> None:
    bad = run_cli("repro", "x.log", "--compile-id", "0/0", "--run", "--timeout", "0")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("tlview: repro: Invalid value for '--timeout': 0.0 is not in")
    helped = run_cli("repro", "--help").stdout
    assert "--timeout S" in helped and f"{DEFAULT_TIMEOUT:g}" in " ".join(helped.split())
