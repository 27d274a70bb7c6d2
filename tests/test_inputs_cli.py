"""`tlview inputs`: the listing, `--emit`, and every refusal as one line with its exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, corpus, only_log, run_cli

pytestmark = pytest.mark.slow  # every listing and --emit rebuilds with torch
torch = pytest.importorskip("torch")


def lines_of(out: str, compile_id: str) -> list[str]:
    """The listing block of one compile: its title's rest, "Inputs", the header, the rule, the
    rows, the notes."""
    block = out.split(f"compile {compile_id} ")[1].split("\n\n")[0]
    return block.splitlines()


def cells(line: str) -> list[str]:
    """A row of the listing's table, piped: its cells between `|`."""
    return [c.strip() for c in line.split("|")]


def test_listing_shows_metadata_alias_groups_and_rebuilds() -> None:
    r = run_cli("inputs", only_log("views_aliasing"), "--compile-id", "1/0", "--check")
    assert r.exit_code == 0, r.output
    block = lines_of(r.stdout, "1/0")
    assert block[0].strip() == "ok  2 input(s)"
    # The report's inputs table's columns, named as it names them; --check adds two.
    assert cells(block[2]) == [
        "source",
        "size",
        "stride",
        "offset",
        "dtype",
        "device",
        "storage",
        "alias",
        "fake",
        "real",
    ]
    assert set(block[3]) == {"-", "+"}
    x = ["L['x']", "[6]", "[1]", "0", "float32", "cpu", "40 B", "#1", "ok", "ok"]
    assert cells(block[4]) == x
    assert cells(block[5]) == ["L['y']", "[6]", "[1]", "4", "float32", "cpu", "40 B", "#1"] + [
        "ok",
        "ok",
    ]
    # Without --check: the same columns as the report, nothing rebuilt.
    plain = lines_of(
        run_cli("inputs", only_log("views_aliasing"), "--compile-id", "1/0").stdout, "1/0"
    )
    assert cells(plain[4]) == x[:-2]


def test_listing_subclasses_and_notes() -> None:
    r = run_cli("inputs", only_log("subclasses"), "--check")
    assert r.exit_code == 0, r.output
    nested = cells(lines_of(r.stdout, "1/0")[4])
    assert nested[:2] == ["L['n']", "[3, s7=j1, 8]"]  # the graph took j1 as s7
    assert nested[-2:] == ["ok", "ok"] and "(NestedTensor)" in nested[4]
    two = cells(lines_of(r.stdout, "2/1")[4])
    assert "(TwoTensor)" in two[4] and two[-2:] == ["ok", "ok"]
    r = run_cli("inputs", corpus("tlparse-tests", "simple.log"), "--check")
    block = lines_of(r.stdout, "0/0")
    # Logged on CUDA, which this machine does not have: --emit would build it on cpu.
    assert [cells(block[4])[k] for k in (5, 7, 8, 9)] == ["cuda:0", "", "ok", "ok (cpu)"]


def test_listing_takes_one_compile_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Memory stays that of one compile: the next compile is read only once the last is listed.
    import tlview.analyze.names as names
    import tlview.tensors.rows as rebuild

    pulled: list[str] = []
    listed: list[str] = []
    real_rows, real_choose = rebuild.input_rows, names.compiles_with_inputs

    def choose(rep, compile_id=None):  # type: ignore[no-untyped-def]
        for c in real_choose(rep, compile_id):
            pulled.append(c.key)
            yield c

    def rows(c, allow_import=(), check=False):  # type: ignore[no-untyped-def]
        assert pulled[-1] == c.key  # nothing read ahead
        listed.append(c.key)
        return real_rows(c, allow_import, check)

    monkeypatch.setattr(names, "compiles_with_inputs", choose)
    monkeypatch.setattr(rebuild, "input_rows", rows)
    r = run_cli("inputs", only_log("views_aliasing"))
    assert r.exit_code == 0, r.output
    assert listed == pulled and len(listed) == r.stdout.count("\ncompile ") + 1 >= 3


