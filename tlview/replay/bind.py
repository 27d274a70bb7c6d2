"""Binding a graph's placeholders to its rebuilt inputs: the code that gives each argument,
size symbol and stand-in its value, and the shapes its outputs should have."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tlview.index.dims import arg_name
from tlview.model import Dim, Symbol
from tlview.replay import domains, values
from tlview.replay import graphcode as gc
from tlview.replay.planned import Arg, Plan
from tlview.units import number

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

    from torch import Tensor

    from tlview.tensors.rebuilt import Rebuilt

_SIZE_SOURCE = re.compile(r"(?P<tensor>.+)\.(?P<kind>size|stride)\(\)\[(?P<dim>\d+)\]", re.A)
_OFFSET_SOURCE = re.compile(r"(?P<tensor>.+)\.(?P<method>storage_offset|item)\(\)")
_MODULE_ATTR = re.compile(r"\._(?:modules|parameters|buffers)\[(['\"])([^'\"\]]+)\1\]")
_GETATTR = re.compile(r"getattr\(\s*([^,]+?)\s*,\s*(['\"])([^'\"]+)\2\s*\)")
_WHOLE_LOOKUP = re.compile(r"[GL]\['?(.*?)'?\]")
_INDEX = re.compile(r"\[(\d+)\]")
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
_AS_TENSOR = "___as_tensor("


def lazy_torch() -> ModuleType:
    """torch, imported when a repro is made (never for `tlview report`)."""
    from tlview.tensors.dtypes import need_torch

    return need_torch("tlview repro")


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


@dataclass(slots=True)
class _Binding:
    """What binding one graph's placeholders reads and gathers as it goes."""

    p: Plan
    code: gc.GraphCode
    r: Rebuilt  # the rebuilt inputs
    by_name: dict[str, str]  # placeholder name -> source
    known: dict[str, str]  # size symbol -> code that gives its value
    subclasses: dict[str, str]  # source -> tensor subclass the log describes it as
    grads: dict[str, str]  # placeholder name -> the source whose rebuilt .grad it is
    needed: list[str] = field(default_factory=list)  # size symbols the script must give


def placeholders(p: Plan, code: gc.GraphCode) -> None:
    """Bind each placeholder to the code that gives its value: a rebuilt input, a size or a
    stand-in; and the size symbols and module attributes the graph reads."""
    r = p.rebuilt
    by_name = _by_name(r)
    logged: dict[str, str] = {}
    known = _symbol_table(p, code, by_name, logged)
    b = _Binding(p, code, r, by_name, known, _subclasses(r), _grads(r, by_name))
    if not all(_bind(b, param) for param in code.params):
        return  # the plan is fatal: it says why
    attr_sources = _attributes(p, code, r)
    _no_grad(p, code, r, by_name, attr_sources)
    labels = {**{n: f"{s}.grad" for n, s in b.grads.items()}, **by_name}
    p.changed = _changed(p, code, labels, attr_sources)
    p.items = values.items(p, code)
    p.nouts = code.returns
    try:
        domains.apply(p, code, by_name, p.mode)
    except Exception as e:  # a bug here must not cost the repro: its inputs stay random
        p.notes.append(f"integer inputs' domains not found (a bug in tlview: {type(e).__name__})")
    p.dynamic = any(param.sym is not None for param in code.params)
    b.needed += _output_symbols(code)
    p.symbols = [(s, known[s]) for s in dict.fromkeys(b.needed) if s in known]
    p.notes += [logged[s] for s, _ in p.symbols if s in logged]
    p.notes = _merged(p.notes, set(r.tensors))


def _by_name(r: Rebuilt) -> dict[str, str]:
    """Placeholder name -> the source of the rebuilt input it is named after."""
    by_name: dict[str, str] = {}
    for source in [*r.tensors, *r.failed]:
        by_name.setdefault(arg_name(source), source)
        if source.startswith(_AS_TENSOR) and source.endswith(")"):
            # A Python float that dynamo made a tensor: its placeholder is named after the float.
            by_name.setdefault(arg_name(source[len(_AS_TENSOR) : -1]), source)
    return by_name


# Each binder takes a placeholder it knows how to bind and says True, or says False having made
# the plan fatal, or None: not its kind. The first that is not None decides.


