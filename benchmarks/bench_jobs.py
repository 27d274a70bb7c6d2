"""Benchmark job reports: 64 rank logs read one after another, on a local pool, and by tlparse.

The job is built from a real rank log (benchmarks/make_job.py): rank field rewritten, each log
grown to --size-mb by repeating its compiles, and three ranks made to diverge (an extra recompile,
a different input shape, a missing compile). Timed, best of --repeat:

- in this process: the logs read one after another (`map_each`), on a pool of 1 and 2 worker
  processes (`map_pool`), each followed by the reduce (divergence);
- end to end: `tlview report DIR --format json` with `--jobs 1` and `--jobs 2`, and
  `tlparse DIR --all-ranks-html`.

    python benchmarks/bench_jobs.py                  # print the table
    python benchmarks/bench_jobs.py --write          # and record it in benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_job

from tlview.load import Read, read_one, reduce
from tlview.logs.sources import find
from tlview.model import Report
from tlview.runtime.pool import map_each, map_pool

RESULTS = HERE / "RESULTS.md"
SECTION = "## Job reports (bench_jobs.py)"
PLANTS = {
    13: [make_job.extra_recompile(4, 0)],
    27: [make_job.input_size(4, 0, 8)],
    42: [make_job.missing_compile(3, 0)],
}


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--size-mb", type=float, default=2.0, help="size of each rank log")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="build the job here (default: a temp dir)")
    ap.add_argument("--write", action="store_true", help=f"record the table in {RESULTS.name}")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tlview-bench-"))
    job = args.dir or tmp / "job"
    try:
        paths = make_job.make_job(job, args.ranks, plants=PLANTS, size=int(args.size_mb * 2**20))
        total = sum(p.stat().st_size for p in paths)
        found = find(str(job))

        def in_process(read: Callable[[], list[Read]]) -> Callable[[], Report]:
            return lambda: reduce(str(job), read(), found.notes, True)

        planted = sorted(
            (d.kind, tuple(d.ranks))
            for d in in_process(lambda: map_each(read_one, found.sources))().divergence
        )

        tlview = [str(Path(sys.executable).parent / "tlview")]
        tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
        rows = [
            (
                "read one after another (in process)",
                in_process(lambda: map_each(read_one, found.sources)),
            ),
            (
                "local pool, 1 worker (in process)",
                in_process(lambda: map_pool(read_one, found.sources, 1)),
            ),
            (
                "local pool, 2 workers (in process)",
                in_process(lambda: map_pool(read_one, found.sources, 2)),
            ),
            (
                "`tlview report DIR --format json -j 1`",
                lambda: run([*tlview, "report", str(job), "--format", "json", "-j", "1"]),
            ),
            (
                "`tlview report DIR --format json -j 2`",
                lambda: run([*tlview, "report", str(job), "--format", "json", "-j", "2"]),
            ),
            (
                "`tlparse DIR --all-ranks-html`",
                lambda: run(
                    [
                        tlparse,
                        str(job),
                        "--all-ranks-html",
                        "--overwrite",
                        "--no-browser",
                        "-o",
                        str(tmp / "tl_out"),
                    ]
                ),
            ),
        ]
        load0 = os.getloadavg()[0]
        times: dict[str, list[float]] = {name: [] for name, _ in rows}
        for _ in range(args.repeat):  # round robin, so a busy spell hits every row alike
            for name, fn in rows:
                gc.collect()
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        timed = [(name, min(ts), statistics.median(ts)) for name, ts in times.items()]
        load1 = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = timed[0][1]
    lines = [
        SECTION,
        "",
        f"{args.ranks} rank logs of {args.size_mb:g} MB ({total / 2**20:.0f} MB in all), built by "
        f"`make_job.py` from the real rank log `multirank_gloo/...rank_0...log`; planted: "
        + ", ".join(f"{k} on rank {', '.join(map(str, r))}" for k, r in planted)
        + ".",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average {load0:.1f} before, {load1:.1f} after. Best (median) of {args.repeat} runs.",
        "",
        "| how | seconds | MB/s | vs one after another |",
        "|---|---|---|---|",
    ]
    for name, low, med in timed:
        lines.append(
            f"| {name} | {low:.2f} ({med:.2f}) | {total / 2**20 / low:.0f} | {base / low:.2f}x |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write:
        write_section(table)


def write_section(table: str) -> None:
    """Replace this benchmark's section of RESULTS.md (other sections are left as they are)."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + table
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + table + ("" if end < 0 else text[end:])
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
