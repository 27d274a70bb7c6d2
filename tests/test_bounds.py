"""The bounds docs/trust.md states and the exit statuses the README lists are the code's: each
figure of the table is compared with its named constant, and tried with a log just past it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, report_json
from crafted import interned, metrics, record, source, start, storage

from tlview import errors
from tlview.index import compiles, describe, kinds
from tlview.parse import DEFAULT_MAX_RECORD, MAX_BAD_KEPT
from tlview.replay import plan, script
from tlview.tensors import fill

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# Each figure of the table (as it is written there) and the constant that sets it.
FIGURES: dict[str, int] = {
    "64 MiB": DEFAULT_MAX_RECORD,  # one record as read (the default column)
    "4M elements": fill.FILL_STEP,
    "16 MiB": fill.FILL_STEP * 4,  # of float32
    "512 characters": kinds.MAX_FILENAME,
    "1000 bad lines": MAX_BAD_KEPT,
    "500 events": kinds.MAX_EVENTS,
    "1000 distinct record kinds": kinds.MAX_KINDS,
    "100,000 storages": describe.MAX_DESCRIBED,
    "100,000 tensors": describe.MAX_DESCRIBED,
    "100,000 sources": describe.MAX_DESCRIBED,
    "256 compiles": compiles.IN_MEMORY,
    "8 MiB": compiles.IN_MEMORY_BYTES,
    "64 MiB a graph": plan.MAX_GRAPH_BYTES,
    "512 MiB a job": plan.MAX_TOTAL_BYTES,
    "100 characters": script.MAX_SLUG,
}
NUMBER = re.compile(r"(\d[\d,]*)\s?(KiB|MiB|GiB|K|M)?\b")


def _table(doc: Path, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after HEADING."""
    text = doc.read_text(encoding="utf-8").split(heading, 1)[1]
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # no header, no rule


def _value(figure: str) -> int:
    m = NUMBER.match(figure)
    assert m is not None, figure
    return int(m.group(1).replace(",", "")) * UNITS[m.group(2) or ""]


def test_every_figure_in_the_trust_table_is_its_constant() -> None:
    rows = _table(ROOT / "docs" / "trust.md", "## What is bounded")
    # The bound and default columns, without examples in code spans (`...[65,536 characters]`).
    text = " ".join(re.sub(r"`[^`]*`", "", r[1] + " " + r[3]) for r in rows)
    for figure, constant in FIGURES.items():
        assert figure in text, f"docs/trust.md no longer says {figure!r}"
        assert _value(figure) == constant, f"docs/trust.md says {figure}; the code has {constant:,}"
    rest = re.sub(r"exit \d+|float\d\w*", "", text)  # an exit status, a dtype: no figures
    for figure in sorted(FIGURES, key=len, reverse=True):
        rest = rest.replace(figure, "")
    assert NUMBER.findall(rest) == [], "a figure in docs/trust.md with no constant in FIGURES"


def test_the_readme_exit_statuses_are_errors_py() -> None:
    rows = _table(ROOT / "README.md", "## Exit status")
    documented = {int(r[0]) for r in rows}
    coded = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert documented == coded
    assert errors.EXIT_USAGE == 2 and "bad usage" in rows[2][1]


def _log(tmp_path: Path, body: bytes) -> Path:
    p = tmp_path / "past.log"
    p.write_bytes(interned("/m.py") + start() + body + metrics())
    return p


def test_bad_lines_past_the_bound_are_counted_not_listed(tmp_path: Path) -> None:
    data = report_json(_log(tmp_path, b"not a record\n" * (MAX_BAD_KEPT + 1)))
    assert data["stats"]["bad_lines"] == MAX_BAD_KEPT + 1
    assert len(data["bad_lines"]) == MAX_BAD_KEPT
    at = report_json(_log(tmp_path, b"not a record\n" * MAX_BAD_KEPT))
    assert len(at["bad_lines"]) == at["stats"]["bad_lines"] == MAX_BAD_KEPT


def test_record_kinds_past_the_bound_are_counted_together(tmp_path: Path) -> None:
    n = kinds.MAX_KINDS + 1
    body = b"".join(record(f"kind{i}", {}) for i in range(n))
    counted = report_json(_log(tmp_path, body))["stats"]["kinds"]
    assert len(counted) == kinds.MAX_KINDS + 1  # the first MAX_KINDS, and the rest together
    assert counted[kinds.OTHER_KINDS] == n + 3 - kinds.MAX_KINDS  # str, start, metrics too


def test_a_file_name_past_the_bound_is_cut(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    name = "/" + "d" * kinds.MAX_FILENAME + ".py"
    p.write_bytes(interned(name) + start())
    shown = report_json(p)["compiles"][0]["file"]
    assert len(shown) <= kinds.MAX_FILENAME < len(name)
    assert f"[{len(name):,} characters]" in shown


@pytest.mark.slow  # 2 x 100,001 records
def test_describe_records_past_the_bound_are_dropped_and_counted(tmp_path: Path) -> None:
    n = describe.MAX_DESCRIBED + 1
    body = b"".join(storage(i, 8) for i in range(n)) + b"".join(
        source(i, f"L['x{i}']") for i in range(n)
    )
    c = report_json(_log(tmp_path, body))["compiles"][0]
    assert c["events_dropped"] == 2  # the one storage and the one source past the bound
    assert len(c["inputs"]) == describe.MAX_DESCRIBED


def test_events_past_the_bound_are_counted_not_kept(tmp_path: Path) -> None:
    p = tmp_path / "events.log"
    n = kinds.MAX_EVENTS + 1
    p.write_bytes(interned("/m.py") + start() + record("some_event", {"n": 1}) * n)
    c = report_json(p)["compiles"][0]
    assert len(c["events"]) == kinds.MAX_EVENTS and c["events_dropped"] == 1


def test_a_repro_folder_name_past_the_bound_is_cut_with_a_hash() -> None:
    at = "c" * (script.MAX_SLUG - 3) + "0/1"  # `0/1` -> `0-1`: exactly MAX_SLUG characters
    assert script.slug(at) == "c" * (script.MAX_SLUG - 3) + "0-1"
    past, other = "c" + at, "c" + at[:-1] + "2"
    cut = script.slug(past)
    assert len(cut) == script.MAX_SLUG and "---" in cut and cut != script.slug(other)
