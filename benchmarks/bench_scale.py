"""Benchmark jobs of many ranks: 64, 256 and 1,024 rank logs through the pool and through Dask.

Each job is built by `make_job.py` from a real rank log (the corpus's 2-rank gloo DDP job):
every rank a process of its own (its rank and pid rewritten), with four ranks made to differ
(an input shape, a missing compile, an extra recompile, a reversed collective schedule). For
each job and each way of reading it (a local pool of 2 processes; a Dask LocalCluster of 2
worker processes), one child Python reads the job and writes the JSON, the terminal report and
the page, and says its wall time and its own peak RSS (the parent's: `RUSAGE_SELF`, workers
not counted), the sizes of what it wrote and what the divergence names.

    python benchmarks/bench_scale.py                       # print the table
    python benchmarks/bench_scale.py --write               # and record it in RESULTS.md
    python benchmarks/bench_scale.py --ranks 64 256        # fewer jobs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_job

RESULTS = HERE / "RESULTS.md"
SECTION = "## Jobs of many ranks (bench_scale.py)"


def plants(ranks: int) -> dict[int, list[make_job.Edit]]:
    """Four planted differences, spread over the job; every rank its own pid."""
    out: dict[int, list[make_job.Edit]] = {r: [make_job.set_pid(10_000 + r)] for r in range(ranks)}
    for rank, edit in (
        (7, make_job.input_size(4, 0, 8)),
        (ranks // 4 + 1, make_job.missing_compile(3, 0)),
        (ranks // 2 + 3, make_job.extra_recompile(4, 0)),
        (ranks - 2, make_job.reverse_collectives),
    ):
        out[rank].append(edit)
    return out


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from tlview.load import load
from tlview.render import Options, REPORT_FORMATS
from tlview.runtime.output import Output
job, out, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
keep = REPORT_FORMATS["html"].keep_for(Options())  # what the page keeps; the others need less
cluster = None
if how == "dask":
    from dask.distributed import LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    report = load(job, keep=keep, scheduler=cluster.scheduler_address)
else:
    report = load(job, keep=keep, jobs=2)
t_read = time.perf_counter() - t0
sizes = {}
for fmt, name in (("json", "report.json"), ("text", "report.txt"), ("html", "report.html")):
    REPORT_FORMATS[fmt].renderer()(report, Output(str(out / name), force=True), Options())
    sizes[fmt] = (out / name).stat().st_size
wall = time.perf_counter() - t0
if cluster is not None:
    cluster.close()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
text = (out / "report.txt").read_text()
print(json.dumps({
    "wall": wall, "read": t_read, "peak_kb": peak, "sizes": sizes,
    "divergence": sorted([d.kind, d.processes] for d in report.divergence),
    "text_lines": text.count("\n"),
}))
"""


def measure(job: Path, out: Path, how: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="120")
    got = subprocess.run(
        [sys.executable, "-c", CHILD, str(job), str(out), how],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--ways", nargs="+", default=["pool", "dask"], choices=["pool", "dask"])
    ap.add_argument("--write", action="store_true", help=f"record the table in {RESULTS.name}")
    args = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="tlview-scale-"))
    try:
        for n in args.ranks:
            job = tmp / f"job{n}"
            paths = make_job.make_job(job, n, plants=plants(n))
            total = sum(p.stat().st_size for p in paths)
            for how in args.ways:
                r = measure(job, tmp / f"out{n}-{how}", how)
                rows.append((n, total, how, r))
                print(n, how, json.dumps(r), flush=True)
            shutil.rmtree(job)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        SECTION,
        "",
        "Jobs built by `make_job.py` from the real rank log `multirank_gloo/...rank_0...log` "
        "(0.6 MB, 8 compiles with restarts, graph breaks, an inductor all_reduce), one process "
        "per rank, four planted differences. One child Python per row reads the job (`load.load`, keeping what the page keeps"
        ": a local pool of 2 processes, or a Dask LocalCluster of 2 worker processes) and writes "
        "the JSON, the terminal report and the page; wall time is all of that, peak RSS the "
        "parent's own (workers not counted).",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "| ranks | MB | read by | wall s | read s | parent peak RSS MB | JSON MB | page MB | "
        "terminal lines | divergence found |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, total, how, r in rows:
        found = "; ".join(f"{k} on {', '.join(p)}" for k, p in r["divergence"])
        lines.append(
            f"| {n:,} | {total / 2**20:.0f} | {how} | {r['wall']:.1f} | {r['read']:.1f} | "
            f"{r['peak_kb'] / 1024:.0f} | {r['sizes']['json'] / 2**20:.1f} | "
            f"{r['sizes']['html'] / 2**20:.2f} | {r['text_lines']} | {found} |"
        )
    by = {(n, how): r["peak_kb"] for n, _, how, r in rows}
    for how in args.ways:
        if (256, how) in by and (1024, how) in by:
            lines.append("")
            lines.append(
                f"Parent peak RSS, 1,024 against 256 ranks ({how}): "
                f"{by[(1024, how)] / by[(256, how)]:.2f}x."
            )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write:
        write_section(table)


def write_section(table: str) -> None:
    text = RESULTS.read_text()
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + table
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + table + (text[end + 1 :] if end >= 0 else "")
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
