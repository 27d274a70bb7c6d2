"""Prove a change left tlview's outputs alone: run every command on every log with two trees.

    python tools/same_outputs.py                 # HEAD against the working tree
    python tools/same_outputs.py --base abc123   # that commit against the working tree
    python tools/same_outputs.py --only report   # the cases whose name holds `report`

Each case is one `python -m tlview ...` run: its exit status, stdout, stderr and every file it
wrote (the HTML page, the JSON, `--emit`'s file, `repro --all`'s directory) must be the same
bytes under the base tree and the working tree. The logs are the fixtures and the shared corpus,
each file alone and each folder as one job (TLVIEW_FIXTURES names the fixtures of another
checkout, so that a worktree's outputs name the same paths as the cached base's). The base's results are kept in `--cache` by commit,
so a second comparison runs only the working tree. Exit 0 when every case is the same, 1 when
any differs (each difference is listed, and both outputs kept under `--cache` for a diff).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The logs' paths are in the outputs: another checkout (a worktree) names the same files here.
FIXTURES = Path(os.environ.get("TLVIEW_FIXTURES", ROOT / "tests" / "fixtures")).resolve()
CORPUS = Path(os.environ.get("TLVIEW_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()
MAX_PER_LOG = 6  # --compile-id cases per log: the first compiles and every failed one


def logs() -> list[Path]:
    """Every log file alone, and every folder of logs as one job."""
    found: list[Path] = []
    for top in (FIXTURES, CORPUS):
        for p in sorted(top.rglob("*")):
            if p.is_file() and p.suffix in (".log", ".txt") and p.name != "PROVENANCE.txt":
                found.append(p)
        for d in sorted({p.parent for p in found if p.is_relative_to(top)}):
            if d not in (FIXTURES, CORPUS) and len(list(d.glob("*.log"))) > 1:
                found.append(d)
    return found


def label(p: Path) -> str:
    for top, name in ((FIXTURES, "fixtures"), (CORPUS, "corpus")):
        if p.is_relative_to(top):
            return f"{name}/{p.relative_to(top)}"
    return str(p)


def cases(keys: dict[str, list[str]]) -> dict[str, list[str]]:
    """Case name -> tlview arguments. `keys` gives each single log's compile ids to show alone."""
    out: dict[str, list[str]] = {}
    all_logs = logs()
    for p in all_logs:
        log, name = str(p), label(p)
        out[f"report text {name}"] = ["report", log]
        out[f"report -v {name}"] = ["report", log, "-v"]
        out[f"report -q {name}"] = ["report", log, "-q"]
        out[f"report json {name}"] = ["report", log, "--format", "json"]
        out[f"report html {name}"] = ["report", log, "--format", "html", "-o", "out/r.html"]
        out[f"report html --full {name}"] = ["report", log, "--full", "-o", "out/r.html"]
        out[f"report perfetto {name}"] = ["report", log, "--format", "perfetto"]
        out[f"report -o txt {name}"] = ["report", log, "-o", "out/r.txt"]
        out[f"report gate {name}"] = [
            "report", log, "-q", "--strict", "--fail-on", "graph-breaks:0,recompiles:1",
        ]  # fmt: skip
        out[f"inputs {name}"] = ["inputs", log]
        out[f"inputs emit meta {name}"] = ["inputs", log, "--emit", "out/i.pt", "--mode", "meta"]
        out[f"inputs emit random {name}"] = ["inputs", log, "--emit", "out/i.pt"]
        out[f"repro all {name}"] = ["repro", log, "--all", "-o", "out/repro"]
        for i, key in enumerate(keys.get(name, [])):
            out[f"report --compile-id {key} {name}"] = ["report", log, "--compile-id", key]
            out[f"report json --compile-id {key} {name}"] = [
                "report", log, "--compile-id", key, "--format", "json",
            ]  # fmt: skip
            out[f"report html --compile-id {key} {name}"] = [
                "report", log, "--compile-id", key, "-o", "out/r.html",
            ]  # fmt: skip
            if i >= 2:  # torch's start-up makes these the slow ones
                continue
            out[f"inputs --compile-id {key} {name}"] = ["inputs", log, "--compile-id", key]
            out[f"repro --compile-id {key} {name}"] = [
                "repro", log, "--compile-id", key, "-o", "out/one",
            ]  # fmt: skip
        out[f"report unknown id {name}"] = ["report", log, "--compile-id", "999/9"]
    files = [p for p in all_logs if p.is_file()]
    for a, b in zip(files, files[1:], strict=False):
        for fmt in ("text", "json"):
            out[f"diff {fmt} {label(a)} {label(b)}"] = ["diff", str(a), str(b), "--format", fmt]
        out[f"diff html {label(a)} {label(b)}"] = ["diff", str(a), str(b), "-o", "out/d.html"]
    demo = str(FIXTURES / "demo.log")
    out["diff -v same"] = ["diff", demo, demo, "-v", "--fail-on", "graph-breaks"]
    out["report missing"] = ["report", str(FIXTURES / "no-such.log")]
    out["help"] = ["--help"]
    for cmd in ("report", "inputs", "repro", "diff"):
        out[f"help {cmd}"] = [cmd, "--help"]
    return out