def test_listing_of_several_logs_names_them() -> None:
    r = run_cli("inputs", corpus("compile_error"))
    assert r.exit_code == 0, r.output
    # The log's short label, as the report's tables name it
    assert "compile 4oku3kw2.log:0/0  failed  1 input(s)" in r.stdout
    short = run_cli("inputs", corpus("compile_error"), "--compile-id", "4oku3kw2.log:2/0")
    assert short.exit_code == 0 and "compile 4oku3kw2.log:2/0  " in short.stdout, short.output
    r = run_cli(
        "inputs",
        corpus("compile_error"),
        "--compile-id",
        "dedicated_log_torch_trace_4oku3kw2.log:2/0",
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.count("compile ") == 1 and "L['idx']" in r.stdout


def test_emit_writes_a_weights_only_file(tmp_path: Path) -> None:
    out = tmp_path / "example_inputs.pt"
    r = run_cli("inputs", only_log("views_aliasing"), "--emit", out, "--seed", "5")
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith(f"tlview: wrote {out} (17 tensor(s) of 10 compile(s)")
    assert r.stdout == ""
    data = torch.load(out, weights_only=True)
    assert data["format"] == "tlview.inputs/1" and data["torch_version"] == "2.13.0+cpu"
    x, y = data["compiles"]["1/0"]["L['x']"], data["compiles"]["1/0"]["L['y']"]
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert y.storage_offset() == 4 and list(x.shape) == [6]
    w = data["compiles"]["4/0"]["L['fn']._parameters['weight']"]
    assert isinstance(w, torch.nn.Parameter) and w.stride() == (27, 1, 9, 3)
    # the same seed gives the same values; tlview replaces its own file without --force
    again = tmp_path / "again.pt"
    assert (
        run_cli("inputs", only_log("views_aliasing"), "--emit", again, "--seed", "5").exit_code == 0
    )
    assert torch.equal(torch.load(again, weights_only=True)["compiles"]["1/0"]["L['x']"], x)
    r = run_cli("inputs", only_log("views_aliasing"), "--emit", out, "--seed", "6")
    assert r.exit_code == 0, r.output
    assert not torch.equal(torch.load(out, weights_only=True)["compiles"]["1/0"]["L['x']"], x)


def test_emit_several_logs_prefixes_the_log_name(tmp_path: Path) -> None:
    out = tmp_path / "inputs.pt"
    r = run_cli("inputs", corpus("multirank_gloo"), "--emit", out, "--mode", "zeros")
    assert r.exit_code == 0, r.output
    keys = sorted(torch.load(out, weights_only=True)["compiles"])
    assert keys and all(":" in k for k in keys)
    assert {k.split(":")[0] for k in keys} == {
        p.name for p in corpus("multirank_gloo").glob("*.log")
    }


def test_emit_refuses_a_file_tlview_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "mine.pt"
    out.write_text("precious")
    r = run_cli("inputs", only_log("dtypes_zoo"), "--emit", out)
    assert r.exit_code == 4
    assert (
        r.stderr
        == f"tlview: {out}: exists and was not written by tlview; use --force to replace it\n"
    )
    assert out.read_text() == "precious"
    assert run_cli("inputs", only_log("dtypes_zoo"), "--emit", out, "--force").exit_code == 0


def test_max_bytes_refuses_with_one_line(tmp_path: Path) -> None:
    log = only_log("transformer_inductor")
    out = tmp_path / "big.pt"
    r = run_cli("inputs", log, "--emit", out, "--max-bytes", "64K")
    assert r.exit_code == 4
    assert r.stderr.count("\n") == 1
    assert "need 72.0 KiB of memory, over --max-bytes 64.0 KiB" in r.stderr
    assert "use --mode meta" in r.stderr and not out.exists()
    r = run_cli("inputs", log, "--emit", out, "--max-bytes", "64K", "--mode", "meta")
    assert r.exit_code == 0, r.output
    t = next(iter(torch.load(out, weights_only=True)["compiles"]["0/0"].values()))
    assert t.device.type == "meta"
    assert run_cli("inputs", log, "--emit", out, "--max-bytes", "80K", "--force").exit_code == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--max-bytes", "lots"], 2, "--max-bytes 'lots': expected a size such as 8G"),
        (["--compile-id", "9/9"], 2, "no compile '9/9'; the log has: "),
        (["--device", "nosuch:7", "--emit", "x.pt"], 2, "--device nosuch:7: not available"),
    ],
)
def test_bad_requests_are_one_line(
    args: list[str], code: int, message: str, tmp_path: Path
) -> None:
    args = [str(tmp_path / a) if a.endswith(".pt") else a for a in args]
    r = run_cli("inputs", only_log("dtypes_zoo"), *args)
    assert r.exit_code == code, r.output
    assert r.stderr.startswith("tlview: ") and r.stderr.count("\n") == 1
    assert message in r.stderr


def test_missing_path_is_exit_1(tmp_path: Path) -> None:
    r = run_cli("inputs", tmp_path / "nope.log")
    assert r.exit_code == 1 and r.stderr.startswith("tlview: ")


def test_load_inputs_is_exported_and_checks_its_file(tmp_path: Path) -> None:
    import tlview

    out = tmp_path / "x.pt"
    assert run_cli("inputs", only_log("dtypes_zoo"), "--emit", out).exit_code == 0
    got = tlview.load_inputs(out)
    assert got["format"] == "tlview.inputs/1"
    assert str(got["compiles"]["2/0"]["L['x']"].dtype) == "torch.float8_e4m3fn"
    bad = tmp_path / "bad.pt"
    torch.save({"format": "something else"}, bad)
    with pytest.raises(tlview.errors.TlviewError, match="not a tlview.inputs/1 file"):
        tlview.load_inputs(bad)
    data = torch.load(out, weights_only=True)
    data["exact"]["2/0"]["groups"][0]["storages"] = {"0": "many"}
    torch.save(data, bad)
    with pytest.raises(tlview.errors.TlviewError, match="compile 2/0: its plans are damaged"):
        tlview.load_inputs(bad)


