"""Logs in S3 (`s3://` URLs through s3fs), served by moto's S3 server on 127.0.0.1: as local."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, corpus, only_log, report_json, without_paths

pytestmark = pytest.mark.slow  # an S3 server starts per module
pytest.importorskip("s3fs")
pytest.importorskip("moto")
boto3 = pytest.importorskip("boto3")

BUCKET = "job42"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An S3 server holding real logs, and the environment that points s3fs and boto3 at it.

    The bucket holds the corpus's 2-rank job under `job/`, one log gzipped under `gz/`, and
    the job again one level down (`nodes/node0/`), as some launchers write it."""
    port = _free_port()
    out = (tmp_path_factory.mktemp("moto") / "server.out").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=out,
        stderr=out,
    )
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "FSSPEC_S3_ENDPOINT_URL": url,
        "PYTHONPATH": str(ROOT),
    }
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        deadline, last = time.monotonic() + 60, None
        while True:  # the server takes a moment to listen; anything else is a failure
            try:
                s3.create_bucket(Bucket=BUCKET)
                break
            except Exception as e:
                last = e
                if server.poll() is not None:
                    pytest.fail(f"moto's S3 server exited ({server.returncode})")
                if time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server took no bucket in 60 s: {last!r}")
                time.sleep(0.1)
        for log in sorted(corpus("multirank_gloo").glob("*.log")):
            s3.upload_file(str(log), BUCKET, f"job/{log.name}")
            s3.upload_file(str(log), BUCKET, f"nodes/node0/{log.name}")
        log = only_log("mlp_aot_eager")
        s3.put_object(Bucket=BUCKET, Key=f"gz/{log.name}.gz", Body=gzip.compress(log.read_bytes()))
        yield env
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)


def run_tlview(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a new process, so that s3fs reads its endpoint from this environment."""
    return subprocess.run(
        [sys.executable, "-m", "tlview", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def s3_json(env: dict[str, str], *args: str) -> Any:
    r = run_tlview(env, "report", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_job_in_s3_reads_as_the_local_job(s3_env: dict[str, str]) -> None:
    remote = s3_json(s3_env, f"s3://{BUCKET}/job", "--jobs", "2")
    local = report_json(corpus("multirank_gloo"), "--jobs", "1")
    assert [lg["path"] for lg in remote["logs"]] == [
        f"s3://{BUCKET}/job/{p.name}" for p in sorted(corpus("multirank_gloo").glob("*.log"))
    ]
    assert without_paths(remote) == without_paths(local)
    # Counted as torch counts: each frame's first compile restarted once, nested as an attempt.
    assert [c["key"] for c in remote["compiles"]][:3] == ["0/0_1", "1/0_1", "2/0_1"]
    assert [a["key"] for a in remote["compiles"][0]["attempts"]] == ["0/0"]
    assert [o["key"] for o in remote["outside"]] == ["-/-", "-/-"]
    assert len(remote["compiles"]) == 10 and [lg["rank"] for lg in remote["logs"]] == [0, 1]
    assert remote["divergence"] == local["divergence"] != []


def test_gzipped_log_in_s3(s3_env: dict[str, str], tmp_path: Path) -> None:
    log = only_log("mlp_aot_eager")
    here = tmp_path / f"{log.name}.gz"
    here.write_bytes(gzip.compress(log.read_bytes()))
    remote = s3_json(s3_env, f"s3://{BUCKET}/gz/{log.name}.gz")
    assert without_paths(remote) == without_paths(report_json(here))
    assert [c["key"] for c in remote["compiles"]] == ["0/0_1", "0/1_1", "1/0", "1/1"]
    assert [[a["key"] for a in c["attempts"]] for c in remote["compiles"]] == [
        ["0/0"],
        ["0/1"],
        [],
        [],
    ]
    assert [o["key"] for o in remote["outside"]] == ["-/-"]


def test_inputs_of_a_log_in_s3(s3_env: dict[str, str], tmp_path: Path) -> None:
    import tlview

    name = only_log("mlp_aot_eager").name
    emitted = {}
    for where, path in (
        ("s3", f"s3://{BUCKET}/gz/{name}.gz"),
        ("local", str(only_log("mlp_aot_eager"))),
    ):
        out = tmp_path / f"{where}.pt"
        r = run_tlview(
            s3_env, "inputs", path, "--compile-id", "1/1", "--mode", "meta", "--emit", str(out)
        )
        assert r.returncode == 0, r.stderr
        inputs = tlview.load_inputs(out)["compiles"]["1/1"]
        emitted[where] = {k: (tuple(t.shape), t.stride(), t.dtype) for k, t in inputs.items()}
    assert emitted["s3"] == emitted["local"]
    assert emitted["s3"]["L['h']"][:2] == ((12, 64), (64, 1))
    assert len(emitted["s3"]) == 5


def test_missing_key_and_prefix_without_logs(s3_env: dict[str, str]) -> None:
    r = run_tlview(s3_env, "report", f"s3://{BUCKET}/nope")
    assert (r.returncode, r.stderr) == (
        1,
        f"tlview: s3://{BUCKET}/nope: no such file or directory\n",
    )
    r = run_tlview(s3_env, "report", f"s3://{BUCKET}/nodes")
    assert r.returncode == 1
    assert r.stderr == (
        f"tlview: s3://{BUCKET}/nodes: no *.log or *.log.gz file in this directory "
        "(did not enter 1 subdirector(ies): node0)\n"
    )
    assert (
        s3_json(s3_env, f"s3://{BUCKET}/nodes/node0")["compiles"]
        == s3_json(s3_env, f"s3://{BUCKET}/job")["compiles"]
    )


def test_dask_workers_read_s3(s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "FSSPEC_S3_ENDPOINT_URL"):
        monkeypatch.setenv(k, s3_env[k])  # the workers are spawned with this environment
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        remote = s3_json(s3_env, f"s3://{BUCKET}/job", "--scheduler", cluster.scheduler_address)
    assert without_paths(remote) == without_paths(
        report_json(corpus("multirank_gloo"), "--jobs", "1")
    )


def test_report_to_a_file_from_s3(s3_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "job.html"
    r = run_tlview(s3_env, "report", f"s3://{BUCKET}/job", "--format", "html", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "<title>tlview: job" in page
    for rank in (0, 1):
        assert f'<span class="cid" title="rank{rank}:0/0_1">' in page