def run_case(tree: Path, args: list[str], work: Path) -> dict[str, str]:
    """One run in an empty working directory: status, streams and files, as text or md5."""
    if work.exists():
        shutil.rmtree(work)
    (work / "out").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(tree), COLUMNS="160", NO_COLOR="1")
    env.pop("TLVIEW_DEBUG", None)
    got = subprocess.run(
        [sys.executable, "-m", "tlview", *args], cwd=work, env=env, capture_output=True
    )
    result = {
        "rc": str(got.returncode),
        "stdout": got.stdout.decode("utf-8", "replace"),
        "stderr": got.stderr.decode("utf-8", "replace"),
    }
    for f in sorted((work / "out").rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            rel = str(f.relative_to(work))
            text = data.decode("utf-8", "replace") if f.suffix in (".py", ".json", ".txt") else None
            result[rel] = text if text is not None else hashlib.md5(data).hexdigest()
    shutil.rmtree(work)
    return result


def run_all(tree: Path, todo: dict[str, list[str]], scratch: Path, jobs: int) -> dict:
    names = sorted(todo)

    def one(i: int) -> tuple[str, dict[str, str]]:
        return names[i], run_case(tree, todo[names[i]], scratch / f"w{i}")

    with ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, range(len(names))))


def checkout(rev: str, into: Path) -> Path:
    """The base tree: `git archive` of REV (no worktree to clean up)."""
    into.mkdir(parents=True, exist_ok=True)
    data = subprocess.run(
        ["git", "archive", rev, "tlview", "templates"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the commit to compare against (HEAD)")
    ap.add_argument("--only", default="", help="only the cases whose name holds this")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tlview-same")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    rev = subprocess.run(
        ["git", "rev-parse", a.base], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    cache = a.cache / rev
    base_tree = cache / "tree"
    if not (base_tree / "tlview").is_dir():
        checkout(rev, base_tree)
    keys_file = cache / "keys.json"
    if not keys_file.exists():
        keys: dict[str, list[str]] = {}
        for p in logs():
            if p.is_file():
                res = run_case(base_tree, ["report", str(p), "--format", "json"], cache / "keys")
                try:
                    comps = json.loads(res["stdout"])["compiles"]
                except (ValueError, KeyError):
                    continue
                failed = [c["key"] for c in comps if c["status"] in ("failed", "incomplete")]
                picked = [c["key"] for c in comps[:MAX_PER_LOG]] + failed[:2]
                keys[label(p)] = list(dict.fromkeys(picked))
        keys_file.write_text(json.dumps(keys))
    todo = {n: v for n, v in cases(json.loads(keys_file.read_text())).items() if a.only in n}
    base_file = cache / "results.json"
    base: dict = json.loads(base_file.read_text()) if base_file.exists() else {}
    missing = {n: v for n, v in todo.items() if n not in base}
    if missing:
        print(f"base {rev[:10]}: {len(missing)} case(s)", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="tlview-same-") as scratch:
            base.update(run_all(base_tree, missing, Path(scratch), a.jobs))
        base_file.write_text(json.dumps(base))
    print(f"working tree: {len(todo)} case(s)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="tlview-same-") as scratch:
        new = run_all(ROOT, todo, Path(scratch), a.jobs)
    differ = cache / f"differ-{os.getpid()}"
    bad = 0
    for name in sorted(todo):
        if base[name] != new[name]:
            bad += 1
            parts = sorted(
                k for k in set(base[name]) | set(new[name]) if base[name].get(k) != new[name].get(k)
            )
            print(f"DIFFERS: {name}: {', '.join(parts)}")
            slot = differ / f"{bad:04d}"
            slot.mkdir(parents=True)
            (slot / "case.txt").write_text(name + "\n")
            for side, res in (("base", base[name]), ("new", new[name])):
                (slot / side).mkdir()
                for k in parts:
                    (slot / side / k.replace("/", "_")).write_text(res.get(k, "<missing>"))
    print(f"{len(todo) - bad} of {len(todo)} case(s) the same" + (f"; see {differ}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
