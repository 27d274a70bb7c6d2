"""The API in tlview/__init__.py: what the command line calls, light to import."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import FIXTURES

import tlview


def test_read_gives_a_typed_report() -> None:
    rep = tlview.read(FIXTURES / "demo.log")
    assert isinstance(rep, tlview.Report)
    assert [c.key for c in rep.attempts][-1] == "2/0" and rep.torch_version == "2.13.0+cpu"


def test_diff_of_one_run_with_itself_has_no_change() -> None:
    d = tlview.diff(FIXTURES / "demo.log", FIXTURES / "demo.log")
    assert d.changes == []


def test_a_bad_path_is_a_tlview_error(tmp_path: object) -> None:
    with pytest.raises(tlview.TlviewError):
        tlview.read(FIXTURES / "no-such.log")


def test_importing_tlview_loads_no_renderer_and_no_torch() -> None:
    code = (
        "import sys, tlview, tlview.cli\n"
        "heavy = {'rich', 'jinja2', 'orjson', 'torch'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[]"


def test_every_name_in_all_is_there() -> None:
    assert all(hasattr(tlview, name) for name in tlview.__all__)
    assert {"read", "fake_inputs", "real_inputs", "load_inputs", "repro", "diff"} <= set(
        tlview.__all__
    )
