"""Turn a compile's logged inputs back into tensors: fake (through MetaConverter), meta, zeros, random.

The entry points; `tlview.tensors` holds the machinery (plans, builders, the listing's rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tlview.analyze.names import find_compile
from tlview.errors import EXIT_USAGE, TlviewError
from tlview.model import Compile, Report
from tlview.tensors.dtypes import need_torch
from tlview.tensors.exprs import eval_expr
from tlview.tensors.fake import build_fakes
from tlview.tensors.options import DEFAULT_MAX_BYTES, RebuildOptions, parse_bytes
from tlview.tensors.plans import forget_plans, plan_compile
from tlview.tensors.real import ZERO_NOTE, build_real
from tlview.tensors.rebuilt import Rebuilt
from tlview.tensors.rows import input_rows

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ZERO_NOTE",
    "Rebuilt",
    "eval_expr",
    "fake_inputs",
    "fake_rebuild",
    "find_compile",  # its home is tlview.analyze.names; kept here for one release
    "forget_plans",
    "input_rows",
    "need_torch",
    "parse_bytes",
    "plan_compile",
    "real_inputs",
]


def real_inputs(
    compile: Compile,
    *,
    mode: str = "random",
    seed: int = 0,
    device: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """Real (random, zeros) or meta tensors for every input of a compile, aliasing kept."""
    opts = RebuildOptions(
        mode=mode, seed=seed, device=device, max_bytes=max_bytes, allow_import=allow_import
    )
    return build_real(compile, opts)


def fake_inputs(
    log: str | Path | Report | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: Any = None,
    shape_env: Any = None,
    allow_import: Sequence[str] = (),
) -> dict[str, Any]:
    """FakeTensors for the inputs of one compile, with the original run's symbols where dynamic.

    `log` is a path, a loaded Report (then `compile_id` picks the compile) or a Compile. Without
    `fake_mode` and `shape_env`, a new FakeTensorMode over a ShapeEnv that names each dynamic
    dim's symbol as the original run did.
    """
    got = fake_rebuild(
        log, compile_id, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import
    )
    return got.tensors


def fake_rebuild(
    log: str | Path | Report | Compile,
    compile_id: str | None = None,
    *,
    fake_mode: Any = None,
    shape_env: Any = None,
    allow_import: Sequence[str] = (),
) -> Rebuilt:
    """Like `fake_inputs`, with the notes and failures of each input."""
    if isinstance(log, Compile):
        c = log
    else:
        if compile_id is None:
            raise TlviewError("fake_inputs: give a compile id", EXIT_USAGE)
        report = log if isinstance(log, Report) else _load(log)
        c = find_compile(report, compile_id)
    return build_fakes(c, fake_mode=fake_mode, shape_env=shape_env, allow_import=allow_import)


def _load(path: str | Path) -> Report:
    from tlview.load import load

    return load(path)
