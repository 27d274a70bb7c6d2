"""Real tensors of other layouts than strided: sparse COO (the log has no indices), sparse
compressed (CSR, CSC, BSR, BSC) from the indices and values the log describes, mkldnn from a
dense tensor of its size."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from tlview.tensors.plans import TensorPlan

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from torch import Tensor
    from torch import dtype as DType

COMPRESSED = ("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")
_BY_ROW = ("sparse_csr", "sparse_bsr")  # compressed rows: crow_indices and col_indices
_BLOCKS = ("sparse_bsr", "sparse_bsc")


def quiet_sparse(torch: ModuleType) -> None:
    """Have torch say its one-time "sparse CSR support is in beta" where it is ignored: said
    from C++ while a fake is made, it would reach stderr."""
    global _QUIET
    if not _QUIET:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            torch.sparse_csr_tensor(
                torch.zeros(2, dtype=torch.int64),
                torch.zeros(0, dtype=torch.int64),
                torch.zeros(0),
                (1, 1),
            )
        _QUIET = True


_QUIET = False


def coo(torch: ModuleType, p: TensorPlan, dt: DType, dev: str) -> tuple[Tensor, str]:
    """A sparse COO tensor of the logged size with no entries: the log has no indices."""
    size = [int(d) for d in p.size]
    sd = p.sparse_dim if p.sparse_dim is not None else len(size)
    r = torch.sparse_coo_tensor(
        torch.empty((sd, 0), dtype=torch.int64, device=dev),
        torch.empty((0, *size[sd:]), dtype=dt, device=dev),
        size,
        is_coalesced=bool(p.coalesced),
        check_invariants=True,  # said, so torch does not warn; nnz 0 passes
    )
    return r, "sparse COO: the log has no indices, values or nnz: rebuilt with nnz 0"


def compressed(
    torch: ModuleType, p: TensorPlan, parts: tuple[Tensor, Tensor, Tensor], write: bool
) -> tuple[Tensor, str | None]:
    """A compressed sparse tensor from its rebuilt indices and values, the indices made valid
    (sorted, in range, the logged nnz spread over the rows) when `write`."""
    index, plain, values = parts
    size = [int(d) for d in p.size]
    layout = getattr(torch, p.layout)
    note = None
    if write:
        note = _write_indices(torch, p, size, index, plain, values)
    check = write and note is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "support is in beta state"
        r = torch.sparse_compressed_tensor(
            index, plain, values, size, layout=layout, check_invariants=check
        )
    return r, note


def empty_compressed(torch: ModuleType, p: TensorPlan, dt: DType, dev: str) -> tuple[Tensor, str]:
    """A CSR or CSC tensor with no entries, for one logged without its indices and values
    (torch always logs them: only a damaged log lacks them; a block layout needs them)."""
    size = [int(d) for d in p.size]
    if p.layout not in ("sparse_csr", "sparse_csc") or len(size) != 2:
        raise ValueError(f"{p.layout}: its indices and values are not logged")
    n = size[0] if p.layout == "sparse_csr" else size[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "support is in beta state"
        r = torch.sparse_compressed_tensor(
            torch.zeros(n + 1, dtype=torch.int64, device=dev),
            torch.empty(0, dtype=torch.int64, device=dev),
            torch.empty(0, dtype=dt, device=dev),
            size,
            layout=getattr(torch, p.layout),
            check_invariants=True,
        )
    return r, f"{p.layout}: the log has no indices or values: rebuilt with nnz 0"


def _write_indices(
    torch: ModuleType,
    p: TensorPlan,
    size: list[int],
    index: Tensor,
    plain: Tensor,
    values: Tensor,
) -> str | None:
    """Indices that spread the logged nnz over the compressed dim: row i holds the next
    columns from 0, as many rows as fit; the same in every batch."""
    batch = index.dim() - 1
    dense = p.dense_dim or 0
    if batch < 0 or len(size) - batch - dense != 2:
        return "its indices are not of a 2-d sparse tensor: left as random values"
    block = list(values.shape[batch + 1 : batch + 3]) if p.layout in _BLOCKS else [1, 1]
    if len(block) != 2 or 0 in block:
        return "its values do not say its block size: indices left as random values"
    rows, cols = size[batch] // block[0], size[batch + 1] // block[1]
    if p.layout not in _BY_ROW:
        rows, cols = cols, rows
    nnz = plain.shape[-1]
    if index.shape[-1] != rows + 1 or nnz > rows * cols:
        return (
            f"its {nnz} entries do not fit its {rows} x {cols} (blocks of) indices: left as "
            "random values"
        )
    # Row i holds nnz // rows entries, one more for the first nnz % rows rows: computed as
    # tensors the size of the indices (counted by --max-bytes), never as Python lists.
    with torch.no_grad():
        at = torch.arange(rows + 1, dtype=torch.int64)
        acc = at * (nnz // rows if rows else 0) + torch.clamp(at, max=nnz % rows if rows else 0)
        counts = acc[1:] - acc[:-1]
        starts = torch.repeat_interleave(acc[:-1], counts)
        cols_of = torch.arange(nnz, dtype=torch.int64) - starts
        index.copy_(acc.to(index.dtype).expand(index.shape))
        plain.copy_(cols_of.to(plain.dtype).expand(plain.shape))
    return None


def mkldnn(
    torch: ModuleType, p: TensorPlan, dt: DType, dev: str, fill: Callable[[Tensor], None]
) -> tuple[Tensor, str | None]:
    """An mkldnn tensor: a dense one of its size, filled, converted (meta: the strided tensor
    MetaConverter makes of one, with the logged strides)."""
    size = [int(d) for d in p.size]
    if dev.startswith("meta"):
        stride = [int(s) for s in p.stride] if p.stride is not None else None
        if stride is not None and len(stride) == len(size):
            r = torch.empty_strided(size, stride, dtype=dt, device="meta")
        else:
            r = torch.empty(size, dtype=dt, device="meta")
        return r, None  # as MetaConverter fakes one: meta tensors have no mkldnn form
    dense = torch.empty(size, dtype=dt, device=dev)
    fill(dense)
    return dense.to_mkldnn(), None
