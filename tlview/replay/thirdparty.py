"""Third-party custom ops: the packages a user lets a repro import (`--allow-import PKG`), and the
modules of them the graph's own `# File:` comments name, which register ops when imported
(`transformers.integrations.moe` defines `transformers::grouped_mm_fallback`)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Sequence

from tlview.errors import EXIT_USAGE, TlviewError
from tlview.units import number

# `# File: /site-packages/transformers/integrations/moe.py:88 in forward, code: ...`
_FILE = re.compile(r"^\s*# File: (\S+?\.py):(\d+) in ", re.M)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_names(allow: Sequence[str]) -> None:
    """A usage error for a name that is not a dotted module name."""
    for m in allow:
        if not _MODULE.fullmatch(m):
            raise TlviewError(f"--allow-import {m!r}: not a module name", EXIT_USAGE)


def modules_named(text: str, package: str) -> list[str]:
    """The modules of PACKAGE whose files the graph's `# File:` comments name, in order."""
    out: list[str] = []
    for path, _line in _FILE.findall(text):
        mod = _module_of(path, package)
        if mod is not None and mod not in out:
            out.append(mod)
    return out


def caller(text: str, package: str, op: str) -> str | None:
    """The module of PACKAGE from which the graph calls OP (`torch.ops.ns.name`): the file of
    the `# File:` comment above the first line that calls it (fx heads each statement's code
    with the line it came from), which usually is the module that registers the op."""
    path = None
    for line in text.split("\n"):
        m = _FILE.match(line)
        if m is not None:
            path = m.group(1)
        elif f"{op}(" in line and path is not None:
            return _module_of(path, package)
    return None


def call_site(text: str, op: str) -> tuple[str, int] | None:
    """The file and line from which the graph calls OP (`torch.ops.ns.name`): those of the
    `# File:` comment above the first line that calls it."""
    site = None
    for line in text.split("\n"):
        m = _FILE.match(line)
        if m is not None:
            site = (m.group(1), number(m.group(2)) or 0)
        elif f"{op}(" in line and site is not None:
            return site
    return None


def importable(name: str) -> bool:
    """Whether a top-level module of this name can be imported here (found, not imported)."""
    if not _MODULE.fullmatch(name) or "." in name:
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _module_of(path: str, package: str) -> str | None:
    """`.../site-packages/transformers/integrations/moe.py` -> `transformers.integrations.moe`,
    when that is PACKAGE or a module in it."""
    top = package.split(".")[0]
    parts = path.replace("\\", "/").split("/")
    if top not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[::-1].index(top)
    names = [*parts[at:-1], parts[-1][:-3]]
    if names[-1] == "__init__":
        names.pop()
    mod = ".".join(names)
    return mod if _MODULE.fullmatch(mod) and inside(mod, package) else None


def inside(module: str, package: str) -> bool:
    """Whether MODULE is PACKAGE or one of its modules (`a.b` is in `a`, `ab` is not)."""
    return module == package or module.startswith(package + ".")


def import_allowed(allow: Sequence[str], text: str) -> tuple[list[str], list[str]]:
    """Import each allowed package and the modules of it the graph's code names: the modules
    imported (for repro.py), and one line per module that failed to import."""
    done: list[str] = []
    failed: list[str] = []
    for package in allow:
        for mod in [package, *modules_named(text, package)]:
            if mod in done:
                continue
            try:
                importlib.import_module(mod)
            except Exception as e:  # the user's package: whatever it raises is its own
                failed.append(
                    f"--allow-import {package}: import {mod} failed: {type(e).__name__}: {e}"
                )
                continue
            done.append(mod)
    return done, failed
