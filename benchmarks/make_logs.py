"""Make benchmark logs of the sizes users have, from real ones, into benchmarks/data/.

Three shapes: `deep_inductor` (a deep model under inductor, forward and backward: large output
code), `small_records` (the corpus's aot_eager MLP: many small records) and `dynamic_params` (a
transformer compiled with dynamic=True, its parameters graph inputs: a real model's dynamic-shape
log). A size below what the real model's log has is made by running torch on the same model
with fewer layers (once, kept in DATA as `<shape>_L<layers>.log`); a larger one repeats the
full model's log with frame and describer ids shifted: each copy's `frame_id`, `describer_id` and
metrics `compile_id` are moved past the previous copy's, so every compile id stays unique, and
payloads are copied byte for byte, so every `has_payload` md5 stays valid. The output is a log
torch could have written for a longer run.

    python benchmarks/make_logs.py                    # every shape at 1, 10, 30 and 200 MB
    python benchmarks/make_logs.py --sizes 1 30       # just these sizes
    python benchmarks/make_logs.py --sizes 1000       # the 1 GB ones (3 GB of disk)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
CORPUS = Path(os.environ.get("TLVIEW_CORPUS", HERE.parent.parent / "shared" / "corpus"))

_FRAME = re.compile(rb'"frame_id": (\d+)')
_DESCRIBER = re.compile(rb'"describer_id": (\d+)')
_METRICS_ID = re.compile(rb'"compile_id": "(\d+)/')

# A deep model compiled by inductor, forward and backward: large payloads, hundreds of inputs.
DEEP = r"""
import torch
from torch import nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
model = nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False)
opt = torch.optim.AdamW(model.parameters())
cm = torch.compile(model)
for _ in range(2):
    x = torch.randn(4, 16, 64)
    cm(x).sum().backward()
    opt.step()
    opt.zero_grad()
"""

# A transformer whose parameters are its graph's inputs, with dynamic batch and sequence sizes
# (a symbol and a placeholder annotation per dynamic input) and a recompile: the log users have
# of a real model, hundreds of inputs per compile (issue 33's quadratic path was per input).
DYNAMIC = r"""
import torch
from torch import nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
model = nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False)
cm = torch.compile(model, dynamic=True)
for b, t in ((4, 16), (6, 24), (2, 9)):
    cm(torch.randn(b, t, 64)).sum().backward()
"""


def shift(line: bytes, frames: int, describers: int) -> bytes:
    """A record line with its ids moved past the earlier copies."""
    if frames:
        line = _FRAME.sub(lambda m: b'"frame_id": %d' % (int(m.group(1)) + frames), line)
        line = _METRICS_ID.sub(lambda m: b'"compile_id": "%d/' % (int(m.group(1)) + frames), line)
    if describers and b'"describer_id"' in line:
        line = _DESCRIBER.sub(
            lambda m: b'"describer_id": %d' % (int(m.group(1)) + describers), line
        )
    return line


def span(data: bytes, pattern: re.Pattern[bytes]) -> int:
    values = [int(m.group(1)) for m in pattern.finditer(data)]
    return max(values) + 1 if values else 0


def repeat(src: Path, dest: Path, target_mb: int) -> None:
    data = src.read_bytes()
    lines = data.splitlines(keepends=True)
    frames, describers = span(data, _FRAME), span(data, _DESCRIBER)
    target = target_mb << 20
    written = copy = 0
    tmp = dest.with_suffix(".tmp")
    with tmp.open("wb") as out:
        while written < target:
            for line in lines:
                if written >= target and b'] {"dynamo_start": ' in line[:200]:
                    break  # the size asked for, cut where a frame starts: whole compiles
                if not line.startswith(b"\t"):
                    line = shift(line, copy * frames, copy * describers)
                out.write(line)
                written += len(line)
            copy += 1
    tmp.replace(dest)
    print(f"{dest.name}: {copy} copies of {src.name}, {written / 2**20:.0f} MB")


# shape -> (program, layers of the full model): a smaller log is the same model, fewer layers.
MODELS = {"deep_inductor": (DEEP, 64), "dynamic_params": (DYNAMIC, 48)}
SHAPES = ("deep_inductor", "small_records", "dynamic_params")
SIZES = (1, 10, 30, 200)


def deep_log() -> Path:
    """The log of the deep inductor model, made once by running torch."""
    return model_log("deep_inductor", MODELS["deep_inductor"][1])


def dynamic_log() -> Path:
    """The log of the dynamic transformer, made once by running torch."""
    return model_log("dynamic_params", MODELS["dynamic_params"][1])


def model_log(shape: str, layers: int) -> Path:
    """The log of SHAPE's model with LAYERS layers, made once by running torch."""
    program, full = MODELS[shape]
    name = f"{shape}.log" if layers == full else f"{shape}_L{layers}.log"
    return torch_log(name, program.replace("LAYERS", str(layers)))


def torch_log(name: str, program: str) -> Path:
    """The log torch writes running PROGRAM, kept in DATA once made."""
    dest = DATA / name
    if dest.exists():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "program.py"
        script.write_text(program)
        env = dict(os.environ, TORCH_TRACE=str(Path(tmp) / "trace"))
        subprocess.run([sys.executable, str(script)], env=env, check=True, cwd=tmp)
        (log,) = (Path(tmp) / "trace").glob("*.log")
        DATA.mkdir(parents=True, exist_ok=True)
        log.replace(dest)
    print(f"{dest.name}: {dest.stat().st_size / 2**20:.1f} MB from torch")
    return dest


def small_records_log() -> Path:
    """Many small records: aot_eager with graph breaks, restarts and recompiles (0.5 MB)."""
    return next((CORPUS / "mlp_aot_eager").glob("*.log"))


def make(shape: str, mb: int) -> Path:
    """SHAPE's log of about MB megabytes (MiB), in DATA: `<shape>_<mb>mb.log`."""
    dest = DATA / f"{shape}_{mb}mb.log"
    if dest.exists():
        return dest
    if shape == "small_records":
        repeat(small_records_log(), dest, mb)
        return dest
    full = model_log(shape, MODELS[shape][1])
    size = full.stat().st_size / 2**20
    if mb >= 2 * size:
        repeat(full, dest, mb)
        return dest
    # More or fewer layers: the log grows about linearly with them (a layer's graphs, code,
    # inputs), and a model's log is one or two frames, which repeating cannot cut.
    layers = max(1, round(MODELS[shape][1] * mb / size))
    small = model_log(shape, layers)
    if small.stat().st_size < (mb << 20) * 0.8:
        repeat(small, dest, mb)
    else:
        _link(small, dest)
    return dest


def _link(src: Path, dest: Path) -> None:
    """DEST is SRC itself (a log of about the size asked for, as torch wrote it)."""
    os.link(src, dest)
    print(f"{dest.name}: {src.name}, {dest.stat().st_size / 2**20:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="sizes in MB")
    ap.add_argument("--kinds", nargs="+", default=list(SHAPES), choices=SHAPES)
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    for kind in args.kinds:
        for mb in args.sizes:
            make(kind, mb)


if __name__ == "__main__":
    main()