def _bind_size(b: _Binding, param: gc.Param) -> bool | None:
    """A `Sym(...)` placeholder: the code of its size expression."""
    if param.sym is None:
        return None
    expr = gc.dim_code(_int_or(param.sym), set(b.known))
    if expr is None:
        b.p.fatal = f"input {param.name} is the size {param.sym}, whose value the log does not give"
        return False
    b.needed += gc.symbols_in(param.sym)
    b.p.args.append(Arg(param.name, expr))
    return True


def _bind_list(b: _Binding, param: gc.Param) -> bool | None:
    """A list input whose tensors were described one by one (compiled autograd)."""
    if param.name in b.by_name or param.annotation != "list":
        return None
    items = _list_items(param.name, b.by_name)
    if not items:
        return None
    p = b.p
    missing = _unnamed_items(b.code, param.name, items)
    if missing:
        p.fatal = (
            f"input {param.name} (list): the graph reads its items "
            f"{', '.join(map(str, missing))}, which no describe_source names"
        )
        return False
    if not all(_take(p, b.r, item) for item in items if item):
        return False
    p.args.append(Arg(param.name, "[" + ", ".join(map(_item, items)) + "]"))
    return True


def _unnamed_items(code: gc.GraphCode, name: str, items: list[str]) -> list[int]:
    """The items of a list input the graph reads that no describe_source names."""
    read = re.findall(rf"\b{re.escape(name.lower())}\[(\d+)\]", code.text)
    return sorted({int(k) for k in read if int(k) >= len(items) or not items[int(k)]})


def _bind_mesh(b: _Binding, param: gc.Param) -> bool | None:
    """A DTensor graph's DeviceMesh input: the mesh its inputs are on."""
    if param.name in b.by_name or param.annotation not in _MESH_TYPES:
        return None
    mesh = _mesh_of(b.r)
    if mesh is None:
        return None
    b.p.args.append(Arg(param.name, f"inputs[{mesh!r}].device_mesh"))
    return True


def _bind_grad(b: _Binding, param: gc.Param) -> bool | None:
    """A parameter's gradient (a compiled optimizer step takes `L['p'].grad`, which the log
    describes as the parameter's grad, not as a source): the rebuilt parameter's `.grad`."""
    source = b.grads.get(param.name)
    if param.name in b.by_name or source is None:
        return None
    if not _take(b.p, b.r, source):
        return False
    b.p.args.append(Arg(param.name, f"{_item(source)}.grad"))
    return True


def _grads(r: Rebuilt, by_name: dict[str, str]) -> dict[str, str]:
    """Placeholder name -> source, of each rebuilt input's `.grad` as dynamo names it."""
    out: dict[str, str] = {}
    for source, t in r.tensors.items():
        name = arg_name(f"{source}.grad")
        # A view's .grad is None, and asking for it makes torch print a UserWarning.
        leaf = getattr(t, "is_leaf", True)
        if name not in by_name and leaf and getattr(t, "grad", None) is not None:
            out.setdefault(name, source)
    return out


def _bind_standin(b: _Binding, param: gc.Param) -> bool | None:
    """An input the log never described: a random tensor as the graph's annotation has it."""
    if param.name in b.by_name:
        return None
    standin = _standin(b.p, b.code, param, b.known)
    if standin is None:
        what = f" ({param.annotation})" if param.annotation else ""
        b.p.fatal = (
            f"input {param.name}{what} has no tensor in the log: no describe_source "
            "names it, and the graph does not say its size and dtype"
        )
        return False
    code_text, used = standin
    b.needed += used
    b.p.args.append(Arg(param.name, code_text))
    b.p.standins = True
    return True


def _bind_input(b: _Binding, param: gc.Param) -> bool | None:
    """A rebuilt input, with a blocker when it is a subclass tlview did not rebuild."""
    p, r = b.p, b.r
    source = b.by_name[param.name]
    if not _take(p, r, source):
        return False
    p.args.append(Arg(param.name, _item(source)))
    # Older torch (2.6, 2.9) annotates a subclass input as a plain tensor: the log says.
    wrapper = (param.tensor.wrapper if param.tensor else None) or b.subclasses.get(source)
    got = type(r.tensors[source])
    if wrapper and not any(k.__name__ == wrapper for k in got.__mro__):
        p.blockers.append(
            f"input {source} is a {wrapper}, a tensor subclass tlview did not rebuild "
            f"(a plain {got.__name__} stands in, so the graph would not do what it did): "
            "pass --allow-import with the package that defines it, or build it at the top "
            "of repro.py"
        )
    if param.tensor is not None:
        _device_note(p, source, param.tensor.device)
    return True


