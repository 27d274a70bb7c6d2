"""torch, imported on first use, and the torch objects the log's text names: dtypes, classes."""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tlview.errors import EXIT_NEEDS_EXTRA, TlviewError
from tlview.tensors.plans import TensorPlan
from tlview.tensors.rebuilt import Failed
from tlview.units import itemsize

if TYPE_CHECKING:
    from types import ModuleType

    from torch import Tensor
    from torch import dtype as DType
    from torch._C._autograd import CreationMeta

# How to get a torch tlview can rebuild with, as the README's Install says (tlview is not on
# PyPI, so `pip install 'tlview[torch]'` would look there for tlview).
TORCH_INSTALL = "pip install 'torch>=2.4.1,<2.16'"


def need_torch(purpose: str = "rebuilding tensors") -> ModuleType:
    """torch, imported on first use (so `tlview report` never pays for it)."""
    global _TORCH
    if _TORCH is not None:
        return _TORCH
    try:
        with warnings.catch_warnings():
            # torch's CPU wheels warn on import when numpy is absent; tlview does not need it.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        raise TlviewError(
            f"{purpose} needs torch 2.4.1 to 2.15: {TORCH_INSTALL}", EXIT_NEEDS_EXTRA
        ) from None
    _TORCH = torch
    return torch


_TORCH: ModuleType | None = None


def torch_dtype(name: str) -> DType:
    dt = _DTYPES.get(name)
    if dt is None:
        torch = need_torch()
        dt = getattr(torch, name, None)
        if not isinstance(dt, torch.dtype):
            # A newer torch's dtype (float8_e8m0fnu is not in torch 2.6), or no dtype at all.
            raise Failed(f"dtype 'torch.{name}' is not a dtype of this torch ({torch.__version__})")
        _DTYPES[name] = dt
    return dt


_DTYPES: dict[str, DType] = {}


def whole_dtype(name: str) -> tuple[DType, bool] | None:
    """A dtype whose size tlview's plans know, and whether its tensors can require grad."""
    got = _WHOLE_DTYPES.get(name)
    if got is None and name not in _WHOLE_DTYPES:
        try:
            dt = torch_dtype(name)
        except Failed:
            dt = None
        if dt is not None and dt.itemsize == (itemsize(name) or 1):
            got = (dt, dt.is_floating_point or dt.is_complex)
        _WHOLE_DTYPES[name] = got
    return got


_WHOLE_DTYPES: dict[str, tuple[DType, bool] | None] = {}


def resolve_type(
    name: str | None, allow_import: Sequence[str]
) -> tuple[type[Tensor] | None, str | None]:
    """The tensor class a log names, or why not: only torch's own modules unless allowed."""
    torch = need_torch()
    refused = import_refusal(name, allow_import)
    if refused is not None:
        return None, refused
    assert name is not None
    return _tensor_class(torch, name, name.split("."))


def import_refusal(name: str | None, allow_import: Sequence[str]) -> str | None:
    """Why the tensor class a log names is not imported (None: it may be), without torch."""
    if not name or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", name):
        return f"the logged type {name!r} is not a class name"
    parts = name.split(".")
    if any(part.startswith("__") for part in parts):
        return f"the logged type {name} names a private module: not imported"
    allowed = parts[0] == "torch" or any(
        name == m or name.startswith(m.rstrip(".") + ".") for m in allow_import
    )
    if not allowed:
        return (
            f"type {name} lives outside torch and importing it would run its code: "
            f"pass --allow-import {parts[0]} to allow it"
        )
    return None


def _tensor_class(
    torch: ModuleType, name: str, parts: list[str]
) -> tuple[type[Tensor] | None, str | None]:
    """The tensor class NAME, from the longest module prefix of it that imports; or why not."""
    for k in range(len(parts) - 1, 0, -1):
        mod_name = ".".join(parts[:k])
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        except Exception as e:  # importing ran code that failed
            return None, f"importing {mod_name} failed: {type(e).__name__}: {e}"
        obj: Any = mod
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
        if isinstance(obj, type) and issubclass(obj, torch.Tensor):
            return obj, None
        return None, f"{name} is not a tensor class in this environment"
    return None, f"cannot import the module of {name}"


def logged_literal(text: str | None) -> tuple[Any, bool]:
    """A logged repr read back as a Python literal (no code runs), and whether that worked."""
    if text is None:
        return None, True
    if len(text) > 10_000:
        return None, False
    try:
        return ast.literal_eval(text), True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None, False


def torch_creation_meta(torch: ModuleType, text: str) -> CreationMeta | None:
    name = text.rsplit(".", 1)[-1]
    return getattr(torch._C._autograd.CreationMeta, name, None)


def grad_refused(p: TensorPlan, dtype: DType) -> str | None:
    """Why a tensor logged as requiring grad cannot: torch allows it for float and complex only."""
    if p.requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        return f"requires_grad on {p.dtype} is impossible in torch: left off"
    return None
