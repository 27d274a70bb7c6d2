"""Symbols a compile made for dynamic shapes, and the issues torch.export reports."""

from __future__ import annotations

from typing import Any

from tlview.index.core import State, user_line
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
        )
    )


def on_issue(ix: State, rec: Record, c: Compile) -> None:
    """An export issue, told apart as torch's draft export tells them."""
    kind = rec.kind
    body = rec.body
    if not isinstance(body, dict):
        ix.bad(rec, "expected an object")
        return
    problem = wrong_fields(body, ISSUE_FIELDS)
    if problem:
        ix.bad(rec, problem)
        return
    if kind == "guard_on_data_dependent_error" and c.id is not None:
        return  # torch.compile breaks the graph there, and says so as a graph break
    if kind == "guard_added":
        # A guard export evaluated on an input's dynamic dim (it has sources; a runtime
        # assert has a provenance record of its own), outside any compile: export.
        # torch.compile adds such guards all the time, and says why it recompiled.
        if c.id is not None or body.get("prefix") != "eval":
            return
        if not body.get("symbol_to_sources"):
            return
    if len(c.export_issues) >= MAX_EVENTS:
        c.events_dropped += 1
        return
    subject = body.get("op" if kind.endswith("_fake_kernel") else "expr")
    if kind == "propagate_real_tensors_provenance":
        detail = (
            f"could not be decided from the symbols: the real tensors gave "
            f"{_opt_str(body.get('result'))}, asserts were added"
        )
    elif kind == "guard_on_data_dependent_error":
        detail = "could not be decided: it depends on the values of a tensor"
    elif kind == "guard_added":
        sources = body["symbol_to_sources"]
        named = ", ".join(f"{k} = {v}" for k, v in list(sources.items())[:4])
        detail = f"a guard on the input dims {named}: the exported program only takes those"
    elif kind == "missing_fake_kernel":
        detail = "this custom op has no fake kernel (torch.library.register_fake)"
    else:
        reason = (_opt_str(body.get("reason")) or "").strip()
        detail = reason or "its fake kernel does not match the real one"
    user = ix.stack(body.get("user_stack"))
    c.export_issues.append(
        ExportIssue(
            ISSUE_KINDS[kind],
            rec.line,
            subject[:300] if isinstance(subject, str) else "?",  # missing: types checked
            detail[:1000],
            user_line(user),
        )
    )


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)
