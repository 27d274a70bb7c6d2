"""How many logged graphs give a repro that runs, and why the others do not.

For every log folder of the shared corpus (and, with --zoo, for a log written now by
benchmarks/repro_zoo.py, whose graphs are not in the corpus) this writes one repro per graph
(`tlview repro --all --run`), runs them, and prints per folder how many ran and matched the
shapes and dtypes the log recorded, then every graph that did not with its reason.

    python benchmarks/repro_rate.py                    # the shared corpus
    python benchmarks/repro_rate.py --zoo              # and a fresh log of repro_zoo.py
    python benchmarks/repro_rate.py --backend aot_eager --keep /tmp/repros
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tlview.load import load
from tlview.replay import make as repro
from tlview.replay.script import slug

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("TLVIEW_CORPUS", HERE.parent.parent / "shared" / "corpus"))


def log_folders(root: Path) -> list[Path]:
    """Every folder under ROOT that holds logs, each read as one PATH."""
    return sorted({p.parent for p in root.rglob("*.log")})


def zoo_log(tmp: Path) -> Path:
    """Run repro_zoo.py under TORCH_TRACE; the folder of the log it wrote."""
    trace = tmp / "zoo-trace"
    env = dict(os.environ, TORCH_TRACE=str(trace))
    subprocess.run(
        [sys.executable, str(HERE / "repro_zoo.py")],
        env=env,
        cwd=tmp,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return trace


def rate(folder: Path, out: Path, backend: str | None) -> list[repro.Outcome]:
    rep = load(folder, repro.graph_keep(), jobs=1)
    return repro.make_all(
        rep, out, repro.ReproOptions(backend=backend, run=True, force=True, warn=False)
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the folder of real logs")
    ap.add_argument("--zoo", action="store_true", help="also a fresh log of repro_zoo.py")
    ap.add_argument(
        "--backend", choices=("eager", "aot_eager", "inductor"), help="compile each graph again"
    )
    ap.add_argument("--keep", type=Path, help="write the repros here (default: a temp dir)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tlview-rate-") as tmp_name:
        tmp = Path(tmp_name)
        base = args.keep or tmp / "repros"
        folders = [(f, f.relative_to(args.corpus).as_posix()) for f in log_folders(args.corpus)]
        if args.zoo:
            folders.append((zoo_log(tmp), "repro_zoo.py (not in the corpus)"))
        total: Counter[str] = Counter()
        misses: list[tuple[str, repro.Outcome]] = []
        for folder, name in folders:
            got = rate(folder, base / slug(name), args.backend)
            counts = Counter(o.status for o in got)
            total.update(counts)
            ran = counts["ran"]
            print(f"{name:<40} {ran:>3}/{len(got):<3} ran", flush=True)
            misses += [(name, o) for o in got if o.status != "ran"]
        n = sum(total.values())
        print()
        for name, o in misses:
            print(f"{name} {o.ref}: {o.status}: {o.reason}")
        share = 100 * total["ran"] / n if n else 0.0
        print(
            f"\n{total['ran']}/{n} graphs ({share:.1f}%) gave a repro that ran and matched the "
            f"logged output shapes and dtypes"
            + (f" (backend {args.backend})" if args.backend else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
