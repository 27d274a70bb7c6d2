"""`tlview repro`: turn a logged graph and its rebuilt inputs into a script that runs it again.

tlview writes the script as text and never runs code from the log itself: the graph's code goes
into repro.py unchanged (after a check that it is the code of a graph module), every other string
from the log goes in as a Python literal, and only `--run` starts a Python process that runs it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import math
import operator
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tlview import __version__
from tlview.analyze.names import GRAPH_KIND, graphs, select
from tlview.errors import EXIT_REFUSED, TlviewError
from tlview.index.indexer import Keep
from tlview.model import Compile, Payload, Report
from tlview.replay import graphcode as gc
from tlview.replay.run import WARNING, run_scripts
from tlview.runtime import templates

SCRIPT = "repro.py"
INPUTS = "inputs.pt"
SUMMARY = "summary.json"
SUMMARY_FORMAT = "tlview.repro/1"
MAX_GRAPH_BYTES = 64 << 20  # graph code kept per graph
MAX_TOTAL_BYTES = 512 << 20  # graph code kept over a whole log
# Namespaces of torch.ops whose ops need the process group of a distributed job.
COLLECTIVES = frozenset({"_c10d_functional", "c10d_functional", "_c10d_functional_autograd"})
# Free names in compiled-autograd graphs: helpers that exist only inside the run that made them.
_AUTOGRAD_HELPERS = re.compile(r"torch__dynamo_(compiled_autograd|external_utils)_\w+")
_STD_NAME = re.compile(r"(?P<module>_operator|operator|math)_(?P<attr>\w+)")
_SIZE_SOURCE = re.compile(r"(?P<tensor>.+)\.(?P<kind>size|stride)\(\)\[(?P<dim>\d+)\]")
_OFFSET_SOURCE = re.compile(r"(?P<tensor>.+)\.(?P<method>storage_offset|item)\(\)")
_MODULE_ATTR = re.compile(r"\._(?:modules|parameters|buffers)\[(['\"])([^'\"\]]+)\1\]")
_GETATTR = re.compile(r"getattr\(\s*([^,]+?)\s*,\s*(['\"])([^'\"]+)\2\s*\)")
_WHOLE_LOOKUP = re.compile(r"[GL]\['?(.*?)'?\]")
_INDEX = re.compile(r"\[(\d+)\]")
_INT = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
# Names repro.py defines at its top level: the graph's class must not take one of them.
SCRIPT_NAMES = frozenset(
    {
        "argparse",
        "sys",
        "Path",
        "torch",
        "inf",
        "nan",
        "device",
        "fx_pytree",
        "pytree",
        "NoneType",
        "LOG",
        "COMPILE_ID",
        "LOG_TORCH_VERSION",
        "INPUTS",
        "BACKEND",
        "DYNAMIC",
        "NOTES",
        "BODIES",
        "body",
        "one_rank_group",
        "standin",
        "load_inputs",
        "build",
        "symbols",
        "arguments",
        "expected",
        "check",
        "run",
        "describe",
        "main",
        "operator",
        "_operator",
        "math",
    }
)

# What became of one graph: its repro ran (and matched), ran and differed, failed, was written
# (not run), cannot run here, or was not made; in the order the summary lists them.
OutcomeStatus = Literal["ran", "mismatch", "failed", "written", "blocked", "skipped"]
OUTCOMES: tuple[OutcomeStatus, ...] = get_args(OutcomeStatus)


@dataclass(slots=True)
class Arg:
    """One argument of the graph's forward: its placeholder and the code that gives its value."""

    name: str
    code: str


@dataclass(slots=True)
class Body:
    """A nested graph class (a higher-order op's body) and where build() puts it."""

    path: str  # "cond_true_0", "cond_true_0.inner"
    owner: str  # "GraphModule", "GraphModule.cond_true_0"
    name: str
    target: str  # "mod.cond_true_0", "mod.cond_true_0.body.inner"
    nargs: int
    nouts: int | None  # values it returns as a tuple (None: not a tuple)


