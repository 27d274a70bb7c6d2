"""`--junit-xml FILE`: each `--fail-on` check a test case, failed with its figures, so a CI
system shows "graph-breaks:0 failed: 2 (limit 0)" among the tests."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from tlview.analyze.gate import Verdict
from tlview.inert import clean
from tlview.runtime.output import Output
from tlview.version import __version__

# What XML 1.0 cannot hold at all (inert.clean has already escaped the other controls).
_NOT_XML = re.compile(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], clean(text))


def document(suite: str, verdicts: Sequence[Verdict]) -> bytes:
    """The JUnit XML of one suite, as pytest writes it (the schema CI systems read)."""
    failed = sum(v.failure is not None for v in verdicts)
    counts = {"tests": str(len(verdicts)), "failures": str(failed), "errors": "0"}
    top = ET.Element("testsuites", {"name": "tlview", **counts, "time": "0"})
    ts = ET.SubElement(top, "testsuite", {"name": _x(suite), **counts, "skipped": "0", "time": "0"})
    for v in verdicts:
        case = ET.SubElement(
            ts, "testcase", {"classname": "tlview.fail-on", "name": _x(v.name), "time": "0"}
        )
        if v.failure is not None:
            f = ET.SubElement(case, "failure", {"type": "fail-on", "message": _x(v.failure)})
            f.text = _x(f"{v.name}: {v.figures}")
        else:
            ET.SubElement(case, "system-out").text = _x(v.figures)
    body = ET.tostring(top, encoding="unicode")
    head = f'<?xml version="1.0" encoding="utf-8"?>\n<!-- written by tlview {__version__} -->\n'
    return (head + body + "\n").encode("utf-8")


def write(path: str, force: bool, suite: str, verdicts: Sequence[Verdict]) -> None:
    """Write the file safely (replacing only a file tlview wrote, unless FORCE)."""
    with Output(path, force).open() as f:
        f.write(document(suite, verdicts))
