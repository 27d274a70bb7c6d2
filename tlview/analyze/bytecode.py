"""A frame's bytecode before and after dynamo: the pairs torch logs for resume functions, the
instructions of each without the numbers that shift (offsets, argument indexes), and, when
depyf is installed, the Python it decompiles them to (never run: only read)."""

from __future__ import annotations

import ast
import dis
import opcode
import re
import sys
import types
from dataclasses import dataclass
from typing import Any

from tlview.analyze.names import artifact_names
from tlview.model import Compile, Payload, Report

_BYTECODE = re.compile(r"(?P<co>.+)_(?P<which>ORIGINAL|MODIFIED)_BYTECODE")
# One instruction of `dis.Bytecode(code).dis()`: [source line] [>>] offset OPNAME [arg [(repr)]]
_LINE = re.compile(
    r"^\s*(?P<src>\d+)?\s+(?:>>)?\s*(?P<offset>\d+)\s+(?P<op>[A-Z_][A-Z0-9_]*)"
    r"(?:\s+(?P<arg>-?\d+))?(?:\s+\((?P<repr>.*)\))?\s*$"
)
_BYTECODE_SUFFIXES = ("_ORIGINAL_BYTECODE", "_MODIFIED_BYTECODE")
MAX_DECOMPILED = 20_000  # instructions decompiled at most (a frame has hundreds)


@dataclass(frozen=True, slots=True)
class BytecodePair:
    """A function's bytecode as dynamo found it and as it left it."""

    co_name: str
    original: Payload | None
    modified: Payload | None
    compiles: tuple[str, ...]  # the compiles they are filed under (a restart: two attempts)
    original_name: str | None = None  # each by the name `tlview show` takes, in its compile
    modified_name: str | None = None

    @property
    def where(self) -> str:
        return ", ".join(self.compiles)


def bytecode_pairs(report: Report, c: Compile) -> list[BytecodePair]:
    """The compile's original and modified bytecode by function, each taken from the compile
    or another attempt of it (a restart logs the original before, the modified after)."""
    return pairs_of(_attempts(report, c))


def pairs_of(attempts: list[Compile]) -> list[BytecodePair]:
    """The original and modified bytecode by function of a compile's attempts (the compile
    first): each the first one logged."""
    found: dict[str, dict[str, tuple[str, str, Payload]]] = {}
    for x in attempts:
        for name, p in artifact_names(x, _is_bytecode):
            m = _BYTECODE.fullmatch(p.kind)
            if m:
                found.setdefault(m.group("co"), {}).setdefault(m.group("which"), (x.key, name, p))
    return [_pair(co, got) for co, got in found.items()]


def _is_bytecode(kind: str) -> bool:
    """A kind `_BYTECODE` may match (rare.may_have_bytecode's test): the others need no name."""
    return kind.endswith(_BYTECODE_SUFFIXES)


def _pair(co: str, got: dict[str, tuple[str, str, Payload]]) -> BytecodePair:
    """A function's pair from what was found of it: (compile, name, payload) by which."""
    orig, mod = got.get("ORIGINAL"), got.get("MODIFIED")
    keys = tuple(dict.fromkeys(x[0] for x in (orig, mod) if x is not None))
    names = [None if x is None else x[1] for x in (orig, mod)]
    payloads = [None if x is None else x[2] for x in (orig, mod)]
    return BytecodePair(co, payloads[0], payloads[1], keys, names[0], names[1])


def _attempts(report: Report, c: Compile) -> list[Compile]:
    """The compile, then its other attempts in the same log."""
    if c.id is None:
        return [c]
    base = c.id.base
    others = [
        x
        for x in report.attempts
        if x is not c
        and x.id is not None
        and x.id.base == base
        and (x.log, x.pid) == (c.log, c.pid)
    ]
    return [c, *others]


