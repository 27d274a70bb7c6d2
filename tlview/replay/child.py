"""Run repro scripts one after another in this process: `python -m tlview.replay.child OUT DIR...`.

`tlview repro --run` starts this in a child process; each result is one JSON line in OUT.
"""

from __future__ import annotations

import contextlib
import json
import runpy
import sys
from pathlib import Path
from typing import Any

MAX_REASON = 400


def reason(e: BaseException, backend: str | None) -> str:
    """One line that says why a repro did not run."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if "Runtime assertion failed" in str(e):
        return (
            "a runtime assertion of the graph failed on the rebuilt inputs, whose values are "
            f"random (the log has none; try --mode zeros): {text}"
        )[:MAX_REASON]
    if isinstance(e, IndexError) or "out of range" in text or "out of bounds" in text:
        return (
            "the graph indexes with an input's values, which are random here (the log has "
            f"none; try --mode zeros): {type(e).__name__}: {text}"
        )[:MAX_REASON]
    where = (
        f"compiling with {backend}: "
        if backend and type(e).__module__.startswith("torch._")
        else ""
    )
    return f"{where}{type(e).__name__}: {text}"[:MAX_REASON]


def run_one(d: Path) -> dict[str, Any]:
    script = d / "repro.py"
    rec: dict[str, Any] = {"dir": str(d)}
    ns: dict[str, Any] = {}
    try:
        ns = runpy.run_path(str(script), run_name="tlview_repro")
        for note in ns.get("NOTES", []):
            print("note:", note)
        result = ns["run"]()
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a repro that fails says why, in one line
        rec.update(status="failed", reason=reason(e, ns.get("BACKEND")))
        print(f"graph {ns.get('COMPILE_ID', d.name)} failed: {rec['reason']}", flush=True)
        return rec
    finally:
        _reset()
    problems = _checked(rec, result, ns["describe"])
    acc = _accuracy(rec, result, problems)
    if result.get("fallback"):
        rec["fallback"] = str(result["fallback"])
        print("note:", rec["fallback"])
    _say(ns, rec, problems, acc, "accuracy" in result)
    return rec


def _checked(rec: dict[str, Any], result: dict[str, Any], describe: Any) -> list[str]:
    """A run's outputs and each verdict against the log into REC (`mismatch` when one
    differs): the problems."""
    rec["outputs"] = [describe(o) for o in result["outputs"]]
    problems = [str(p) for p in result["problems"]]
    rec["verdicts"] = [[str(n), str(v)] for n, v in result.get("verdicts", [])]
    rec["values"] = [[str(n), str(v)] for n, v in result.get("values", [])]
    rec["status"] = "mismatch" if problems else "ran"
    if problems:
        rec["reason"] = "; ".join(problems)[:MAX_REASON]
    return problems


NOTHING = "nothing to compare: the graph returns nothing and changes no input in place"


def _accuracy(rec: dict[str, Any], result: dict[str, Any], problems: list[str]) -> list[list[Any]]:
    """--check-accuracy's verdicts into REC: `inaccurate` when a value disagrees, `unchecked`
    when there was nothing to compare."""
    acc = [[str(n), str(v), d, float(t), str(k)] for n, v, d, t, k in result.get("accuracy", [])]
    if "accuracy" in result:
        rec["accuracy"] = acc
        rec["accuracy_backend"] = str(result.get("accuracy_backend"))
        rec["accuracy_via"] = str(result.get("accuracy_via"))
    if problems:
        return acc
    bad = [a for a in acc if a[1] != "agrees"]
    if bad:
        rec["status"] = "inaccurate"
        rec["reason"] = _inaccurate(bad)
    elif "accuracy" in result and not acc:
        rec["status"] = "unchecked"
        rec["reason"] = NOTHING
    return acc


def _inaccurate(bad: list[list[Any]]) -> str:
    """Why a repro is inaccurate: what disagrees with eager, by how much."""
    what = "outputs" if all(a[4] == "output" for a in bad) else "values"
    return (
        f"{what} differ from eager beyond the tolerance: "
        + ", ".join(
            f"{label(a[0], a[4])} (largest difference {a[2]}, tolerance {a[3]})" for a in bad
        )
    )[:MAX_REASON]


def via_words(via: str | None) -> str:
    """How the backend got the graph, in words."""
    if via == "dynamo":
        return ", through torch.compile (dynamo traced the graph again)"
    return ", the graph handed to it" if via == "backend" else ""


def label(name: str, what: str) -> str:
    """An accuracy check's name: an output's own, others' with what they are."""
    return name if what == "output" else f"{name} ({what})"


def _say(
    ns: dict[str, Any],
    rec: dict[str, Any],
    problems: list[str],
    acc: list[list[Any]],
    checked: bool,
) -> None:
    """What a repro that ran prints: its outputs, each verdict, and the accuracy check's."""
    how = "as it is" if ns.get("BACKEND") is None else f"compiled with {ns['BACKEND']}"
    print(f"graph {ns['COMPILE_ID']} ran {how}: " + ", ".join(rec["outputs"]))
    for name, verdict in rec["verdicts"]:
        print(f"output {name}: {verdict}")
    for name, verdict in rec["values"]:
        print(f"value {name}: {verdict}")
    for p in problems:
        print("MISMATCH:", p)
    if not problems:
        print("outputs match the shapes and dtypes in the log", flush=True)
    if checked:
        how = via_words(rec.get("accuracy_via"))
        print(f"accuracy: eager against {rec['accuracy_backend']}{how}")
        if not acc:
            print(f"accuracy: {NOTHING}")
    for name, verdict, worst, tol, what in acc:
        print(
            f"accuracy {label(name, what)}: {verdict} (largest difference {worst}, tolerance {tol})"
        )


def _reset() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):  # a failed reset must not hide the result
            torch._dynamo.reset()


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    for d in argv[1:]:
        rec = run_one(Path(d))
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
