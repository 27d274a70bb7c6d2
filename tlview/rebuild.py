"""A thin entry point over `tlview.tensors`: the compile a rebuild is for, and the import paths
of earlier releases, which warn (DeprecationWarning) and are kept for one release.

Use `tlview.fake_inputs`, `tlview.real_inputs` and `tlview.read` instead (docs/api.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tlview.analyze import names
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.model import Compile, Report
from tlview.tensors import plans
from tlview.tensors.dtypes import need_torch
from tlview.tensors.exprs import eval_expr
from tlview.tensors.fake import build_fakes
from tlview.tensors.options import DEFAULT_MAX_BYTES, RebuildOptions
from tlview.tensors.plans import plan_compile
from tlview.tensors.real import ZERO_NOTE, build_real
from tlview.tensors.rebuilt import Rebuilt
from tlview.tensors.rows import input_rows
from tlview.units import parse_bytes

if TYPE_CHECKING:
    from torch import Tensor
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ZERO_NOTE",
    "Rebuilt",
    "compile_of",
    "eval_expr",
    "fake_inputs",
    "fake_rebuild",
    "find_compile",
    "forget_plans",
    "input_rows",
    "need_torch",
    "options",
    "parse_bytes",
    "plan_compile",
    "real_inputs",
]
Log = str | Path | Report


def compile_of(log: Log | Compile, compile_id: str | None, what: str) -> Compile:
    """The compile a function was given, or the one COMPILE_ID names in the log."""
    if isinstance(log, Compile):
        return log
    if compile_id is None:
        raise TlviewError(f"{what}: give a compile id", EXIT_USAGE)
    from tlview.load import read

    return names.find_compile(log if isinstance(log, Report) else read(log), compile_id)


def options(
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int | None = None,
    allow_import: Sequence[str] = (),
) -> RebuildOptions:
    """The one record of what a rebuild was asked, from the keywords the API takes."""
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    return RebuildOptions(
        mode=mode, seed=seed, device=device, max_bytes=limit, allow_import=allow_import
    )


def fake_rebuild(
    log: Log | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: FakeTensorMode | None = None,
    shape_env: ShapeEnv | None = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """`tlview.fake_inputs`, with the notes and failures of each input."""
    c = compile_of(log, compile_id, "fake_inputs")
    return build_fakes(c, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import)


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(
        f"tlview.rebuild.{name} is deprecated and goes in the next release: use {instead}",
        DeprecationWarning,
        stacklevel=3,
    )


def real_inputs(
    log: Log | Compile,
    compile_id: str | None = None,
    *,
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int | None = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """Deprecated: `tlview.real_inputs`, whose signature this is."""
    _deprecated("real_inputs", "tlview.real_inputs")
    return build_real(
        compile_of(log, compile_id, "real_inputs"),
        options(mode, seed, device, max_bytes, allow_import),
    )


def fake_inputs(
    log: Log | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: FakeTensorMode | None = None,
    shape_env: ShapeEnv | None = None,
    allow_import: Sequence[str] = (),
) -> dict[str, Tensor]:
    """Deprecated: `tlview.fake_inputs`."""
    _deprecated("fake_inputs", "tlview.fake_inputs")
    got = fake_rebuild(
        log, compile_id, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import
    )
    return got.tensors


def find_compile(report: Report, compile_id: str) -> Compile:
    """Deprecated: `tlview.analyze.names.find_compile`; the API takes the id itself."""
    _deprecated("find_compile", "tlview.real_inputs(report, compile_id)")
    return names.find_compile(report, compile_id)


def forget_plans() -> None:
    """Deprecated: `tlview.tensors.plans.forget_plans`."""
    _deprecated("forget_plans", "tlview.tensors.plans.forget_plans")
    plans.forget_plans()