_BINDERS = (_bind_size, _bind_list, _bind_mesh, _bind_grad, _bind_standin, _bind_input)


def _bind(b: _Binding, param: gc.Param) -> bool:
    """Bind one placeholder with the first binder of its kind; False: the plan is fatal."""
    for binder in _BINDERS:
        got = binder(b, param)
        if got is not None:
            return got
    return False  # never: _bind_input takes every placeholder left


def _output_symbols(code: gc.GraphCode) -> list[str]:
    """The size symbols the outputs' annotations use."""
    out: list[str] = []
    for name in code.outputs:
        tt = code.output_type(name)
        for d in tt.size if tt is not None else ():
            out += gc.symbols_in(d)
    return out


def _attributes(p: Plan, code: gc.GraphCode, r: Rebuilt) -> dict[str, str]:
    """Bind the module attributes the graph reads to their sources (blockers for the others):
    attribute name -> source, of every rebuilt input."""
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
    return attr_sources


def _no_grad(
    p: Plan, code: gc.GraphCode, r: Rebuilt, by_name: dict[str, str], attr_sources: dict[str, str]
) -> None:
    """Run with grad off when the graph changes leaves that require grad in place (autograd
    refuses that with grad on, so the graph was traced with it off)."""
    leaves = _grad_leaves(code, r, by_name, attr_sources)
    if not leaves:
        return
    p.no_grad = True
    which = (
        f"{leaves[0]} in place, a leaf"
        if len(leaves) == 1
        else f"{', '.join(leaves[:-1])} and {leaves[-1]} in place, leaves"
    )
    p.notes.append(
        f"the graph changes {which} that require{'s' if len(leaves) == 1 else ''} grad: "
        "torch ran it with grad off (an optimizer step does), and so does run()"
    )


def _changed(
    p: Plan, code: gc.GraphCode, labels: dict[str, str], attr_sources: dict[str, str]
) -> list[tuple[str, str]]:
    """The inputs the graph changes in place, each with the code of its value after a run:
    a placeholder's argument (named by LABELS, its source), or the module attribute's input."""
    index = {a.name: i for i, a in enumerate(p.args)}
    out: list[tuple[str, str]] = []
    for what in code.mutated:
        if what.startswith("self."):
            source = attr_sources.get(what[5:])
            if source is not None and source in p.rebuilt.tensors:
                out.append((source, _item(source)))
        elif what in index:
            out.append((labels.get(what, what), f"args[{index[what]}]"))
    return out


def _grad_leaves(
    code: gc.GraphCode, r: Rebuilt, by_name: dict[str, str], attr_sources: dict[str, str]
) -> list[str]:
    """The sources of the leaves that require grad which the graph changes in place."""
    leaves: list[str] = []
    for what in code.mutated:  # an input or a self.X read
        source = attr_sources.get(what[5:]) if what.startswith("self.") else by_name.get(what)
        t = r.tensors.get(source) if source is not None else None
        if source is not None and t is not None and t.is_leaf and t.requires_grad:
            leaves.append(source)
    return leaves


def _merged(notes: list[str], sources: set[str]) -> list[str]:
    """One note for what several inputs share (the fake process group all DTensors are on):
    `A and 3 more inputs: text`, where it was said of A, B, C and D."""
    by_text: dict[str, list[str]] = {}
    for n in notes:
        source, sep, text = n.partition(": ")
        if sep and source in sources and source not in by_text.get(text, ()):
            by_text.setdefault(text, []).append(source)
    out: list[str] = []
    done: set[str] = set()
    for n in notes:
        source, sep, text = n.partition(": ")
        who = by_text.get(text) if sep and source in sources else None
        if who is None or len(who) == 1:
            out.append(n)
        elif text not in done:
            done.add(text)
            more = len(who) - 1
            out.append(f"{who[0]} and {more} more input{'s' if more > 1 else ''}: {text}")
    return out


