"""The least a Python reader of TORCH_TRACE does: records split, parsed and payloads checked.

    python benchmarks/floor_parse.py LOG [--processes 2]

Maps the log, splits it at record lines (a line break not followed by a TAB or a blank line),
parses each record line's JSON with orjson, and removes each payload's TABs and checks its md5
against `has_payload`: what tlview's reader must do before it indexes anything, with no index,
no damage handling and no output. compare.py times it beside the line-read floor, so a round's
table says how much of tlview's time is the format's own cost in Python and how much is tlview's.
With `--processes 2` the log is read in two halves at once, as tlview reads a log of 32 MB or more.
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import re
import sys

import orjson

_START = re.compile(rb"\n(?=[^\t\n\r])")


def read(path: str, start: int, end: int) -> tuple[int, int]:
    """The records in [start, end) of the file (start: a record line's first byte), and how
    many of their payloads do not match their md5."""
    records = bad = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        at = start
        for m in [*_START.finditer(mm, start, end), None]:
            stop = end if m is None else m.start()
            if m is None and stop > at and mm[stop - 1] == 10:
                stop -= 1  # the final line break ends the last line, not its payload
            nl = mm.find(b"\n", at, stop)
            head = mm[at:stop] if nl < 0 else mm[at:nl]
            j = head.find(b"] {")
            meta = orjson.loads(head[j + 2 :]) if j >= 0 else {}
            records += 1
            if nl >= 0:
                data = mm[nl + 1 : stop].replace(b"\t", b"")
                if hashlib.md5(data, usedforsecurity=False).hexdigest() != meta.get("has_payload"):
                    bad += 1
            if m is not None:
                at = m.end()
    return records, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--processes", type=int, choices=(1, 2), default=1)
    args = ap.parse_args()
    size = os.path.getsize(args.log)
    if args.processes == 1:
        records, bad = read(args.log, 0, size)
    else:
        with open(args.log, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            m = _START.search(mm, size // 2)
            cut = size if m is None else m.start()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, orjson.dumps(read(args.log, min(cut + 1, size), size)))
            os._exit(0)
        os.close(w)
        records, bad = read(args.log, 0, cut)
        with os.fdopen(r, "rb") as got:
            later = orjson.loads(got.read())
        os.waitpid(pid, 0)
        records, bad = records + later[0], bad + later[1]
    print(f"{records} records, {bad} payloads not matching their md5")


if __name__ == "__main__":
    sys.exit(main())
