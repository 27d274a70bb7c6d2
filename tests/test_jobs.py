"""Reading a job's logs in parallel: the pool, URLs, progress, and the same report as one by one."""

from __future__ import annotations

import gzip
import multiprocessing
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, corpus, gloo_rank0, report_json, run_cli, without_paths

from tlview.index import compiles
from tlview.load import read as load
from tlview.load import read_one
from tlview.logs.sources import Source, find

sys.path.insert(0, str(ROOT / "benchmarks"))
import make_job


@pytest.fixture
def job(tmp_path: Path) -> Path:
    make_job.make_job(tmp_path / "job", 8, gloo_rank0(), make_job.PLANTS)
    return tmp_path / "job"


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_pool_gives_the_report_of_a_sequential_read(job: Path) -> None:
    one = report_json(job, "--jobs", "1")
    two = report_json(job, "--jobs", "2")
    assert two == one
    assert [lg["rank"] for lg in two["logs"]] == list(range(8))  # file order, not finish order
    assert len(two["divergence"]) == 11
    text1 = run_cli("report", job, "-j", "1").stdout
    assert run_cli("report", job, "-j", "3").stdout == text1


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_real_multi_rank_logs_same_with_pool() -> None:
    for folder in (corpus("multirank_gloo"), corpus("tlparse-tests", "multi_rank_logs")):
        assert report_json(folder, "--jobs", "2") == report_json(folder, "--jobs", "1")


def test_single_log_starts_no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a pool was started for one log")

    monkeypatch.setattr(multiprocessing, "get_context", no_pool)
    rep = load(gloo_rank0(), jobs=4)
    assert [c.key for c in rep.attempts][:3] == ["-/-", "0/0", "0/0_1"]
    assert rep.divergence == []


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_spilled_compiles_come_back_from_the_pool(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_memory = report_json(job, "--jobs", "1")
    monkeypatch.setattr(compiles, "IN_MEMORY", 4)  # workers are forked: they see this too
    rep = load(job, jobs=2)
    assert rep.logs[0].compiles.on_disk  # type: ignore[attr-defined]
    assert report_json(job, "--jobs", "2") == in_memory


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_file_urls_read_through_fsspec(job: Path) -> None:
    local = report_json(job, "--jobs", "1")
    url = report_json(job.as_uri(), "--jobs", "2")
    assert url["path"] == job.as_uri()
    assert url["logs"][0]["path"] == (job / url["logs"][0]["name"]).as_uri()
    assert without_paths(url) == without_paths(local)
    single = report_json((job / local["logs"][3]["name"]).as_uri())
    assert [c["key"] for c in single["compiles"]] == [
        c["key"] for c in local["compiles"] if c["rank"] == 3
    ]


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_gz_logs_and_decoys_in_a_job(job: Path) -> None:
    plain = report_json(job, "--jobs", "1")
    for name in sorted(p.name for p in job.glob("*.log"))[::2]:
        data = (job / name).read_bytes()
        (job / name).unlink()
        (job / f"{name}.gz").write_bytes(gzip.compress(data))
    (job / "README.txt").write_text("not a log")
    (job / "empty.log").write_bytes(b"")
    (job / "sub").mkdir()
    mixed = report_json(job, "--jobs", "2")
    assert mixed["divergence"] == plain["divergence"]
    assert mixed["ranks"] == plain["ranks"]
    assert "ignored 1 file(s) not named *.log or *.log.gz: README.txt" in mixed["notes"]
    assert "skipped empty.log: empty file" in mixed["notes"]
    assert "did not enter 1 subdirector(ies): sub" in mixed["notes"]
    # The same through fsspec: gzip is recognised by content there too.
    assert without_paths(report_json(job.as_uri()))["divergence"] == plain["divergence"]


class Recorder:
    """Stands in for the progress bar: what a bar would have been told."""

    def __init__(self) -> None:
        self.bytes = 0
        self.logs = 0
        self.closed = False

    def __call__(self, n: int) -> None:
        self.bytes += n

    def log_done(self) -> None:
        self.logs += 1

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_by_logs_and_bytes(job: Path, jobs: int) -> None:
    bar = Recorder()
    load(job, progress=bar, jobs=jobs)
    assert bar.logs == 8
    assert bar.bytes == sum(p.stat().st_size for p in job.glob("*.log"))
    assert bar.closed


def test_read_one_is_a_compact_picklable_summary(job: Path) -> None:
    import pickle

    path = sorted(job.glob("*.log"))[0]
    got = read_one(Source(str(path), path.stat().st_size))
    back = pickle.loads(pickle.dumps(got))  # noqa: S301 - our own objects, round trip
    assert [c.key for c in back.logs[0].compiles] == [c.key for c in got.logs[0].compiles]
    assert back.fingerprints[0].rank == 0 and "4/0" in back.fingerprints[0].compiles
    assert len(pickle.dumps(got)) < path.stat().st_size / 4
    assert all(p.text is None for c in back.logs[0].compiles for p in c.payloads())


def test_find_lists_a_url_directory(job: Path) -> None:
    found = find(job.as_uri())
    assert found.directory
    assert [s.name for s in found.sources] == sorted(p.name for p in job.glob("*.log"))
    assert all(s.path.startswith("file://") and s.size > 0 for s in found.sources)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--jobs", "0"], 2, "0 is not in the range x>=1"),
        (
            ["file:///nonexistent/job"],
            1,
            "tlview: file:///nonexistent/job: no such file or directory",
        ),
        (["nosuchproto://bucket/job"], 5, "tlview: nosuchproto://bucket/job: "),
    ],
)
def test_bad_input_is_one_line(args: list[str], code: int, message: str, job: Path) -> None:
    full = [job, *args] if args[0].startswith("-") else args
    result = run_cli("report", *full)
    assert result.exit_code == code
    assert message in result.stderr
    if code != 2:
        assert result.stderr.count("\n") == 1


def test_directory_without_logs(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    result = run_cli("report", tmp_path, "--jobs", "2")
    assert result.exit_code == 1
    assert result.stderr == (
        f"tlview: {tmp_path}: no *.log or *.log.gz file in this directory "
        "(ignored 1 file(s) not named *.log or *.log.gz: notes.txt)\n"
    )


def test_logs_one_level_down_are_named(tmp_path: Path) -> None:
    # A job's logs in a directory per node: the error says where they are, on one line.
    for node in ("node1", "node0"):
        shutil.copytree(corpus("multirank_gloo"), tmp_path / node)
    for args in ([], ["--latest"]):
        result = run_cli("report", tmp_path, *args)
        assert result.exit_code == 1
        assert result.stderr == (
            f"tlview: {tmp_path}: no *.log or *.log.gz file in this directory "
            "(did not enter 2 subdirector(ies): node0, node1)\n"
        )
    assert run_cli("report", tmp_path / "node0").exit_code == 0
