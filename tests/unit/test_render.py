"""render/: one registry of formats, one interface, log text never obeyed by a terminal."""

from __future__ import annotations

import inspect
import io
import json
from pathlib import Path

from helpers import FIXTURES

from tlview.analyze.baseline import every_attempt
from tlview.load import read as load
from tlview.render import DIFF_FORMATS, REPORT_FORMATS, Options, format_for
from tlview.render.clean import clean
from tlview.runtime.output import Output


def test_every_format_has_one_write_with_one_signature() -> None:
    for f in (*REPORT_FORMATS.values(), *DIFF_FORMATS.values()):
        params = list(inspect.signature(f.renderer()).parameters)
        assert params[1:] == ["out", "opts", "split"], f.name


def test_the_output_name_picks_the_format() -> None:
    assert format_for(None, "r.HTML") == "html" and format_for(None, "d.json") == "json"
    assert format_for(None, None) == "text" and format_for("perfetto", "x.html") == "perfetto"


def test_json_renderer_writes_the_report_and_returns_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    o = REPORT_FORMATS["json"].renderer()(load(FIXTURES / "demo.log"), Output(str(out)), Options())
    data = json.loads(out.read_text())
    assert data["format"] == "tlview.report/2" and o is not None
    assert [c["key"] for c in every_attempt(data)][1:3] == ["0/0", "0/0_1"]
    assert data["stats"]["compiles"] == o.compiles == len(data["compiles"]) == 5


def test_the_page_keeps_texts_only_when_asked() -> None:
    html = REPORT_FORMATS["html"]
    full = html.keep_for(Options(full=True))
    one = html.keep_for(Options(compile_id="rank1:0/1"))
    assert full is not None and one is not None and one.compile == "0/1"
    assert REPORT_FORMATS["json"].keep_for(Options()) is None


def test_control_characters_from_a_log_are_shown_not_obeyed() -> None:
    assert clean("a\x1b]0;title\x07b\x1b[2J") == "a\\x1b]0;title\\x07b\\x1b[2J"
    assert clean("line\u2028sep\u202e") == "line\\u2028sep\\u202e"
    assert clean("tab\tand newline\n") == "tab\tand newline\n"
    buf = io.StringIO()
    buf.write(clean("\x00"))
    assert buf.getvalue() == "\\x00"
