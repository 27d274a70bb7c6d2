"""A report whose later compiles a forked process renders is byte for byte the report of one."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, corpus, only_log

import tlview.render.json.report as json_mod
import tlview.runtime.store as store
from tlview.analyze.compiles import analysed
from tlview.index import compiles
from tlview.load import read as load
from tlview.model import Report
from tlview.render.html import budget as kept
from tlview.render.html import page, pick, section
from tlview.render.html import report as html
from tlview.runtime import halves
from tlview.write import forking

ONE = 1 << 62  # MIN_COST: never fork


def _write(rep: Report, fmt: str, full: bool = False) -> bytes:
    out = io.BytesIO()
    if fmt == "html":
        html.stream(rep, out, full, split=forking(rep))
    else:
        json_mod.stream(rep, out, split=forking(rep))
    return out.getvalue()


def _forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every report worth two processes; count the forks."""
    made: list[int] = []
    start = halves.Later.__init__

    def counted(self: halves.Later, job: Any) -> None:
        start(self, job)
        made.append(self.copy.pid)

    monkeypatch.setattr(halves.Later, "__init__", counted)
    monkeypatch.setattr(halves, "MIN_COST", 0)
    return made


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("fmt", ["json", "html"])
@pytest.mark.parametrize(
    "path",
    [
        lambda: corpus("tlparse-tests", "multi_rank_logs"),  # 4 logs: the cut falls inside one
        lambda: only_log("mlp_aot_eager"),  # graph breaks, restarts and recompiles
        lambda: only_log("dtypes_zoo"),
        lambda: only_log("dynamic_shapes"),  # compile times: the slowest of both halves
        lambda: corpus("tlparse-tests", "simple_corrupted_json.log"),
        lambda: FIXTURES / "vllm.log",  # vLLM's calls: the later half's pieces merged
        lambda: FIXTURES / "vllm_tp",  # a job's calls, each rank in a half
    ],
)
def test_two_renderers_write_what_one_writes(
    fmt: str, path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)  # some compiles on disk, some in memory
    rep = load(path(), kept.page_keep(False) if fmt == "html" else None)
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = _write(rep, fmt)
    made = _forks(monkeypatch)
    assert _write(rep, fmt) == one
    assert len(made) == (2 if fmt == "html" else 1)  # the page's first pass, then its sections
    if fmt == "json":  # the figures after the compiles add up both halves
        assert b'"graph_breaks":' in one and b'"slowest_compiles":' in one


def test_the_full_page_and_linked_metrics_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # Long metric values repeated across compiles link to the first section showing them,
    # even when that section was rendered by the other process.
    rep = load(only_log("mlp_aot_eager"), kept.page_keep(True))
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = _write(rep, "html", full=True)
    assert b'<span class="dim">same as in</span>' in one
    _forks(monkeypatch)
    assert _write(rep, "html", full=True) == one


def test_the_halves_cost_the_same() -> None:
    assert halves.middle([1, 1, 1, 1]) in (None, 2)
    costs = [10 << 20, 1, 1, 1, 10 << 20]
    cut = halves.middle(costs)
    assert cut is not None and sum(costs[:cut]) <= sum(costs) // 2 + (10 << 20)
    assert halves.middle([100 << 20, 1]) == 1  # each half has a compile
    assert halves.middle([1, 100 << 20]) == 1
    assert halves.middle([5, 5, 5]) is None  # too little to be worth a fork
    assert halves.middle([50 << 20]) is None


@pytest.mark.slow  # over a second in all (pytest --durations)
def test_a_failed_renderer_is_replaced_by_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # The copy fails half way (a bug, memory): this process renders its half itself.
    rep = load(corpus("tlparse-tests", "multi_rank_logs"), kept.page_keep(False))
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one_page, one_json = _write(rep, "html"), _write(rep, "json")
    made = _forks(monkeypatch)
    here = os.getpid()
    real_section, compile_dict = section.section, json_mod.compile_dict

    def broken_section(*a: Any) -> Any:
        if os.getpid() != here:
            raise MemoryError
        return real_section(*a)

    def broken_dict(c: Any, *a: Any) -> Any:
        if os.getpid() != here:
            os._exit(9)  # dies without a word
        return compile_dict(c, *a)

    monkeypatch.setattr(section, "section", broken_section)
    monkeypatch.setattr(json_mod, "compile_dict", broken_dict)
    assert _write(rep, "html") == one_page
    assert _write(rep, "json") == one_json
    assert len(made) == 3