@dataclass(slots=True)
class Plan:
    """Everything a repro of one graph needs, decided before anything is written."""

    ref: str  # the compile as the user names it (`0/1`, `LOG:0/1`)
    compile: Compile
    log_path: str
    torch_version: str | None
    graph: Payload | None
    code: gc.GraphCode | None = None
    fatal: str | None = None  # why no repro can be written
    blockers: list[str] = field(default_factory=list)  # why a written repro will not run here
    notes: list[str] = field(default_factory=list)  # what differs from the original run
    args: list[Arg] = field(default_factory=list)
    symbols: list[tuple[str, str]] = field(default_factory=list)  # symbol -> code
    attrs: list[tuple[str, str]] = field(default_factory=list)  # self attribute -> source
    bodies: list[Body] = field(default_factory=list)
    outputs: list[tuple[str, str, str]] = field(default_factory=list)  # name, dtype, shape code
    std: list[tuple[str, str, str]] = field(default_factory=list)  # name, module, attribute
    registers: list[str] = field(default_factory=list)  # torch modules that define its ops
    collectives: bool = False
    standins: bool = False  # some input is made in the script from the graph's annotation
    no_grad: bool = False  # run the graph with grad off
    dynamic: bool = False
    device: str | None = None  # --device
    rebuilt: Any = None  # rebuild.Rebuilt

    @property
    def reason(self) -> str | None:
        return self.fatal or (self.blockers[0] if self.blockers else None)


@dataclass(slots=True)
class Outcome:
    """What happened to one graph: written, run, or why not."""

    ref: str
    log: str
    compile_id: str
    dir: str | None  # the repro's directory, relative to the output directory
    status: OutcomeStatus
    reason: str | None = None
    outputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "compile": self.ref,
            "log": self.log,
            "compile_id": self.compile_id,
            "dir": self.dir,
            "status": self.status,
            "reason": self.reason,
            "outputs": self.outputs,
            "notes": self.notes,
        }


# -- reading the log --------------------------------------------------------------------------
def graph_keep(compile_key: str | None = None) -> Keep:
    """Keep the graph code of one compile (or of all), nothing else."""
    return Keep(
        payload_bytes=MAX_GRAPH_BYTES,
        total_bytes=MAX_TOTAL_BYTES,
        kinds=frozenset({GRAPH_KIND}),
        compile=compile_key,
    )


def graph_of(c: Compile) -> Payload | None:
    return next((g for g in c.graphs if g.kind == GRAPH_KIND), None)


# -- planning ---------------------------------------------------------------------------------
_AS_TENSOR = "___as_tensor("