_MESH_TYPES = frozenset({"torch.distributed.device_mesh.DeviceMesh", "DeviceMesh"})


def _mesh_of(r: Rebuilt) -> str | None:
    """A rebuilt input that is a DTensor, whose mesh a DeviceMesh placeholder takes (all of a
    compile's DTensors are rebuilt on one mesh per shape)."""
    for source, t in r.tensors.items():
        if getattr(t, "device_mesh", None) is not None and hasattr(t, "placements"):
            return str(source)
    return None


def _take(p: Plan, r: Rebuilt, source: str) -> bool:
    """Take a rebuilt input's notes into the plan; False, the plan made fatal, when it could not
    be rebuilt."""
    if source in r.failed:
        p.fatal = f"input {source} could not be rebuilt: {r.failed[source]}"
        return False
    p.notes.extend(f"{source}: {note}" for note in r.notes.get(source, []))
    return True


def _subclasses(r: Rebuilt) -> dict[str, str]:
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
            k = number(m.group(1))
            if k is not None:
                items[k] = source
    if not items or max(items) >= 2 * len(items) + 64:  # a log's `L['inputs'][10**12]`
        return []  # is no list the graph was given: not read as one
    return [items.get(i, "") for i in range(max(items) + 1)]


def _item(source: str) -> str:
    return f"inputs[{source!r}]" if source else "None"


def _standin(
    p: Plan, code: gc.GraphCode, param: gc.Param, known: dict[str, str]
) -> tuple[str, list[str]] | None:
    """Code for a random tensor shaped as the graph says, for an input the log never described
    (logs of older torch have no describe records); None when the graph does not say enough."""
    got = _standin_layout(p, param)
    if got is None:
        return None
    size, stride, dtype, logged, note = got
    if stride is None or len(stride) != len(size):
        return None
    names = set(known)
    shape, strides = _dims_code(size, names), _dims_code(stride, names)
    if shape is None or strides is None:
        return None
    device = _device_here(p, logged)
    p.notes.append(
        f"{param.name}: the log does not describe this input; a random tensor of the size "
        f"and stride the graph gives stands in{note}"
    )
    used = [s for d in [*size, *stride] for s in gc.symbols_in(d)]
    return f"standin({shape}, {strides}, torch.{dtype}, {device!r})", used


_Layout = tuple[list[Dim], list[Dim] | None, str, str, str]  # size, stride, dtype, device, note


def _standin_layout(p: Plan, param: gc.Param) -> _Layout | None:
    """A stand-in's size, stride, dtype and device: the annotation's, or the graph's logged
    sizes (contiguous float32 on cpu, with a note)."""
    from tlview.index.dims import fx_name

    tt = param.tensor
    if tt is not None and tt.wrapper is None and tt.torch_dtype:
        return tt.size, tt.stride, tt.torch_dtype, tt.device, ""
    sizes = (p.graph.meta or {}).get("sizes") if p.graph else None
    meta = sizes.get(fx_name(param.name)) if isinstance(sizes, dict) else None
    if tt is None and param.annotation in (None, "torch.Tensor") and isinstance(meta, list):
        size = [_int_or(d) if isinstance(d, str) else d for d in meta]
        note = "; the log does not give its dtype: float32 assumed"
        return size, _contiguous(size), "float32", "cpu", note
    return None


def _dims_code(dims: list[Dim], names: set[str]) -> str | None:
    """A tuple's code, `(4, sym['s0'])`; None when a dim has none."""
    parts = [gc.dim_code(d, names) for d in dims]
    if any(d is None for d in parts):
        return None
    return "(" + ", ".join(str(d) for d in parts) + ("," if len(parts) == 1 else "") + ")"


def _contiguous(size: list[Dim]) -> list[Dim] | None:
    if not all(isinstance(d, int) for d in size):
        return None
    out: list[Dim] = []
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
    if here.startswith("cuda") and not lazy_torch().cuda.is_available():
        note = f"the log ran on {logged}; this machine has no CUDA, so inputs are on cpu"
        if note not in p.notes:
            p.notes.append(note)
        return "cpu"
    return here


