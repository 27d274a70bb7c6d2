"""Time tlview against tlparse at the sizes users have, every command, and print the ratios.

    python benchmarks/make_logs.py                     # once: 1, 10, 30, 200 MB of each shape
    python benchmarks/compare.py                       # every command on every generated log
    python benchmarks/compare.py --sizes 1 30          # a quick run: two sizes
    python benchmarks/compare.py --sizes 30 --shapes deep_inductor --only json page "tlparse -p"
    python benchmarks/compare.py --job                 # also a 64-rank job (make_job.py)
    python benchmarks/compare.py --base ../main --sizes 30   # A/B: another checkout, same run

Logs: the three shapes of make_logs.py (`deep_inductor`: a deep model under inductor, large
output code; `small_records`: many small records; `dynamic_params`: a real model's dynamic-shape
log) at each size asked (MB; 1, 10, 30 and 200 by default, 1000 when asked), and with `--job`
a directory of 64 rank logs of 2 MB, 128 MB in all (make_job.py). Commands: tlview's JSON report, its terminal
report (on a pseudo-terminal, as a user sees it), its page, its Markdown summary, the `inputs`
listing, `inputs --emit` (meta tensors: the rebuild without the values' memory), `diff` of the
log against itself; tlparse's plain mode (`-p`) and its HTML mode. Each command runs once
untimed, then `--runs` times; the table gives the median wall and CPU time (user + system,
children included), the peak RSS of any one process, and the ratios to `tlparse -p` (of wall
and of CPU time: on a loaded machine the CPU's is the steadier) and the page's wall time's to
tlparse's HTML mode. tlview's modules are byte-compiled first, as
installing a wheel does. `--base DIR` also runs the tlview of another checkout (DIR, on this
Python) on every tlview command, its runs interleaved with this one's: an A/B under the same
load. The machine's load average is printed before and after: a loaded machine's wall times
are not a quiet one's, and CPU times move less.

tlparse is not a dependency of tlview: `pip install tlparse` into the venv that runs this.
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
sys.path.insert(0, str(HERE))
import make_logs  # beside this file

TERMINAL = "(terminal)"  # first word of a command run on a pseudo-terminal
JOB = HERE / "data" / "job64"
TLVIEW_COMMANDS = ("json", "text", "page", "markdown", "inputs", "inputs --emit", "diff")
TLPARSE_COMMANDS = ("tlparse -p", "tlparse html")
FLOORS = ("floor (read lines)", "floor (parse records)")


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    ok: bool


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """One run of a command: wall clock, CPU of it and its children, peak RSS. A command whose
    first word is TERMINAL writes to a pseudo-terminal (read as it comes), as for a user:
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
    # Out of the checkout: `python -m tlview` imports the tlview of its working directory first.
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
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


def _drain(fd: int) -> None:
    """Read a pseudo-terminal until the command's end closes it."""
    try:
        while os.read(fd, 1 << 16):
            pass
    except OSError:  # EIO: no process has the terminal open any more
        pass


def tlview_commands(log: Path, out: Path) -> dict[str, list[str]]:
    """tlview's commands on LOG (a file or a job's directory), writing into OUT."""
    tlview = [sys.executable, "-m", "tlview"]
    report = [*tlview, "report", str(log)]
    return {
        "json": [*report, "--format", "json", "-o", str(out / "r.json"), "--force"],
        "text": [TERMINAL, *report],
        "page": [*report, "--format", "html", "-o", str(out / "r.html"), "--force"],
        "markdown": [*report, "--format", "markdown", "-o", str(out / "r.md"), "--force"],
        "inputs": [*tlview, "inputs", str(log)],
        "inputs --emit": [
            *tlview,
            "inputs",
            str(log),
            "--mode",
            "meta",
            "--emit",
            str(out / "i.pt"),
            "--force",
        ],
        "diff": [*tlview, "diff", str(log), str(log), "-o", str(out / "d.json"), "--force"],
    }


def other_commands(log: Path, out: Path) -> dict[str, list[str]]:
    """tlparse's two modes on LOG (a job's directory: its all-ranks page), and the floors."""
    tlparse = shutil.which("tlparse") or str(BIN / "tlparse")
    plain = [tlparse, str(log), "-o", str(out / "tlp"), "--overwrite", "--no-browser"]
    if log.is_dir():
        return {"tlparse html": [*plain, "--all-ranks-html"]}
    return {
        "tlparse -p": [*plain, "-p"],
        "tlparse html": [tlparse, str(log), "-o", str(out / "tlh"), "--overwrite", "--no-browser"],
        "floor (read lines)": [
            sys.executable,
            "-c",
            "import sys\nfor _ in open(sys.argv[1], 'rb'): pass",
            str(log),
        ],
        # What any Python reader of the format must do (floor_parse.py).
        "floor (parse records)": [sys.executable, str(HERE / "floor_parse.py"), str(log)],
    }


def as_installed(root: Path) -> None:
    """Bytecode for a checkout's tlview, as installing a wheel writes it (an editable install
    under PYTHONDONTWRITEBYTECODE has none, and every run would compile tlview from source)."""
    import compileall

    compileall.compile_dir(str(root / "tlview"), quiet=1)


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


