"""tlview: read PyTorch TORCH_TRACE logs, report compiles and rebuild their input tensors."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load_inputs"]


def load_inputs(path: Any, map_location: Any = None, allow_import: Any = ()) -> dict[str, Any]:
    """Load a file written by `tlview inputs --emit`, restoring exact tensors and aliasing.

    The result is the saved dictionary with `compiles` ({compile id: {source: tensor}}) rebuilt
    exactly; `map_location` is torch.load's; `allow_import` names modules whose tensor
    subclasses may be imported.
    """
    from tlview.tensors.emit import load_inputs as _load  # torch is imported only here

    return _load(path, map_location=map_location, allow_import=allow_import)
