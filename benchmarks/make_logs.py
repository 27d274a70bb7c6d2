"""Make large benchmark logs from real ones: repeat a log with frame and describer ids shifted.

Each copy's `frame_id`, `describer_id` and metrics `compile_id` are moved past the previous
copy's, so every compile id stays unique, and payloads are copied byte for byte, so every
`has_payload` md5 stays valid. The output is a log torch could have written for a longer run.

    python benchmarks/make_logs.py                 # all kinds and sizes into benchmarks/data/
    python benchmarks/make_logs.py --sizes 50      # just the 50 MB ones
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
model = nn.TransformerEncoder(layer, num_layers=64, enable_nested_tensor=False)
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
model = nn.TransformerEncoder(layer, num_layers=48, enable_nested_tensor=False)
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
                if not line.startswith(b"\t"):
                    line = shift(line, copy * frames, copy * describers)
                out.write(line)
                written += len(line)
            copy += 1
    tmp.replace(dest)
    print(f"{dest.name}: {copy} copies of {src.name}, {written / 2**20:.0f} MB")


def deep_log() -> Path:
    """The log of the deep inductor model, made once by running torch."""
    return torch_log("deep_inductor.log", DEEP)


def dynamic_log() -> Path:
    """The log of the dynamic transformer, made once by running torch."""
    return torch_log("dynamic_params.log", DYNAMIC)


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


def sources() -> dict[str, Path]:
    return {
        # Many small records: aot_eager with graph breaks, restarts and recompiles.
        "small_records": next((CORPUS / "mlp_aot_eager").glob("*.log")),
        # Large payloads and many inputs: inductor on a deep model.
        "deep_inductor": deep_log(),
        # Hundreds of inputs per compile, each dynamic input with a symbol: a real model's log.
        "dynamic_params": dynamic_log(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500], help="sizes in MB")
    ap.add_argument(
        "--kinds", nargs="+", default=["small_records", "deep_inductor", "dynamic_params"]
    )
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    src = sources()
    for kind in args.kinds:
        for mb in args.sizes:
            dest = DATA / f"{kind}_{mb}mb.log"
            if not dest.exists():
                repeat(src[kind], dest, mb)


if __name__ == "__main__":
    main()