def test_spill_files_outlive_the_copy_and_its_output_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(store, "_DIR", None)  # this run's temp directory: made in tmp_path
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    rep = load(only_log("dtypes_zoo"))
    spills = sorted(tmp_path.glob("tlview-*/*"))
    assert spills and all(p.suffix == ".spill" for p in spills)
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = _write(rep, "json")
    made = _forks(monkeypatch)
    assert _write(rep, "json") == one
    assert _write(rep, "json") == one  # the copy removed none of the shared files
    assert len(made) == 2
    assert sorted(tmp_path.glob("tlview-*/*")) == spills  # its output (.part) is gone


def test_iterating_from_any_compile_matches_the_whole_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compiles, "IN_MEMORY", 2)
    rep = load(only_log("mlp_aot_eager"))
    (log,) = rep.logs
    whole = [json_mod.compile_dict(a) for a in analysed(rep)]
    assert any(d.get("recompile") for d in whole)  # explained against the compile before
    for i in range(len(whole)):
        assert [json_mod.compile_dict(a) for a in analysed(rep, i)] == whole[i:]
    assert [c.key for c in halves.compiles(rep, 2, 5)] == [d["key"] for d in whole[2:5]]


@pytest.mark.slow  # over a second in all (pytest --durations)
@pytest.mark.parametrize("caps", [(5, 3), (3, 0), (0, 0), (7, 7), (12, 4)])
@pytest.mark.parametrize(
    "path",
    [
        lambda: corpus("tlparse-tests", "multi_rank_logs"),  # 25 compiles over 4 logs
        lambda: only_log("mlp_aot_eager"),  # problems and recompiles rank before the rest
    ],
)
def test_the_page_picks_the_same_rows_when_the_first_pass_is_split(
    caps: tuple[int, int], path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With fewer rows than compiles, the rows kept, those kept in full, the count of hidden
    # problems and recompiles and every anchor come out as from one pass.
    monkeypatch.setattr(pick, "PAGE_COMPILES", caps[0])
    monkeypatch.setattr(pick, "DETAIL_COMPILES", caps[1])
    rep = load(path(), kept.page_keep(False))
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = page.build(rep)
    page_one = _write(rep, "html")
    made = _forks(monkeypatch)
    two = page.build(rep, split=forking(rep))
    assert len(made) == 1
    assert [(r.n, r.anchor, r.detail, r.payloads) for r in two.compiles] == [
        (r.n, r.anchor, r.detail, r.payloads) for r in one.compiles
    ]
    assert two.budget == one.budget
    assert _write(rep, "html") == page_one


def test_anchors_of_repeated_compile_ids_are_numbered_as_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two compiles with one id get anchors c-0_0 and c-0_0~2, whichever process met them.
    rep = load(only_log("mlp_aot_eager"), kept.page_keep(False))
    (log,) = rep.logs
    twice = list(log.compiles) + list(log.compiles)
    log.compiles = twice
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = page.build(rep)
    assert any("~2" in r.anchor for r in one.compiles)
    _forks(monkeypatch)
    assert [r.anchor for r in page.build(rep).compiles] == [r.anchor for r in one.compiles]


def test_a_process_with_other_threads_renders_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fork copies only the calling thread (a Dask client's, a progress bar's would be lost
    # with whatever locks they hold): such a process writes every compile itself.
    import threading

    rep = load(only_log("mlp_aot_eager"))
    monkeypatch.setattr(halves, "MIN_COST", ONE)
    one = _write(rep, "json")
    made = _forks(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert _write(rep, "json") == one
    finally:
        stop.set()
        other.join()
    assert made == []
    assert _write(rep, "json") == one and len(made) == 1


def test_the_copys_output_is_removed_however_reading_it_stops(tmp_path: Path) -> None:
    # A pipe closed half way (`| head`), ^C, or an error before the output is read.
    class Closes(io.RawIOBase):
        def write(self, b: object) -> int:
            raise BrokenPipeError

    def output(f: Any) -> None:
        f.write(b"x" * (4 * halves.COPY_CHUNK))

    later = halves.Later(output)
    assert later.result() == (True, None)
    with pytest.raises(BrokenPipeError):
        later.copy_to(Closes())  # type: ignore[arg-type]  # a stream that refuses writes
    assert not Path(later.path).exists()

    later = halves.Later(output)
    later.result()
    text = later.text()
    assert next(text) == "x" * halves.COPY_CHUNK
    text.close()  # type: ignore[attr-defined]  # a generator
    assert not Path(later.path).exists()

    later = halves.Later(output)
    later.result()
    path = Path(later.path)
    assert path.exists()
    del later  # never read
    assert not path.exists()
