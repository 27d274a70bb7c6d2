"""Where fresh storages are built and what fills them: each logged device's stand-in, the values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlview.errors import EXIT_USAGE, TlviewError

if TYPE_CHECKING:
    from types import ModuleType

    from torch import Generator, Tensor, UntypedStorage
    from torch import dtype as DType


class Devices:
    """Logged device -> the device to build on, with a note when it had to change."""

    def __init__(self, torch: ModuleType, device: str | None, mode: str) -> None:
        self.torch = torch
        self.forced = device
        self.mode = mode
        self.cache: dict[str, tuple[str, str | None]] = {}
        if device is not None and mode != "meta" and not self.available(device):
            raise TlviewError(f"--device {device}: not available on this machine", EXIT_USAGE)

    def available(self, dev: str) -> bool:
        try:
            self.torch.empty(0, device=dev)
            return True
        except Exception:
            return False

    def map(self, logged: str) -> tuple[str, str | None]:
        if self.mode == "meta":
            return "meta", None
        if self.forced is not None:
            return self.forced, None
        got = self.cache.get(logged)
        if got is None:
            if self.available(logged):
                got = (logged, None)
            else:
                got = ("cpu", f"logged on {logged}, which this machine does not have: built on cpu")
            self.cache[logged] = got
        return got


_SMALL_INTS = 8  # random integers are drawn from [0, 8): safe as small indices and counts
FILL_STEP = 1 << 22  # elements of a rarer dtype cast from random floats at a time (16 MiB)


class Filler:
    """Fills fresh storages: random values per dtype from one seed, zeros, or nothing (meta)."""

    def __init__(self, torch: ModuleType, mode: str, seed: int) -> None:
        self.torch = torch
        self.mode = mode
        self.seed = seed
        self.gens: dict[str, Generator] = {}
        self.normal: set[DType] = {
            torch.float16,
            torch.bfloat16,
            torch.float32,
            torch.float64,
            torch.complex64,
            torch.complex128,
        }
        self.ints: set[DType] = {
            torch.uint8,
            torch.int8,
            torch.int16,
            torch.int32,
            torch.int64,
            torch.uint16,
            torch.uint32,
            torch.uint64,
        }

    def gen(self, device: str) -> Generator:
        g = self.gens.get(device)
        if g is None:
            g = self.torch.Generator(device=device)
            g.manual_seed(self.seed)
            self.gens[device] = g
        return g

    def storage(self, nbytes: int, dtype: DType, device: str) -> UntypedStorage:
        torch = self.torch
        if self.mode == "meta" or device.startswith("meta"):
            meta: Tensor = torch.empty(nbytes, dtype=torch.uint8, device="meta")
            return meta.untyped_storage()
        size = dtype.itemsize
        n = nbytes // size
        make = torch.zeros if self.mode == "zeros" else torch.empty
        if n * size == nbytes:
            flat: Tensor = make(n, dtype=dtype, device=device)
        else:
            raw = torch.zeros(nbytes, dtype=torch.uint8, device=device)
            flat = torch.empty(0, dtype=dtype, device=device).set_(
                raw.untyped_storage(), 0, (n,), (1,)
            )
        if self.mode != "zeros":
            self.fill(flat, device)
        return flat.untyped_storage()

    def fill(self, t: Tensor, device: str) -> None:
        """Values per dtype: floats normal, ints in [0, 8), bool 0/1, others cast from floats."""
        torch = self.torch
        g = self.gen(device)
        dt = t.dtype
        if dt in self.normal:
            t.normal_(generator=g)
        elif dt is torch.bool:
            t.random_(0, 2, generator=g)
        elif dt in self.ints:
            t.random_(0, _SMALL_INTS, generator=g)
        else:
            src = torch.complex64 if dt.is_complex else torch.float32
            # Cast from floats a part at a time: a whole float copy of a large float8 tensor
            # would be four times its bytes, past what --max-bytes counted.
            parts = [t] if t.numel() <= FILL_STEP else _parts(torch, t)
            try:
                for part in parts:  # each temporary freed before the next is made
                    part.copy_(
                        torch.empty(part.shape, dtype=src, device=device).normal_(generator=g)
                    )
            except Exception:  # no cast kernel (packed fp4, bit types): random bytes
                raw = torch.empty(0, dtype=torch.uint8, device=device).set_(
                    t.untyped_storage(), 0, (t.untyped_storage().nbytes(),), (1,)
                )
                raw.random_(0, 256, generator=g)


def _parts(torch: ModuleType, t: Tensor) -> list[Tensor]:
    """Views of all of t's storage, FILL_STEP elements each: filling them fills t."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))
    return [flat[a : a + FILL_STEP] for a in range(0, n, FILL_STEP)]


def write_offsets(
    torch: ModuleType,
    offsets: Tensor,
    lengths: Tensor | None,
    total: int,
    min_len: int | None,
    max_len: int | None,
) -> str | None:
    """Write offsets (and lengths) that split `total` rows into batches within min/max seqlen."""
    batch = offsets.shape[0] - 1 if offsets.dim() == 1 else -1
    if batch < 0:
        return "offsets are not 1-d: left as random values"
    lo = min_len if min_len is not None else 0
    hi = max_len if max_len is not None else total
    lens = [lo] * batch
    rest = total - lo * batch
    if batch and (rest < 0 or lo > hi):
        lens = [total // batch] * batch
        rest = total - sum(lens)
        note = "min/max seqlen do not fit the values: offsets split them evenly"
    else:
        note = None
    for i in range(batch):
        if rest <= 0:
            break
        add = min(rest, max(0, hi - lens[i]))
        lens[i] += add
        rest -= add
    if batch:
        lens[-1] += rest
    acc = [0]
    for n in lens:
        acc.append(acc[-1] + n)
    with torch.no_grad():
        offsets.copy_(torch.tensor(acc, dtype=offsets.dtype))
        if lengths is not None and lengths.shape == (batch,):
            lengths.copy_(torch.tensor(lens, dtype=lengths.dtype))
    return note
