"""Time tlview against tlparse on the same large logs, side by side, and print the ratios.

    python benchmarks/make_logs.py           # once: writes benchmarks/data/*.log
    python benchmarks/compare.py             # every generated log, 3 runs each
    python benchmarks/compare.py --runs 5 benchmarks/data/small_records_200mb.log

For each log: wall time (median of the runs), CPU time (user + system, children included), and
peak RSS of `tlview report --format json`, `--format html`, the terminal report on a
pseudo-terminal (as a user sees it: with a progress bar), `tlview inputs --mode meta`,
`tlparse` (default and `-p` plain), and two floors: Python reading the file's lines and nothing
else, and Python doing the least the format asks of a reader (floor_parse.py: records split and
parsed, payload md5s checked), in one process and in two as tlview reads a large log. Ratios
are to tlparse -p (issue 33's targets: benchmarks/RESULTS.md). tlview's modules are
byte-compiled first, as installing a wheel does, and each command runs once untimed before its
timed runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
TERMINAL = "(terminal)"  # first word of a command run on a pseudo-terminal


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    ok: bool


def run(cmd: list[str]) -> Run:
    """One run of a command: wall clock, CPU of it and its children, peak RSS. A command whose
    name is TERMINAL writes to a pseudo-terminal (read as it comes), as it does for a user:
    there tlview draws a progress bar and the terminal report."""
    tty = cmd[0] == TERMINAL
    if tty:
        cmd = cmd[1:]
        master, term = pty.openpty()
        out: int = term
        err: int = term
    else:
        out, err = subprocess.DEVNULL, subprocess.PIPE
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    if tty:
        os.close(term)
        reader = threading.Thread(target=_drain, args=(master,))
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if tty:
        reader.join()
        os.close(master)
    err_text = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    ok = os.waitstatus_to_exitcode(status) == 0
    if not ok:
        print(f"  failed: {' '.join(cmd)}: {err_text.strip().splitlines()[-1:]}", file=sys.stderr)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, ok)


def commands(log: Path, out: Path) -> dict[str, list[str]]:
    tlview = str(BIN / "tlview")
    tlparse = shutil.which("tlparse") or str(BIN / "tlparse")
    floor = "import sys\nfor _ in open(sys.argv[1], 'rb'): pass"
    return {
        "floor (read lines)": [sys.executable, "-c", floor, str(log)],
        # What any Python reader of the format must do (floor_parse.py), one process and two.
        "floor (parse records)": [sys.executable, str(HERE / "floor_parse.py"), str(log)],
        "floor (parse records, 2 processes)": [
            sys.executable,
            str(HERE / "floor_parse.py"),
            str(log),
            "--processes",
            "2",
        ],
        "tlview json": [
            tlview,
            "report",
            str(log),
            "--format",
            "json",
            "-o",
            str(out / "r.json"),
            "--force",
        ],
        "tlview html": [
            tlview,
            "report",
            str(log),
            "--format",
            "html",
            "-o",
            str(out / "r.html"),
            "--force",
        ],
        "tlview text (terminal)": [TERMINAL, tlview, "report", str(log)],
        "tlview inputs meta": [tlview, "inputs", str(log), "--mode", "meta"],
        "tlparse -p": [
            tlparse,
            str(log),
            "-o",
            str(out / "tlp"),
            "--overwrite",
            "--no-browser",
            "-p",
        ],
        "tlparse": [tlparse, str(log), "-o", str(out / "tlp2"), "--overwrite", "--no-browser"],
    }


def _drain(fd: int) -> None:
    """Read a pseudo-terminal until the command's end closes it."""
    try:
        while os.read(fd, 1 << 16):
            pass
    except OSError:  # EIO: no process has the terminal open any more
        pass


def as_installed() -> None:
    """Bytecode for tlview's modules, as installing a wheel writes it (an editable install under
    PYTHONDONTWRITEBYTECODE has none, and every run would compile tlview from source)."""
    import compileall

    import tlview

    compileall.compile_dir(str(Path(tlview.__file__).parent), quiet=1)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {cpu}, {mem:.0f} GiB, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed runs of each command first (the file in the page cache, the page's "
        "templates in Jinja's cache), default 1",
    )
    ap.add_argument("--only", nargs="*", help="names of the commands to run (default: all)")
    args = ap.parse_args()
    logs = args.logs or sorted((HERE / "data").glob("*_*mb.log"))
    if not logs:
        sys.exit("no logs: run benchmarks/make_logs.py first")
    print(f"machine: {machine()}; load average now {os.getloadavg()[0]:.2f}")
    print("| log | MB | command | wall s | CPU s | peak RSS MB | wall / tlparse -p |")
    print("|---|---|---|---|---|---|---|")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    as_installed()
    for log in logs:
        mb = log.stat().st_size / 2**20
        with tempfile.TemporaryDirectory() as tmp:
            results: dict[str, Run] = {}
            for name, cmd in commands(log, Path(tmp)).items():
                if args.only and name not in args.only:
                    continue
                for _ in range(args.warmup):
                    run(cmd)
                runs = [run(cmd) for _ in range(args.runs)]
                best = Run(
                    statistics.median(r.wall for r in runs),
                    statistics.median(r.cpu for r in runs),
                    max(r.rss_mb for r in runs),
                    all(r.ok for r in runs),
                )
                results[name] = best
            base = results.get("tlparse -p")
            for name, r in results.items():
                ratio = f"{r.wall / base.wall:.2f}" if base and base.ok and r.ok else "-"
                flag = "" if r.ok else " (failed)"
                print(
                    f"| {log.name} | {mb:.0f} | {name}{flag} | {r.wall:.2f} | {r.cpu:.2f} "
                    f"| {r.rss_mb:.0f} | {ratio} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