def _int_or(text: str) -> Dim:
    v = number(text.strip())
    return text if v is None else v


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
        if param.tensor is not None and source is not None and source in tensors:
            _sizes_of(known, param.tensor, source)
    for s in p.compile.symbols:
        if s.kind == "created" and s.symbol not in known and gc.is_symbol(s.symbol):
            _created(known, logged, s, tensors)
    return known


def _sizes_of(known: dict[str, str], tt: gc.TensorType, source: str) -> None:
    """Each symbol of an input's annotated sizes and strides, read off the input."""
    for kind, dims in (("size", tt.size), ("stride", tt.stride)):
        for d, dim in enumerate(dims):
            if isinstance(dim, str) and gc.is_symbol(dim) and dim not in known:
                known[dim] = f"inputs[{source!r}].{kind}({d})"


def _created(
    known: dict[str, str], logged: dict[str, str], s: Symbol, tensors: Mapping[str, Tensor]
) -> None:
    """A created symbol's code: its source's size, stride, offset or item, else its logged
    value (noted in LOGGED)."""
    src = s.source or ""
    m = _SIZE_SOURCE.fullmatch(src)
    o = _OFFSET_SOURCE.fullmatch(src)
    if m and m.group("tensor") in tensors:
        known[s.symbol] = f"inputs[{m.group('tensor')!r}].{m.group('kind')}({m.group('dim')})"
    elif o and o.group("tensor") in tensors:
        known[s.symbol] = f"inputs[{o.group('tensor')!r}].{o.group('method')}()"
    elif s.value is not None and _NUMBER.fullmatch(s.value) and not src.startswith("<"):
        v = number(s.value)
        known[s.symbol] = repr(float(s.value) if v is None else v)
        logged[s.symbol] = f"{s.symbol} = {s.value}, the value the log recorded for {src}"


def outputs(p: Plan, code: gc.GraphCode) -> None:
    """The dtype, shape, stride and device code of each output, as the graph annotates or the
    log sizes it."""
    known = {s for s, _ in p.symbols}
    sizes = (p.graph.meta or {}).get("sizes") if p.graph else None
    sizes = sizes if isinstance(sizes, dict) else {}
    for i, name in enumerate(code.outputs):
        label = name or f"output {i}"
        dims, steps, dtype, device = _output_layout(code, name, sizes)
        if dims is None or not all(isinstance(d, int | str) for d in dims):
            p.outputs.append((label, dtype, "None", "None", device))
            continue
        p.outputs.append(
            (label, dtype, _tuple_code(dims, known), _tuple_code(steps, known), device)
        )
    p.moved = _moved(p)


def _output_layout(
    code: gc.GraphCode, name: str | None, sizes: dict[str, Any]
) -> tuple[list[Dim] | None, list[Dim] | None, str, str | None]:
    """An output's dims, strides, dtype code and device: its annotation's, else its logged
    sizes."""
    ann = code.annotations.get(name) if name else None
    tt = gc.tensor_type(ann)
    if tt is not None:
        dtype = f"torch.{tt.torch_dtype}" if tt.torch_dtype else "None"
        if tt.wrapper:  # a subclass prints its own strides and device: not compared
            return tt.size, None, dtype, None
        return tt.size, tt.stride, dtype, tt.device or None
    if name and ann is None and isinstance(sizes.get(name), list):
        return [_int_or(d) if isinstance(d, str) else d for d in sizes[name]], None, "None", None
    return None, None, "None", None


def _tuple_code(dims: list[Dim] | None, known: set[str]) -> str:
    if dims is None or not all(isinstance(d, int | str) for d in dims):
        return "None"
    parts = [gc.dim_code(d, known) or "None" for d in dims]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _moved(p: Plan) -> bool:
    """Whether the rebuilt inputs are on another kind of device than the log's (--device, or
    no CUDA here): the outputs are where the inputs are."""
    codes = {a.name: a.code for a in p.args}
    by_code = {_item(s): t for s, t in p.rebuilt.tensors.items()}
    for param in p.code.params if p.code is not None else []:
        if param.tensor is None or not param.tensor.device:
            continue
        dev = getattr(by_code.get(codes.get(param.name, "")), "device", None)
        if dev is not None and dev.type != param.tensor.device.split(":")[0]:
            return True
    return bool(p.device)
