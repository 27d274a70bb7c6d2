"""Running repros: each in a child Python process, one for all and a new one after a crash."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tlview.inert import clean

WARNING = (
    "tlview: --run executes code taken from the log: the graph in {script} runs in a new "
    "Python process, with whatever it calls. Run only logs you trust."
)


def run_scripts(dirs: list[Path], echo: bool = False) -> dict[Path, dict[str, Any]]:
    """Run each repro in a child Python process (one for all; a new one after a crash).

    With ECHO, what the repros print is printed here; torch's own warnings on stderr are not.
    """
    results: dict[Path, dict[str, Any]] = {}
    todo = list(dirs)
    with tempfile.TemporaryDirectory(prefix="tlview-repro-") as tmp:
        while todo:
            out = Path(tmp) / f"results-{len(results)}.jsonl"
            cmd = [sys.executable, "-m", "tlview.replay.child", str(out), *map(str, todo)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if echo and proc.stdout:  # what the graph prints holds text from the log
                sys.stdout.write(clean(proc.stdout))
                sys.stdout.flush()
            done = _read_results(out)
            for d in todo:
                if str(d) in done:
                    results[d] = done[str(d)]
            todo = [d for d in todo if d not in results]
            if todo:  # the process died running the first of these
                last = (proc.stderr.strip().splitlines() or [""])[-1][:300]
                results[todo.pop(0)] = {
                    "status": "failed",
                    "reason": f"the Python process running it died (exit status "
                    f"{proc.returncode})" + (f": {last}" if last else ""),
                }
    return results


def _read_results(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get("dir"), str):
                    out[rec["dir"]] = rec
    return out