SCRIPT = r"""
import json, sys
sys.modules["torch"] = None  # as if torch were not installed
from click.testing import CliRunner
from tlview.cli import main
runner = CliRunner()
listing = runner.invoke(main, ["inputs", sys.argv[1], "--compile-id", "1/0", "--check"])
emit = runner.invoke(main, ["inputs", sys.argv[1], "--emit", sys.argv[2]])
help = runner.invoke(main, ["inputs", "--help"])
print(json.dumps({"listing": [listing.exit_code, listing.stdout],
                  "emit": [emit.exit_code, emit.stderr], "help": help.exit_code}))
"""


def test_without_torch_the_listing_works_and_emit_says_why(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(only_log("views_aliasing")), str(tmp_path / "x.pt")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, COLUMNS="200"),  # no cell wrapped
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    code, out = got["listing"]
    assert code == 0
    assert cells(out.splitlines()[4]) == [
        "L['x']",
        "[6]",
        "[1]",
        "0",
        "float32",
        "cpu",
        "40 B",
        "#1",
        "-",
        "-",
    ]
    assert "torch is not installed: the fake and real rebuilds were not tried" in out
    code, err = got["emit"]
    assert code == 5  # the install line is the README's (Install)
    assert err == "tlview: rebuilding tensors needs torch 2.4.1 to 2.15: " + (
        "pip install 'torch>=2.4.1,<2.16'\n"
    )
    assert got["help"] == 0


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom tlview.cli import main\n"
        "r = CliRunner().invoke(main, ['inputs', '--help'])\n"
        "assert r.exit_code == 0 and '--allow-import' in r.stdout\n"
        "print('torch' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.parametrize("emit", [False, True])
def test_torch_is_imported_while_the_second_reader_reads(
    emit: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A log read in two parts: tlview imports torch (and dynamo for the listing) once it has
    # read its part, an eighth of the log for a job this long, while its copy reads the rest;
    # the listing and the file written are those of one reader.
    import tlview.cli as cli
    import tlview.index.parts as split

    log = only_log("views_aliasing")
    whole = run_cli("inputs", log, *(["--emit", str(tmp_path / "a.pt")] if emit else ["--check"]))
    assert whole.exit_code == 0, whole.output
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    ran: list[str] = []
    starts: list[int] = []
    for name in ("_import_torch", "_import_fake"):
        job = getattr(cli, name)
        monkeypatch.setattr(cli, name, lambda job=job, name=name: ran.append(name) or job())
    record_start = split.record_start
    monkeypatch.setattr(
        split, "record_start", lambda p, at: starts.append(at) or record_start(p, at)
    )
    halves = run_cli("inputs", log, *(["--emit", str(tmp_path / "b.pt")] if emit else ["--check"]))
    assert halves.exit_code == 0, halves.output
    assert ran == (["_import_torch"] if emit else ["_import_fake", "_import_torch"])
    size = log.stat().st_size
    assert starts == [(size - 3 * size // 4) // 2]
    if emit:
        assert halves.stderr == whole.stderr.replace("a.pt", "b.pt")
    else:
        assert halves.stdout == whole.stdout


def test_listing_says_where_a_cuda_input_would_be_built() -> None:
    # tlparse's log of a CUDA run, listed on this CPU machine: the real tensors --emit and
    # repro build go on cpu, and the listing says so instead of a plain "ok".
    log = corpus("tlparse-tests", "inductor_provenance_jit_cuda_log.txt")
    r = run_cli("inputs", log, "--compile-id", "0/0", "--check")
    assert r.exit_code == 0, r.output
    block = lines_of(r.stdout, "0/0")
    row = cells(block[6])
    assert row[0] == "L['x']"
    assert [row[k] for k in (5, 7, 8, 9)] == ["cuda:0", "", "ok", "ok (cpu)"]
    assert all(cells(ln)[-1] == "ok (cpu)" for ln in block[4:10])
    note = (
        "L['x']: real: logged on cuda:0, which this machine does not have: --emit and repro "
        "build it on cpu (--device DEV chooses)"
    )
    assert note in [ln.strip() for ln in block]
    # An input on a device this machine has is plainly ok.
    cpu = lines_of(
        run_cli("inputs", only_log("views_aliasing"), "--compile-id", "1/0", "--check").stdout,
        "1/0",
    )
    assert cells(cpu[4])[-1] == "ok" and "(cpu)" not in "\n".join(cpu)
