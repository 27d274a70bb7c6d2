"""Programs for benchmarks/repro_rate.py: torch.compile features a repro must survive.

Run under TORCH_TRACE (`TORCH_TRACE=/tmp/zoo python benchmarks/repro_zoo.py`) it writes one log
whose graphs are not in the shared corpus: BatchNorm and dropout, autograd.Function, no_grad and
autocast regions, flex_attention, while_loop, nested torch.cond, nested_compile_region, vmap,
container and global inputs, in-place ops on inputs and buffers, RNG, data-dependent sizes,
mark_dynamic, complex and integer dtypes, inductor, torch.export, compiled autograd and a tensor
subclass the program defines. A case that fails to compile prints why and the others go on.
"""

import traceback

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def cnn():
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.1),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )
    c = torch.compile(m, backend="eager")
    c(torch.randn(2, 3, 8, 8))
    m.eval()
    c(torch.randn(2, 3, 8, 8))


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@case
def autograd_function():
    f = torch.compile(lambda x: Square.apply(x).sum(), backend="aot_eager")
    f(torch.randn(4, requires_grad=True)).backward()


@case
def no_grad_and_autocast():
    @torch.compile(backend="eager")
    def f(x, w):
        with torch.no_grad():
            y = x @ w
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = (x @ w).relu()
        return y + z.float()

    f(torch.randn(3, 4), torch.randn(4, 5, requires_grad=True))


@case
def flex():
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score, b, h, q, kv):
        return score + (q - kv)

    @torch.compile(backend="eager")
    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=score_mod)

    q = torch.randn(1, 2, 16, 8)
    f(q, q.clone(), q.clone())


@case
def while_loop():
    from torch._higher_order_ops.while_loop import while_loop

    @torch.compile(backend="eager")
    def f(i, x):
        return while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (i, x))

    f(torch.tensor(0), torch.randn(3))


@case
def containers():
    @torch.compile(backend="eager")
    def f(xs, d, t):
        return xs[0] + xs[1] * d["a"] - t[0].sum()

    f([torch.randn(3), torch.randn(3)], {"a": torch.randn(3)}, (torch.randn(2, 2),))


W = torch.randn(4, 4)


@case
def global_and_closure():
    scale = torch.randn(4)

    @torch.compile(backend="eager")
    def f(x):
        return (x @ W) * scale

    f(torch.randn(2, 4))


@case
def inplace_and_views():
    @torch.compile(backend="eager")
    def f(x, y):
        x.mul_(2)
        v = y.view(-1)
        return v[1:], x.t()

    f(torch.randn(3, 4), torch.randn(2, 3))


@case
def rng():
    @torch.compile(backend="eager")
    def f(x):
        return F.dropout(x, 0.5, training=True) + torch.rand_like(x)

    f(torch.randn(8))


@case
def data_dependent():
    @torch.compile(backend="eager", fullgraph=False)
    def f(x):
        n = (x > 0).sum().item()
        return x[:n].sum() if n > 0 else x.sum()

    torch._dynamo.config.capture_scalar_outputs = True
    f(torch.randn(10))
    torch._dynamo.config.capture_scalar_outputs = False


@case
def nested_region():
    @torch.compiler.nested_compile_region
    def block(x):
        return x.sin() * 2

    @torch.compile(backend="eager")
    def f(x):
        return block(x) + block(x + 1)

    f(torch.randn(4))


@case
def vmap_grad():
    @torch.compile(backend="eager")
    def f(x):
        return torch.func.vmap(lambda r: r.sum() * r)(x)

    f(torch.randn(3, 4))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count += 1
        return self.lin(x) + self.count


@case
def buffer_mutation():
    m = Counter()
    torch.compile(m, backend="eager")(torch.randn(2, 4))


class MyTensor(torch.Tensor):
    pass


@case
def user_subclass():
    @torch.compile(backend="eager")
    def f(x):
        return x * 2

    f(torch.randn(3).as_subclass(MyTensor))


@case
def lstm_embedding():
    emb = nn.Embedding(10, 6)
    lstm = nn.LSTM(6, 5, batch_first=True)

    @torch.compile(backend="eager")
    def f(ids):
        out, _ = lstm(emb(ids))
        return out

    f(torch.randint(0, 10, (2, 7)))


@case
def sdpa_inductor():
    @torch.compile(backend="inductor")
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q = torch.randn(1, 2, 8, 4)
    f(q, q, q)


@case
def mark_dynamic():
    @torch.compile(backend="eager")
    def f(x, y):
        return torch.cat([x, y]).mean(0)

    x = torch.randn(5, 3)
    torch._dynamo.mark_dynamic(x, 0)
    f(x, torch.randn(2, 3))


@case
def nested_cond():
    @torch.compile(backend="eager")
    def f(p, q, x):
        def t(x):
            return torch.cond(q, lambda y: y + 1, lambda y: y - 1, (x,))

        return torch.cond(p, t, lambda x: x * 0, (x,))

    f(torch.tensor(True), torch.tensor(False), torch.randn(3))


@case
def complex_and_int():
    @torch.compile(backend="eager")
    def f(z, i):
        return (z * z.conj()).real + i.float(), i // 2

    f(torch.randn(4, dtype=torch.complex64), torch.arange(4))


@case
def export_strict():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(3, 3)

        def forward(self, x):
            return self.l(x).relu()

    torch.export.export(
        M(), (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim("b")},), strict=True
    )


@case
def compiled_autograd():
    m = nn.Linear(3, 3)
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend="eager")):
        torch.compile(m, backend="eager")(torch.randn(2, 3)).sum().backward()


class Pair(torch.Tensor):
    """A wrapper subclass defined by the program (TwoTensor's shape), not importable from torch."""

    @staticmethod
    def __new__(cls, a, b):
        return torch.Tensor._make_wrapper_subclass(cls, a.shape, dtype=a.dtype, device=a.device)

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __tensor_flatten__(self):
        return ["a", "b"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, size, stride):
        return Pair(inner["a"], inner["b"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        kwargs = kwargs or {}
        from torch.utils._pytree import tree_map_only

        a = func(
            *tree_map_only(Pair, lambda t: t.a, args), **tree_map_only(Pair, lambda t: t.a, kwargs)
        )
        b = func(
            *tree_map_only(Pair, lambda t: t.b, args), **tree_map_only(Pair, lambda t: t.b, kwargs)
        )
        if isinstance(a, torch.Tensor):
            return Pair(a, b)
        return a


@case
def user_wrapper():
    @torch.compile(backend="eager")
    def f(x):
        return x.sin() * 2

    f(Pair(torch.randn(3), torch.randn(3)))


for c in CASES:
    try:
        c()
    except Exception:
        print("CASE FAILED", c.__name__)
        traceback.print_exc()