def instructions(text: str) -> str:
    """The instructions of a dis listing, one a line, as `OPNAME argument`: what stays the same
    where code moved (offsets, argument indexes and jump targets are left out)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        arg = m.group("repr") or ""
        if arg.startswith("to "):
            arg = ""
        out.append(f"{m.group('op')} {arg}".rstrip())
    return "\n".join(out)


def decompiled(text: str, name: str = "frame") -> str | None:
    """The Python depyf decompiles a dis listing to, or None: depyf is not installed, the
    listing is of another Python than this one, or depyf could not."""
    try:
        import depyf
    except ImportError:
        return None
    code = assembled(text, name)
    if code is None:
        return None
    try:
        got = depyf.decompile(code)
    except Exception:  # a decompiler's failure is no error of the log's: show the text
        return None
    return got if isinstance(got, str) else None


@dataclass(slots=True)
class _Code:
    """What a code object is built from, as a listing gives it."""

    code: bytearray
    consts: dict[int, object]
    names: dict[int, str]
    local: dict[int, str]


def assembled(text: str, name: str = "frame") -> types.CodeType | None:
    """A code object of this Python with the listing's instructions, names and constants (its
    argument count, cells and exception table are not in a listing: one that needs them gives
    None). It is only ever read (decompiled), never run."""
    lines = [m for line in text.splitlines() if (m := _LINE.match(line))]
    if not lines or len(lines) > MAX_DECOMPILED or "ExceptionTable" in text:
        return None
    parts = _Code(bytearray(), {}, {}, {})
    for m in lines:
        if not _put(parts, m):
            return None
    try:
        return _code(parts, name if name.isidentifier() else "frame")
    except (ValueError, TypeError):
        return None


def _put(parts: _Code, m: re.Match[str]) -> bool:
    """One instruction into the code (caches before it where the offsets leave room)."""
    op = opcode.opmap.get(m.group("op"))
    offset = int(m.group("offset"))
    if op is None or op in dis.hasfree or offset < len(parts.code) or offset > 1 << 20:
        return False
    parts.code += bytes(offset - len(parts.code))  # CACHE entries are zeros
    arg = int(m.group("arg") or 0)
    if arg < 0:
        return False
    parts.code += bytes((op, arg & 0xFF))
    _operand(parts, op, arg, m.group("repr"))
    return True


def _operand(parts: _Code, op: int, arg: int, text: str | None) -> None:
    """The constant, name or local the instruction's argument indexes, from its repr."""
    if op in dis.hasconst:
        parts.consts[arg] = _literal(text)
    elif op in dis.haslocal and text:
        parts.local[arg] = text
    elif op in dis.hasname and text:
        parts.names[_name_index(op, arg)] = text.removeprefix("NULL + ").removesuffix(" + NULL")


def _name_index(op: int, arg: int) -> int:
    """Where a name's argument points in co_names (3.11 and later shift some by flag bits)."""
    name = opcode.opname[op]
    if name == "LOAD_GLOBAL" or (name == "LOAD_ATTR" and sys.version_info >= (3, 12)):
        return arg >> 1
    if name == "LOAD_SUPER_ATTR":
        return arg >> 2
    return arg


def _literal(text: str | None) -> object:
    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text  # a code object or another repr: its text stands for it


def _code(parts: _Code, name: str) -> types.CodeType:
    def table(d: dict[int, object], fill: object) -> tuple[object, ...]:
        return tuple(d.get(k, fill) for k in range(max(d, default=-1) + 1))

    names = tuple(str(x) for x in table(dict(parts.names), "_"))
    local = tuple(
        f"{x}_{k}" if x == "_" else str(x) for k, x in enumerate(table(dict(parts.local), "_"))
    )
    template: Any = (lambda: None).__code__  # replace()'s keywords differ by Python version
    return template.replace(  # type: ignore[no-any-return]
        co_code=bytes(parts.code),
        co_consts=table(parts.consts, None),
        co_names=names,
        co_varnames=local,
        co_nlocals=len(local),
        co_argcount=0,
        co_stacksize=64,
        co_linetable=b"",
        co_exceptiontable=b"",
        co_name=name,
        co_qualname=name,
    )
