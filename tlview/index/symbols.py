"""Symbols a compile made for dynamic shapes, and the issues torch.export reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tlview.index.beside import propagated
from tlview.index.core import State, innermost_user, user_line
from tlview.index.kinds import ISSUE_FIELDS, ISSUE_KINDS, MAX_EVENTS, SYMBOL_FIELDS, wrong_fields
from tlview.model import Compile, ExportIssue, Symbol
from tlview.parse import Record


def on_symbol(ix: State, rec: Record) -> None:
    """A symbol created, unbacked or specialized, at the user's line."""
    c = ix.compile_of(rec)
    b = rec.body
    if not isinstance(b, dict):
        ix.bad(rec, "expected an object")
        return
    problem = wrong_fields(b, SYMBOL_FIELDS, required=("symbol",))
    if problem:
        ix.bad(rec, problem)
    user = ix.stack(b.get("user_stack"), rec, "user_stack")
    where = user_line(user)
    kind = {
        "create_symbol": "created",
        "create_unbacked_symbol": "unbacked",
        "symbolic_shape_specialization": "specialized",
    }[rec.kind]
    if ix.part and not c.input_sets:  # it may have some in the part before: see merge
        ix.undescribed[c.id] = ix.undescribed.get(c.id, 0) + 1
    src = b.get("source")
    if src is None and isinstance(b.get("sources"), list):
        src = ", ".join(str(s) for s in b["sources"])
    c.symbols.append(
        Symbol(
            kind=kind,
            symbol=str(b.get("symbol", "?")),
            value=_opt_str(b.get("val", b.get("value"))),
            range=_opt_str(b.get("vr")),
            source=_opt_str(src),
            reason=_opt_str(b.get("reason")),
            where=where,
            # Several fake modes in one compile (exports outside any compile, `-/-`): a
            # symbol is made while the tensors of the latest one are fakified.
            describer=c.input_sets[-1].describer if c.input_sets else None,
            origin=innermost_user(ix.stack(b.get("stack", rec.meta.get("stack")))),
        )
    )


def on_issue(ix: State, rec: Record, c: Compile) -> None:
    """An export issue, told apart as torch's draft export tells them."""
    body = rec.body
    if not isinstance(body, dict):
        ix.bad(rec, "expected an object")
        return
    problem = wrong_fields(body, ISSUE_FIELDS)
    if problem:
        ix.bad(rec, problem)
        return
    kind = rec.kind
    if not _exported(kind, body, c):
        return
    if len(c.export_issues) >= MAX_EVENTS:
        c.events_dropped += 1
        return
    subject = body.get("op" if kind.endswith("_fake_kernel") else "expr")
    user = ix.stack(body.get("user_stack"))
    issue = ExportIssue(
        ISSUE_KINDS[kind],
        rec.line,
        subject[:300] if isinstance(subject, str) else "?",  # missing: types checked
        _ISSUE_WORDS[kind](body)[:1000],
        user_line(user),
    )
    add_issue(c, issue)


def add_issue(c: Compile, issue: ExportIssue) -> None:
    """An export issue, once: TORCH_DTRACE writes propagate_real_tensors and then its
    provenance for one expression, the latter with the user's stack."""
    last = c.export_issues[-1] if c.export_issues else None
    if last is not None and (last.kind, last.subject, last.detail) == (
        issue.kind,
        issue.subject,
        issue.detail,
    ):
        c.export_issues[-1] = issue
    else:
        c.export_issues.append(issue)


def _exported(kind: str, body: dict[str, Any], c: Compile) -> bool:
    """Whether the record is an issue of an export, not of torch.compile (which breaks the
    graph at a data-dependent guard, and says why it recompiled)."""
    if kind == "guard_on_data_dependent_error":
        return c.id is None
    if kind == "guard_added":
        # A guard export evaluated on an input's dynamic dim (it has sources; a runtime assert
        # has a provenance record of its own), outside any compile: export.
        return c.id is None and body.get("prefix") == "eval" and bool(body.get("symbol_to_sources"))
    return True


def _guard_words(body: dict[str, Any]) -> str:
    named = ", ".join(f"{k} = {v}" for k, v in list(body["symbol_to_sources"].items())[:4])
    return f"a guard on the input dims {named}: the exported program only takes those"


def _mismatch_words(body: dict[str, Any]) -> str:
    reason = (_opt_str(body.get("reason")) or "").strip()
    return reason or "its fake kernel does not match the real one"


# What each kind of issue says, in words.
_ISSUE_WORDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "propagate_real_tensors_provenance": lambda b: propagated(b.get("result")),
    "guard_on_data_dependent_error": lambda b: (
        "could not be decided: it depends on the values of a tensor"
    ),
    "guard_added": _guard_words,
    "missing_fake_kernel": lambda b: (
        "this custom op has no fake kernel (torch.library.register_fake)"
    ),
    "mismatched_fake_kernel": _mismatch_words,
}


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)
