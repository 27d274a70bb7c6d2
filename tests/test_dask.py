"""Job reports on a real Dask cluster (a scheduler and two workers on 127.0.0.1): same as local."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, corpus, gloo_rank0, run_cli, without_paths

from tlview.load import read as load

pytestmark = pytest.mark.slow  # a scheduler and two workers start per module
distributed = pytest.importorskip("distributed")

sys.path.insert(0, str(ROOT / "benchmarks"))
import make_job


def report_json(path: Path | str, *extra: str, env: dict[str, str] | None = None) -> Any:
    from click.testing import CliRunner

    from tlview.cli import main

    args = ["report", str(path), "--format", "json", *extra]
    result = CliRunner(env=env).invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=out, stderr=out)


def _wait(
    ready: Any, procs: list[subprocess.Popen[bytes]], logs: list[Path], within: float = 120
) -> None:
    """Wait until READY() is true; fail with the processes' output if one of them died, or if
    it is not true WITHIN seconds."""
    deadline = time.monotonic() + within
    while not ready():
        for p, log in zip(procs, logs, strict=True):
            if p.poll() is not None:
                pytest.fail(f"dask process exited ({p.returncode}):\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            tails = "\n".join(log.read_text()[-1500:] for log in logs)
            pytest.fail(f"the Dask cluster was not ready within {within:g} s:\n{tails}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a Dask scheduler with two single-thread worker processes."""
    tmp = tmp_path_factory.mktemp("dask")
    info = tmp / "scheduler.json"
    logs = [tmp / "scheduler.out"]
    procs = [
        _start(
            [
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(info),
            ],
            logs[0],
        )
    ]
    try:
        _wait(info.exists, procs, logs)
        for n in range(2):
            logs.append(tmp / f"worker{n}.out")
            procs.append(
                _start(
                    [
                        "worker",
                        "--scheduler-file",
                        str(info),
                        "--host",
                        "127.0.0.1",
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--local-directory",
                        str(tmp / f"w{n}"),
                    ],
                    logs[-1],
                )
            )
        client = distributed.Client(scheduler_file=str(info))
        try:
            _wait(lambda: len(client.scheduler_info()["workers"]) >= 2, procs, logs)
            address = client.scheduler.address
        finally:
            client.close()
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("job") / "job"
    make_job.make_job(dest, 8, gloo_rank0(), make_job.PLANTS)
    return dest


def test_cluster_report_equals_local_report(scheduler: str, job: Path) -> None:
    local = report_json(job, "--jobs", "1")
    remote = report_json(job, "--scheduler", scheduler)
    assert remote == local
    assert len(remote["divergence"]) == 11  # with rank 7's schedule against its output code
    text = run_cli("report", job, "--scheduler", scheduler).stdout
    assert text == run_cli("report", job, "--jobs", "1").stdout


def test_scheduler_from_the_environment(scheduler: str, job: Path) -> None:
    env = {"DASK_SCHEDULER_ADDRESS": scheduler}
    assert report_json(job, env=env) == report_json(job, "--jobs", "1")


def test_workers_read_urls(scheduler: str, job: Path) -> None:
    remote = report_json(job.as_uri(), "--scheduler", scheduler)
    assert remote["logs"][0]["path"].startswith("file://")
    assert without_paths(remote) == without_paths(report_json(job, "--jobs", "1"))


def test_real_multi_rank_logs_on_the_cluster(scheduler: str) -> None:
    for folder in (corpus("multirank_gloo"), corpus("tlparse-tests", "multi_rank_logs")):
        assert report_json(folder, "--scheduler", scheduler) == report_json(folder, "--jobs", "1")


def test_spilled_compiles_travel_as_data(scheduler: str, tmp_path: Path) -> None:
    # 35 copies of an 8-compile log: past the 256 compiles a log keeps in memory.
    make_job.make_job(tmp_path, 2, gloo_rank0(), size=20 << 20)
    rep = load(tmp_path, scheduler=scheduler)
    assert all(len(lg.compiles) > 256 for lg in rep.logs)
    # The worker spilled each log past 256; the first back stays whole in memory (the job's
    # budget is 512), so it came as data; the parent spills the second into its own file.
    in_memory = [lg for lg in rep.logs if not lg.compiles.on_disk]  # type: ignore[attr-defined]
    assert len(in_memory) == 1
    assert report_json(tmp_path, "--scheduler", scheduler) == report_json(tmp_path, "--jobs", "1")


def test_progress_on_the_cluster(scheduler: str, job: Path) -> None:
    class Recorder:
        bytes = logs = 0

        def __call__(self, n: int) -> None:
            self.bytes += n

        def log_done(self) -> None:
            self.logs += 1

        def close(self) -> None:
            pass

    bar = Recorder()
    load(job, progress=bar, scheduler=scheduler)
    assert bar.logs == 8
    assert bar.bytes == sum(p.stat().st_size for p in job.glob("*.log"))


def test_path_the_workers_cannot_see(scheduler: str, tmp_path: Path) -> None:
    result = run_cli("report", tmp_path / "nowhere", "--scheduler", scheduler)
    assert result.exit_code == 1
    assert result.stderr == f"tlview: {tmp_path / 'nowhere'}: no such file or directory\n"


def test_unreachable_scheduler_is_one_line(job: Path) -> None:
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        result = run_cli("report", job, "--scheduler", "tcp://127.0.0.1:9")
    assert result.exit_code == 1
    assert result.stderr.startswith("tlview: tcp://127.0.0.1:9: cannot reach the Dask scheduler")
    assert result.stderr.count("\n") == 1
