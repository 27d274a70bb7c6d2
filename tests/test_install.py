"""The README's Install, as a user follows it (issue 49): a wheel built from the checkout into a
fresh venv runs `tlview report`; `tlview inputs --emit` there, with no torch, names the install
line the README gives; the `torch` extra is a range of the torch versions docs list."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _install_section() -> str:
    start = README.index("## Install\n")
    return README[start : README.index("\n## ", start + 1)]


def test_the_readme_says_how_to_install_what_pyproject_declares() -> None:
    """The torch line of the README, the exit-5 hint and the `torch` extra name one range, the
    range docs/torch-versions.md checks; the test extra keeps its pin."""
    from tlview.tensors.dtypes import TORCH_INSTALL

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^torch = \["torch>=2.4.1,<2.16"\]$', pyproject, re.M)
    test_extra = pyproject[pyproject.index("\ntest = [") :]
    assert '"torch==2.13.0"' in test_extra[: test_extra.index("\n]")]
    section = _install_section()
    assert TORCH_INSTALL == "pip install 'torch>=2.4.1,<2.16'"
    assert f"`{TORCH_INSTALL}`" in section and "CUDA build" in section
    assert "pip install tlview\n" not in README and "not on PyPI" in section
    versions = (ROOT / "docs" / "torch-versions.md").read_text(encoding="utf-8")
    assert "2.4.1\nor newer (checked with 2.4.1, " in versions and "2.15.0)" in versions
    ci = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert ci.count('pip install "tlview @ git+https://GIT-HOST/PATH/tlview.git"') == 2
    assert 'pip install "tlview @ git+https://GIT-HOST/PATH/tlview.git"' in section


@pytest.mark.slow  # builds a wheel and a venv, installs tlview's dependencies into it
def test_a_fresh_venv_with_the_wheel_reports(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("tlview-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    got = subprocess.run(
        [str(bin_dir / "pip"), "install", "-q", str(wheel)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]
    tlview = str(bin_dir / "tlview")
    rep = subprocess.run(
        [tlview, "report", str(FIXTURES / "demo.log"), "-q"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert rep.returncode == 0 and "5 compiles | 2 graph breaks" in rep.stdout, rep.stderr
    emit = subprocess.run(
        [tlview, "inputs", str(FIXTURES / "demo.log"), "--emit", str(tmp_path / "x.pt")],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert emit.returncode == 5
    (line,) = emit.stderr.splitlines()
    hint = re.search(r"pip install '[^']+'", line)
    assert hint is not None and f"`{hint.group(0)}`" in _install_section()