def arg_name(source: str) -> str:
    """The forward argument dynamo names after a source (`L['x']` -> `L_x_`)."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", source)


def attribute_names(source: str) -> set[str]:
    """The attribute names dynamo gives a module's tensor it did not lift to an input: as its
    OutputGraph.module_key_name makes them (torch 2.9 and 2.13: a whole `L[...]` lookup loses
    its `L['` and `']`, `[0]` becomes `_0`, and a name not starting with a letter gets `sub`),
    and as older torch made them (every character not a letter or digit becomes `_`)."""
    name = _MODULE_ATTR.sub(r".\2", source)
    old = re.sub(r"[^a-zA-Z0-9]", "_", name)
    name = _GETATTR.sub(r"\1.\3", name)
    whole = _WHOLE_LOOKUP.fullmatch(name)
    name = re.sub(r"[^a-zA-Z0-9]", "_", _INDEX.sub(r"_\1", whole.group(1) if whole else name))
    return {old, name if name[:1].isalpha() else f"sub{name}"}


def plan(
    ref: str,
    c: Compile,
    report: Report,
    rebuild: Callable[[Compile], Any],
    device: str | None = None,
) -> Plan:
    """Check a graph, bind its inputs and work out its outputs; say why where something fails."""
    log = next((lg for lg in report.logs if lg.name == c.log), None)
    p = Plan(
        ref=ref,
        compile=c,
        log_path=log.path if log else c.log,
        torch_version=report.torch_version,
        graph=graph_of(c),
        device=device,
    )
    p.fatal = _read_graph(p)
    if p.fatal or p.code is None:
        return p
    code = p.code
    if code.name in SCRIPT_NAMES or not gc.is_identifier(code.name):
        p.fatal = f"the graph's class is named {code.name!r}, a name the script needs"
        return p
    _check_names(p, code)
    if p.fatal:
        return p
    _check_ops(p, code)
    if c.status == "failed":
        why = f": {c.fail_type}" if c.fail_type else ""
        p.notes.append(f"the original compile failed after capturing this graph{why}")
    try:
        p.rebuilt = rebuild(c)
    except TlviewError as e:
        p.fatal = f"inputs not rebuilt: {e.message}"
        return p
    _bind(p, code)
    if p.fatal:
        return p
    _bodies(p, code)
    _outputs(p, code)
    return p


def _read_graph(p: Plan) -> str | None:
    g = p.graph
    if g is None:
        return f"compile {p.compile.key} has no {GRAPH_KIND} record (status {p.compile.status})"
    if not g.ok:
        return f"the graph record at line {g.line} is damaged (its payload's md5 does not match)"
    if g.text is None:
        return f"the graph code at line {g.line} was not kept in memory (over {MAX_TOTAL_BYTES} bytes of graphs)"
    if g.cut:
        return (
            f"the graph code at line {g.line} is {g.bytes} bytes, over the {MAX_GRAPH_BYTES} kept"
        )
    try:
        p.code = gc.parse(g.text)
    except gc.GraphCodeError as e:
        return f"line {g.line}: {e}"
    return None


def _check_names(p: Plan, code: gc.GraphCode) -> None:
    """Free names: fx's names for operator and math functions, or things only the program had."""
    helpers = [n for n in code.free if _AUTOGRAD_HELPERS.fullmatch(n)]
    if helpers:
        p.fatal = (
            f"compiled-autograd internals: the graph calls {helpers[0]}"
            + (f" and {len(helpers) - 1} more" if len(helpers) > 1 else "")
            + ", which exist only inside the backward pass that made it"
        )
        return
    modules = {"_operator": operator, "operator": operator, "math": math}
    for name in code.free:
        m = _STD_NAME.fullmatch(name)
        if m and hasattr(modules[m.group("module")], m.group("attr")):
            p.std.append((name, m.group("module"), m.group("attr")))
        elif name.startswith(("torch__dynamo_", "torch__inductor_")):
            p.blockers.append(
                f"the graph calls {name}, a torch-internal helper fx could not name for import"
            )
        else:
            p.blockers.append(
                f"the graph calls {name}, which the program that wrote the log defined "
                "(the log has its name, not its code)"
            )


def _check_ops(p: Plan, code: gc.GraphCode) -> None:
    for op in code.ops:
        ns, name = op.split(".")[2:4]
        if ns in COLLECTIVES:
            p.collectives = True
            continue
        module = _registered_by(ns, name)
        if module is not None:  # whether or not this process imported it already
            if module not in p.registers:
                p.registers.append(module)
            continue
        if not _op_exists(ns, name):
            p.blockers.append(
                f"the graph calls the custom op {ns}::{name}, which the program registered at "
                "run time; import the library that defines it at the top of repro.py"
            )
    if p.collectives:
        p.notes.append(
            "the graph runs collectives of a distributed job: here they run on a process "
            "group of one rank, so values differ from the job's"
        )


def _torch() -> Any:
    """torch, imported when a repro is made (never for `tlview report`)."""
    from tlview.rebuild import need_torch

    return need_torch("tlview repro")


# torch's own modules that register ops of a namespace when imported, not with `import torch`
# (inductor's prims: fma, random, lookup_seed, ...): a graph that calls one needs its import.
_OP_MODULES = {"prims": "torch._inductor.inductor_prims"}


def _registered_by(ns: str, name: str) -> str | None:
    """The module of torch's own (`_OP_MODULES`) that defines the op, which a script calling
    it must import; None for other ops."""
    module = _OP_MODULES.get(ns)
    if module is None:
        return None
    try:
        defined = hasattr(importlib.import_module(module), name)
    except Exception:  # a torch without that module
        return None
    return module if defined else None


