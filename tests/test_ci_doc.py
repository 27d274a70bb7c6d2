"""docs/ci.md's workflows run as written: every step that runs the program or tlview, taken
from the doc itself, on a trace of the doc's own program (a main run, then a pull request
gated against its stored report)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT

pytestmark = pytest.mark.slow
DOC = ROOT / "docs" / "ci.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
_HASH = re.compile(r"hashFiles\('([^']+)'\)")


def blocks(kind: str) -> list[str]:
    return [body for k, body in _BLOCK.findall(DOC.read_text(encoding="utf-8")) if k == kind]


def ours(command: str) -> bool:
    """A command of the workflow that this suite can run: the program, or tlview (not the
    install, whose git URL the reader fills in; the README's Install is checked on its own)."""
    if command.lstrip().startswith("pip "):
        return False
    return "tlview " in command or "TORCH_TRACE=" in command


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # GitHub runs a step as `bash -e {0}`, GitLab each line in one bash: the same here.
    return subprocess.run(["bash", "-e", "-c", command], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)  # fmt: skip


def checkout(where: Path) -> dict[str, str]:
    """A checkout with the doc's program, and the environment a runner gives a job."""
    (where / "ci").mkdir(parents=True)
    (where / "ci" / "compiled.py").write_text(blocks("python")[0])
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                GITHUB_STEP_SUMMARY=str(where / "summary.md"))  # fmt: skip


def github_steps() -> list[dict[str, Any]]:
    flow = yaml.safe_load(blocks("yaml")[0])
    steps: list[dict[str, Any]] = flow["jobs"]["compile"]["steps"]
    return [s for s in steps if ours(s.get("run", ""))]


def run_github(where: Path) -> dict[str, str]:
    """The job's steps in order, each as written (a step whose `if` needs a missing file
    is skipped, as GitHub does); the output of each step by name."""
    env = checkout(where)
    out = {}
    for step in github_steps():
        needs = _HASH.findall(str(step.get("if", "")))
        if any(not (where / p).exists() for p in needs):
            continue
        got = shell(step["run"], where, env)
        assert got.returncode == 0, (step["name"], got.stdout, got.stderr)
        out[step["name"]] = got.stdout
    return out


@pytest.fixture(scope="module")
def github(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workflow run on main (no baseline yet), then on a pull request gated against the
    report main stored: each checkout, and the pull request's step outputs."""
    root = tmp_path_factory.mktemp("github")
    main, pr = root / "main", root / "pr"
    first = run_github(main)
    (pr / "baseline").mkdir(parents=True)  # what `gh run download` leaves
    shutil.copy(main / "tlview-report.json", pr / "baseline" / "tlview-report.json")
    return {"main": main, "pr": pr, "first": first, "steps": run_github(pr)}


def test_the_github_workflow_runs_as_written(github: dict[str, Any]) -> None:
    names = [s["name"] for s in github_steps()]
    assert names == ["run the program with TORCH_TRACE", "report, summary and annotations",
                     "gate against the baseline"]  # fmt: skip
    main, pr, got = github["main"], github["pr"], github["steps"]
    assert "gate against the baseline" not in github["first"]  # no baseline yet
    for name in ("tlview-report.json", "tlview-report.html"):
        assert (main / name).stat().st_size > 0
    # Annotations at the doc program's graph break (line 6) and its recompile (def f, line 4),
    # named as the checkout names the file.
    notes = got["report, summary and annotations"].splitlines()
    assert notes[0].startswith("::warning file=ci/compiled.py,line=6,title=graph break in f::")
    assert any(n.startswith("::warning file=ci/compiled.py,line=4,title=recompile of f::")
               for n in notes)  # fmt: skip
    summary = (pr / "summary.md").read_text()
    assert "### tlview: trace" in summary and "### tlview diff: baseline" in summary
    assert "--fail-on: passed (4 checks)" in summary
    cases = ET.parse(pr / "tlview-gate.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == [
        "graph-breaks", "recompiles", "failures", "compile-time:+50%"
    ]  # fmt: skip


def test_the_gitlab_job_runs_as_written(github: dict[str, Any], tmp_path: Path) -> None:
    job = yaml.safe_load(blocks("yaml")[1])["compile"]
    lines = [x for x in job["script"] if ours(x)]
    assert len(lines) == 4
    # The program runs as in the GitHub job (its traces are reused: torch compiles for seconds).
    assert lines[0] == github_steps()[0]["run"].strip()
    main, pr = tmp_path / "main", tmp_path / "pr"
    for where in (main, pr):
        env = checkout(where)
        shutil.copytree(github[where.name] / "trace", where / "trace")
        if where is pr:
            (pr / "baseline").mkdir()
            shutil.copy(main / "tlview-report.json", pr / "baseline" / "tlview-report.json")
        for line in lines[1:]:
            got = shell(line, where, env)
            assert got.returncode == 0, (line, got.stdout, got.stderr)
        assert (where / "tlview-report.html").exists()
    assert not (main / "tlview-gate.xml").exists()
    suite = ET.parse(pr / "tlview-gate.xml").getroot()[0]
    assert suite.get("tests") == "4" and suite.get("failures") == "0"
    for path in job["artifacts"]["paths"]:
        assert (pr / path).exists()