def logs_of(args: argparse.Namespace) -> list[Path]:
    """The logs asked for, made first where missing (make_logs.py), and the job's directory."""
    if args.logs:
        return [p.resolve() for p in args.logs]
    got = [make_logs.make(shape, mb) for mb in args.sizes for shape in args.shapes]
    if args.job:
        if not JOB.exists():
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "make_job.py"),
                    str(JOB),
                    "--ranks",
                    "64",
                    "--size-mb",
                    "2",
                ],
                check=True,
            )
        got.append(JOB)
    return got


def median(runs: list[Run]) -> Run:
    return Run(
        statistics.median(r.wall for r in runs),
        statistics.median(r.cpu for r in runs),
        max(r.rss_mb for r in runs),
        all(r.ok for r in runs),
    )


def measure(
    cmds: dict[str, tuple[list[str], dict[str, str] | None]], runs: int, warmup: int, cwd: Path
) -> dict[str, Run]:
    """Each command's median of RUNS after WARMUP; an A/B pair (`name` and `name (base)`) runs
    in turn, so both see the same load."""
    got: dict[str, list[Run]] = {name: [] for name in cmds}
    pairs: list[list[str]] = []
    for name in cmds:
        if name.endswith(" (base)"):
            continue
        pairs.append([name] + ([f"{name} (base)"] if f"{name} (base)" in cmds else []))
    for group in pairs:
        for name in group:
            for _ in range(warmup):
                run(*cmds[name], cwd=cwd)
        for _ in range(runs):
            for name in group:
                got[name].append(run(*cmds[name], cwd=cwd))
    return {name: median(rs) for name, rs in got.items()}


def commands(
    log: Path, out: Path, args: argparse.Namespace
) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """Every command to time on LOG, with the environment each runs in."""
    here = dict(os.environ, PYTHONPATH=str(HERE.parent))
    cmds: dict[str, tuple[list[str], dict[str, str] | None]] = {}
    for name, cmd in tlview_commands(log, out).items():
        cmds[name] = (cmd, here)
        if args.base is not None:
            cmds[f"{name} (base)"] = (cmd, dict(os.environ, PYTHONPATH=str(args.base.resolve())))
    for name, cmd in other_commands(log, out).items():
        if name in FLOORS and not args.floors:
            continue
        cmds[name] = (cmd, None)
    if args.only:
        cmds = {k: v for k, v in cmds.items() if k.removesuffix(" (base)") in args.only}
    return cmds


def rows(log: Path, results: dict[str, Run]) -> list[str]:
    """The table's rows of one log: ratios to tlparse -p, and the page's to tlparse's HTML."""
    mb = _size(log) / 2**20
    base, html = results.get("tlparse -p"), results.get("tlparse html")
    out = []
    for name, r in results.items():
        ratio = f"{r.wall / base.wall:.2f}" if base and base.ok and r.ok else "-"
        cpu = f"{r.cpu / base.cpu:.2f}" if base and base.ok and r.ok and base.cpu else "-"
        to_html = "-"
        if name.startswith(("page", "tlparse html")) and html and html.ok and r.ok:
            to_html = f"{r.wall / html.wall:.2f}"
        flag = "" if r.ok else " (failed)"
        out.append(
            f"| {log.name} | {mb:.0f} | {name}{flag} | {r.wall:.2f} | {r.cpu:.2f} "
            f"| {r.rss_mb:.0f} | {ratio} | {cpu} | {to_html} |"
        )
    return out


def _size(log: Path) -> int:
    return sum(p.stat().st_size for p in log.iterdir()) if log.is_dir() else log.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", type=Path, help="logs to time (default: generated ones)")
    ap.add_argument(
        "--sizes", type=int, nargs="*", default=list(make_logs.SIZES), help="MB (none: only --job)"
    )
    ap.add_argument("--shapes", nargs="+", default=list(make_logs.SHAPES), choices=make_logs.SHAPES)
    ap.add_argument("--job", action="store_true", help="also a job of 64 rank logs")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each command first")
    ap.add_argument("--only", nargs="*", help="names of the commands to run (default: all)")
    ap.add_argument("--floors", action="store_true", help="also Python's floors (floor_parse.py)")
    ap.add_argument("--base", type=Path, help="A/B: also run the tlview of this checkout")
    args = ap.parse_args()
    logs = logs_of(args)
    print(f"machine: {machine()}; load average before: {_load()}")
    print(
        "| log | MB | command | wall s | CPU s | peak RSS MB | wall / tlparse -p "
        "| CPU / tlparse -p | wall / tlparse html |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    as_installed(HERE.parent)
    if args.base is not None:
        as_installed(args.base)
    for log in logs:
        with tempfile.TemporaryDirectory() as tmp:
            results = measure(commands(log, Path(tmp), args), args.runs, args.warmup, Path(tmp))
        for line in rows(log, results):
            print(line, flush=True)
    print(f"load average after: {_load()}")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