def _op_exists(ns: str, name: str) -> bool:
    """Whether this torch has the op (a lookup by name: nothing is imported or run)."""
    torch = _torch()
    try:
        getattr(getattr(torch.ops, ns), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _bind(p: Plan, code: gc.GraphCode) -> None:
    r = p.rebuilt
    by_name: dict[str, str] = {}
    for source in [*r.tensors, *r.failed]:
        by_name.setdefault(arg_name(source), source)
        if source.startswith(_AS_TENSOR) and source.endswith(")"):
            # A Python float that dynamo made a tensor: its placeholder is named after the float.
            by_name.setdefault(arg_name(source[len(_AS_TENSOR) : -1]), source)
    logged: dict[str, str] = {}
    known = _symbol_table(p, code, by_name, logged)
    subclasses = _subclasses(r)
    needed: list[str] = []
    for param in code.params:
        if param.sym is not None:
            expr = gc.dim_code(_int_or(param.sym), set(known))
            if expr is None:
                p.fatal = (
                    f"input {param.name} is the size {param.sym}, whose value the log does not give"
                )
                return
            needed += gc.symbols_in(param.sym)
            p.args.append(Arg(param.name, expr))
            continue
        source = by_name.get(param.name)
        if source is None and param.annotation == "list":
            items = _list_items(param.name, by_name)
            if items:  # a list input whose tensors were described one by one (compiled autograd)
                read = re.findall(rf"\b{re.escape(param.name.lower())}\[(\d+)\]", code.text)
                missing = sorted(
                    {int(k) for k in read if int(k) >= len(items) or not items[int(k)]}
                )
                if missing:
                    p.fatal = (
                        f"input {param.name} (list): the graph reads its items "
                        f"{', '.join(map(str, missing))}, which no describe_source names"
                    )
                    return
                if not all(_take(p, r, item) for item in items if item):
                    return
                p.args.append(Arg(param.name, "[" + ", ".join(map(_item, items)) + "]"))
                continue
        if source is None:
            standin = _standin(p, code, param, known)
            if standin is None:
                what = f" ({param.annotation})" if param.annotation else ""
                p.fatal = (
                    f"input {param.name}{what} has no tensor in the log: no describe_source "
                    "names it, and the graph does not say its size and dtype"
                )
                return
            code_text, used = standin
            needed += used
            p.args.append(Arg(param.name, code_text))
            p.standins = True
            continue
        if not _take(p, r, source):
            return
        p.args.append(Arg(param.name, _item(source)))
        # Older torch (2.6, 2.9) annotates a subclass input as a plain tensor: the log says.
        wrapper = (param.tensor.wrapper if param.tensor else None) or subclasses.get(source)
        got = type(r.tensors[source])
        if wrapper and not any(k.__name__ == wrapper for k in got.__mro__):
            p.blockers.append(
                f"input {source} is a {wrapper}, a tensor subclass tlview did not rebuild "
                f"(a plain {got.__name__} stands in, so the graph would not do what it did): "
                "build it at the top of repro.py"
            )
        if param.tensor is not None:
            _device_note(p, source, param.tensor.device)
    attr_sources = {a: s for s in r.tensors for a in attribute_names(s)}
    for attr in code.attrs:
        source = attr_sources.get(attr)
        if source is None:
            p.blockers.append(
                f"the graph reads self.{attr}, which is not in the log (a module attribute "
                "or submodule dynamo did not make an input)"
            )
            continue
        p.attrs.append((attr, source))
    for path in code.missing:
        p.blockers.append(f"the graph reads self.{path}, a nested graph the log does not print")
    for what in code.mutated:  # an input or a self.X read
        source = attr_sources.get(what[5:]) if what.startswith("self.") else by_name.get(what)
        t = r.tensors.get(source) if source is not None else None
        if t is not None and t.is_leaf and t.requires_grad:
            # Autograd refuses that with grad on, so the graph was traced with it off.
            p.no_grad = True
            p.notes.append(
                f"the graph changes {source} in place, a leaf that requires grad: torch ran it "
                "with grad off (an optimizer step does), and so does run()"
            )
            break
    _bound_lookups(p, code, by_name)
    p.dynamic = any(param.sym is not None for param in code.params)
    for name in code.outputs:
        tt = code.output_type(name)
        if tt is not None:
            for d in tt.size:
                needed += gc.symbols_in(d)
    p.symbols = [(s, known[s]) for s in dict.fromkeys(needed) if s in known]
    p.notes += [logged[s] for s, _ in p.symbols if s in logged]


_EMBEDDING = re.compile(r"torch\.nn\.functional\.embedding\((\w+), (\w+)[,)]")


def _bound_lookups(p: Plan, code: gc.GraphCode, by_name: dict[str, str]) -> None:
    """Random integers (0 to 7) index past a small embedding (BERT's two token types): wrap the
    values of an input the graph looks rows up with into the rows of the weight it indexes."""
    params = {q.name.lower(): q for q in code.params}
    for index, weight in _EMBEDDING.findall(code.text):
        q, w = params.get(index.lower()), params.get(weight.lower())
        if q is None or w is None or w.tensor is None or not w.tensor.size:
            continue
        rows = w.tensor.size[0]
        source = by_name.get(q.name)
        t = p.rebuilt.tensors.get(source) if source is not None else None
        if t is None or not isinstance(rows, int) or rows <= 0 or t.device.type == "meta":
            continue
        if t.is_floating_point() or t.is_complex() or t.numel() == 0 or int(t.max()) < rows:
            continue
        t.remainder_(rows)
        p.notes.append(
            f"{source} indexes an embedding of {rows} rows ({w.name}): its random values are "
            f"taken modulo {rows}"
        )


def _take(p: Plan, r: Any, source: str) -> bool:
    """Take a rebuilt input's notes into the plan; False, the plan made fatal, when it could not
    be rebuilt."""
    if source in r.failed:
        p.fatal = f"input {source} could not be rebuilt: {r.failed[source]}"
        return False
    p.notes.extend(f"{source}: {note}" for note in r.notes.get(source, []))
    return True


def _subclasses(r: Any) -> dict[str, str]:
    """Source -> class name, of each input the log describes as a tensor subclass."""
    return {
        name: str(t.type_name).rsplit(".", 1)[-1]
        for g in r.groups
        for name, tid, _ in g.sources
        if (t := g.tensors.get(tid)) is not None and t.subclass and t.type_name
    }


def _list_items(name: str, by_name: dict[str, str]) -> list[str]:
    """The sources of a list input's items, in order (`L['inputs'][0]`, ...), from the names
    dynamo gives them; "" for an item the log did not describe."""
    at = re.compile(re.escape(name) + r"(\d+)_")
    items: dict[int, str] = {}
    for key, source in by_name.items():
        m = at.fullmatch(key)
        if m is not None:
            items[int(m.group(1))] = source
    return [items.get(i, "") for i in range(max(items) + 1)] if items else []


def _item(source: str) -> str:
    return f"inputs[{source!r}]" if source else "None"


def _standin(
    p: Plan, code: gc.GraphCode, param: gc.Param, known: dict[str, str]
) -> tuple[str, list[str]] | None:
    """Code for a random tensor shaped as the graph says, for an input the log never described
    (logs of older torch have no describe records); None when the graph does not say enough."""
    from tlview.index.dims import fx_name

    tt = param.tensor
    sizes = (p.graph.meta or {}).get("sizes") if p.graph else None
    meta = sizes.get(fx_name(param.name)) if isinstance(sizes, dict) else None
    note = ""
    stride: list[gc.Dim] | None
    if tt is not None and tt.wrapper is None and tt.torch_dtype:
        size, stride, dtype, logged = tt.size, tt.stride, tt.torch_dtype, tt.device
    elif tt is None and param.annotation in (None, "torch.Tensor") and isinstance(meta, list):
        size = [_int_or(d) if isinstance(d, str) else d for d in meta]
        stride, dtype, logged = _contiguous(size), "float32", "cpu"
        note = "; the log does not give its dtype: float32 assumed"
    else:
        return None
    if stride is None or len(stride) != len(size):
        return None
    names = set(known)
    dims = [gc.dim_code(d, names) for d in size]
    steps = [gc.dim_code(d, names) for d in stride]
    if any(d is None for d in dims) or any(d is None for d in steps):
        return None
    device = _device_here(p, logged)
    shape = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
    strides = "(" + ", ".join(str(d) for d in steps) + ("," if len(steps) == 1 else "") + ")"
    p.notes.append(
        f"{param.name}: the log does not describe this input; a random tensor of the size "
        f"and stride the graph gives stands in{note}"
    )
    used = [s for d in [*size, *stride] for s in gc.symbols_in(d)]
    return f"standin({shape}, {strides}, torch.{dtype}, {device!r})", used


def _contiguous(size: list[gc.Dim]) -> list[gc.Dim] | None:
    if not all(isinstance(d, int) for d in size):
        return None
    out: list[gc.Dim] = []
    step = 1
    for d in reversed(size):
        out.append(step)
        step *= max(int(d), 1)
    return list(reversed(out))


def _device_here(p: Plan, logged: str) -> str:
    """The device for a stand-in: --device, else the logged one when this machine has it."""
    if p.device:
        return p.device
    here = logged or "cpu"
    if here.startswith("cuda") and not _torch().cuda.is_available():
        note = f"the log ran on {logged}; this machine has no CUDA, so inputs are on cpu"
        if note not in p.notes:
            p.notes.append(note)
        return "cpu"
    return here


def _int_or(text: str) -> gc.Dim:
    return int(text) if _INT.fullmatch(text.strip()) else text


def _device_note(p: Plan, source: str, logged: str) -> None:
    t = p.rebuilt.tensors.get(source)
    here = str(getattr(t, "device", "")) if t is not None else ""
    if logged and here and logged != here and not (logged == "cuda" and here.startswith("cuda")):
        note = f"the log ran on {logged}; the inputs are on {here} here"
        if note not in p.notes:
            p.notes.append(note)


def _symbol_table(
    p: Plan, code: gc.GraphCode, by_name: dict[str, str], logged: dict[str, str]
) -> dict[str, str]:
    """Code that gives each size symbol its value: from an input's size, or as logged (those go
    into LOGGED with the note to show if the graph uses them)."""
    tensors = p.rebuilt.tensors
    known: dict[str, str] = {}
    for param in code.params:
        source = by_name.get(param.name)
        if param.tensor is None or source not in tensors:
            continue
        for kind, dims in (("size", param.tensor.size), ("stride", param.tensor.stride)):
            for d, dim in enumerate(dims):
                if isinstance(dim, str) and gc.is_symbol(dim) and dim not in known:
                    known[dim] = f"inputs[{source!r}].{kind}({d})"
    for s in p.compile.symbols:
        if s.kind != "created" or s.symbol in known or not gc.is_symbol(s.symbol):
            continue
        src = s.source or ""
        m = _SIZE_SOURCE.fullmatch(src)
        o = _OFFSET_SOURCE.fullmatch(src)
        if m and m.group("tensor") in tensors:
            known[s.symbol] = f"inputs[{m.group('tensor')!r}].{m.group('kind')}({m.group('dim')})"
        elif o and o.group("tensor") in tensors:
            known[s.symbol] = f"inputs[{o.group('tensor')!r}].{o.group('method')}()"
        elif s.value is not None and _NUMBER.fullmatch(s.value) and not src.startswith("<"):
            known[s.symbol] = repr(int(s.value) if _INT.fullmatch(s.value) else float(s.value))
            logged[s.symbol] = f"{s.symbol} = {s.value}, the value the log recorded for {src}"
    return known


def _bodies(p: Plan, code: gc.GraphCode) -> None:
    for path, nargs in code.bodies.items():
        parts = path.split(".")
        owner = ".".join([code.name, *parts[:-1]])
        target = "mod." + ".body.".join(parts)
        nouts = code.body_outputs.get(path)
        p.bodies.append(Body(path, owner, parts[-1], target, nargs, nouts))


def _outputs(p: Plan, code: gc.GraphCode) -> None:
    known = {s for s, _ in p.symbols}
    sizes = (p.graph.meta or {}).get("sizes") if p.graph else None
    sizes = sizes if isinstance(sizes, dict) else {}
    for i, name in enumerate(code.outputs):
        label = name or f"output {i}"
        ann = code.annotations.get(name) if name else None
        tt = gc.tensor_type(ann)
        dims: list[gc.Dim] | None = None
        dtype = "None"
        if tt is not None:
            dims = tt.size
            if tt.torch_dtype:
                dtype = f"torch.{tt.torch_dtype}"
        elif name and ann is None and isinstance(sizes.get(name), list):
            dims = [_int_or(d) if isinstance(d, str) else d for d in sizes[name]]
        if dims is None or not all(isinstance(d, int | str) for d in dims):
            p.outputs.append((label, dtype, "None"))
            continue
        parts = [gc.dim_code(d, known) or "None" for d in dims]
        shape = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        p.outputs.append((label, dtype, shape))


# -- writing ----------------------------------------------------------------------------------
def script_text(
    p: Plan, backend: str | None, literal: Callable[[Any], str] = repr, mode: str = "random"
) -> str:
    """The text of repro.py. `literal` writes every string from the log (repr: a Python literal)."""
    assert p.code is not None and p.graph is not None and p.graph.text is not None
    env = templates.environment().overlay()
    env.filters["py"] = literal
    text = p.graph.text if p.graph.text.endswith("\n") else p.graph.text + "\n"
    script = env.get_template("repro.py.j2").render(
        log_name=p.compile.log,
        log_path=p.log_path,
        compile_id=p.compile.key,
        graph_line=int(p.graph.line),
        torch_version=p.torch_version,
        tlview_version=__version__,
        values="zero" if mode == "zeros" else "random",
        class_name=p.code.name,
        graph_code=text,
        backend=backend,
        dynamic=True if p.dynamic else None,
        notes=[*p.blockers, *p.notes],
        std_modules=sorted({m for _, m, _ in p.std}),
        registers=p.registers,
        std_names=p.std,
        bodies=p.bodies,
        collectives=p.collectives,
        no_grad=p.no_grad,
        standins=p.standins,
        attrs=p.attrs,
        symbols=p.symbols,
        args=p.args,
        outputs=p.outputs,
    )
    return script + "\n"  # the one environment drops a template's last newline


def verify(p: Plan, script: str, backend: str | None, mode: str = "random") -> None:
    """Check that strings from the log stayed strings: the script must parse to the same tree
    as one written with every string replaced by a harmless one."""
    try:
        got = _shape(ast.parse(script))
        ref = _shape(ast.parse(script_text(p, backend, literal=_blank, mode=mode)))
    except SyntaxError as e:
        raise TlviewError(
            f"internal error: repro.py for {p.ref} does not parse ({e.msg})", 70
        ) from None
    if got != ref:
        raise TlviewError(
            f"internal error: a string from the log changed the code of repro.py for {p.ref}", 70
        )


def _blank(v: Any) -> str:
    return repr("x") if isinstance(v, str) else repr(v)


def _shape(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree, include_attributes=False)


def write_files(p: Plan, out: Path, backend: str | None, force: bool, mode: str = "random") -> None:
    """Write repro.py and inputs.pt into OUT (created if missing)."""
    from tlview.runtime.output import output as open_output
    from tlview.tensors import emit

    script = script_text(p, backend, mode=mode)
    verify(p, script, backend, mode)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TlviewError(
            f"{out}: cannot create the directory: {e.strerror or e}", EXIT_REFUSED
        ) from None
    if out.exists() and not out.is_dir():
        raise TlviewError(f"{out}: not a directory", EXIT_REFUSED)
    obj = emit.saved([(p.compile.key, p.rebuilt)], p.torch_version)
    with open_output(str(out / INPUTS), force) as f:
        emit.save(obj, f)
    with open_output(str(out / SCRIPT), force) as f:
        f.write(script.encode("utf-8"))


def slug(ref: str) -> str:
    """A directory name for a compile: `0/1_2` -> `0-1_2`, `!0/1/0` -> `ca0-1-0`, `0/1@2`
    (its process's second run) -> `0-1-run2`."""
    text = ref.replace("#", "-g").replace("!", "ca").replace("/", "-").replace(":", "--")
    text = text.replace("@", "-run")
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".") or "graph"


# -- the command ------------------------------------------------------------------------------
@dataclass(slots=True)
class ReproOptions:
    backend: str | None = None
    device: str | None = None
    mode: str = "random"  # values of the rebuilt inputs: random or zeros
    seed: int = 0
    run: bool = False
    force: bool = False
    warn: bool = True  # say before running that the repros run code from the log


def rebuilder(opts: ReproOptions) -> Callable[[Compile], Any]:
    from tlview.rebuild import real_inputs

    return lambda c: real_inputs(c, mode=opts.mode, seed=opts.seed, device=opts.device)


def make_one(report: Report, compile_id: str, out: Path | None, opts: ReproOptions) -> Outcome:
    """The repro of one compile: written to OUT, and run with --run."""
    ref, c, moved = select(report, compile_id)
    p = plan(ref, c, report, rebuilder(opts), opts.device)
    if moved:
        p.notes.insert(0, moved)
    outcome = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
    if p.fatal:
        return outcome
    with _directory(out) as d:
        write_files(p, d, opts.backend, opts.force, opts.mode)
        outcome.dir = str(d)
        outcome.status = "blocked" if p.blockers else "written"
        if opts.run and not p.blockers:
            if opts.warn:
                print(WARNING.format(script=d / SCRIPT), file=sys.stderr, flush=True)
            res = run_scripts([d], echo=True).get(d, {})
            _apply(outcome, res)
    return outcome


@contextlib.contextmanager
def _directory(out: Path | None) -> Iterator[Path]:
    if out is not None:
        yield out
        return
    tmp = Path(tempfile.mkdtemp(prefix="tlview-repro-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_all(report: Report, out: Path, opts: ReproOptions) -> list[Outcome]:
    """One repro per graph in the report, under OUT/<compile>/, and OUT/summary.json."""
    outcomes: list[Outcome] = []
    made: list[tuple[Outcome, Path]] = []
    rebuild = rebuilder(opts)
    for ref, c in graphs(report):
        try:
            p = plan(ref, c, report, rebuild, opts.device)
        except TlviewError:
            raise
        except Exception as e:  # a bug for one graph must not lose the others' repros
            reason = f"internal error in tlview: {type(e).__name__}: {e}"[:300]
            outcomes.append(Outcome(ref, c.log, c.key, None, "skipped", reason))
            continue
        o = Outcome(ref, c.log, c.key, None, "skipped", p.reason, notes=list(p.notes))
        outcomes.append(o)
        if p.fatal:
            continue
        d = out / slug(ref)
        write_files(p, d, opts.backend, opts.force, opts.mode)
        o.dir = d.name
        o.status = "blocked" if p.blockers else "written"
        if not p.blockers:
            made.append((o, d))
        p.rebuilt = None  # free the tensors before the next graph
    if opts.run and made:
        if opts.warn:
            print(WARNING.format(script=out / "*" / SCRIPT), file=sys.stderr, flush=True)
        results = run_scripts([d for _, d in made])
        for o, d in made:
            _apply(o, results.get(d, {}))
    write_summary(report, out, outcomes, opts)
    return outcomes


def _apply(o: Outcome, res: dict[str, Any]) -> None:
    status = res.get("status")
    o.status = status if status in ("ran", "mismatch", "failed") else "failed"
    o.reason = res.get("reason") if o.status != "ran" else None
    if o.status == "failed" and not o.reason:
        o.reason = "the repro did not report a result"
    outs = res.get("outputs")
    o.outputs = [str(x) for x in outs] if isinstance(outs, list) else []


def write_summary(
    report: Report, out: Path, outcomes: Iterable[Outcome], opts: ReproOptions
) -> None:
    from tlview.runtime.output import output as open_output

    items = list(outcomes)
    counts = {s: sum(o.status == s for o in items) for s in OUTCOMES}
    obj = {
        "format": SUMMARY_FORMAT,
        "written_by": f"tlview {__version__}",
        "path": report.path,
        "torch_version": report.torch_version,
        "backend": opts.backend,
        "ran": opts.run,
        "counts": {k: v for k, v in counts.items() if v},
        "graphs": [o.as_json() for o in items],
    }
    out.mkdir(parents=True, exist_ok=True)
    with open_output(str(out / SUMMARY), opts.force) as f:
        f.write(json.dumps(obj, indent=1).encode("utf-8") + b"\n")


def summary_lines(outcomes: list[Outcome], ran: bool) -> list[str]:
    """The summary a person reads: one line per graph, then the counts."""
    width = max((len(o.ref) for o in outcomes), default=7)
    lines = []
    for o in outcomes:
        line = f"{o.ref:<{width}}  {o.status:<8}  {o.reason or ''}"
        lines.append(line.rstrip())
    counts = {s: sum(o.status == s for o in outcomes) for s in OUTCOMES}
    total = len(outcomes)
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    head = f"{total} graph(s): " + ", ".join(parts) if total else "no graphs in the log"
    if ran and total:
        head += f"; {counts['ran']}/{total} ran and match the logged shapes"
    lines.append(head)
    return lines
