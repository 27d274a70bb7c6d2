"""The plan of a repro: read and check a logged graph's code, ops and names, bind its inputs
and work out its outputs, and say why where something fails, before anything is written."""

from __future__ import annotations

import importlib
import math
import operator
import re
import types
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from tlview.analyze.names import GRAPH_KIND
from tlview.errors import TlviewError
from tlview.model import Compile, KeepPolicy, Payload, Report
from tlview.replay import bind, thirdparty
from tlview.replay import graphcode as gc
from tlview.replay.bind import lazy_torch
from tlview.replay.planned import Body, Plan
from tlview.units import number

if TYPE_CHECKING:
    from tlview.tensors.rebuilt import Rebuilt

MAX_GRAPH_BYTES = 64 << 20  # graph code kept per graph
MAX_TOTAL_BYTES = 512 << 20  # graph code kept over a whole log
# Namespaces of torch.ops whose ops need the process group of a distributed job.
COLLECTIVES = frozenset({"_c10d_functional", "c10d_functional", "_c10d_functional_autograd"})
# Free names in compiled-autograd graphs: helpers that exist only inside the run that made them.
_AUTOGRAD_HELPERS = re.compile(r"torch__dynamo_(compiled_autograd|external_utils)_\w+")
_STD_NAME = re.compile(r"(?P<module>_operator|operator|math)_(?P<attr>\w+)")
# Names repro.py defines at its top level: the graph's class must not take one of them.
SCRIPT_NAMES = frozenset(
    {
        "argparse",
        "contextlib",
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
        "WORLD",
        "WORLD_SIZE",
        "RANK_INPUTS",
        "TIMEOUT_S",
        "join_world",
        "run_world",
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
        "VIA",
        "MOVED",
        "compare",
        "grad_mode",
        "compiled",
        "graph_module",
        "changed",
        "ITEMS",
        "Items",
        "item_verdicts",
        "CHECK_ACCURACY",
        "ACCURACY_BACKEND",
        "TOLERANCES",
        "accuracy",
        "flat",
        "agree",
        "accuracy_name",
        "operator",
        "_operator",
        "math",
    }
)


def graph_of(c: Compile) -> Payload | None:
    return next((g for g in c.graphs if g.kind == GRAPH_KIND), None)


def plan(
    ref: str,
    c: Compile,
    report: Report,
    rebuild: Callable[[Compile], Rebuilt],
    device: str | None = None,
    mode: str = "random",
    allow_import: Sequence[str] = (),
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
        mode=mode,
        job_ranks=report.ranks,
    )
    code = _checked(p, allow_import, report.keep)
    if code is None:
        return p
    if c.status == "failed":
        why = f": {c.fail_type}" if c.fail_type else ""
        p.notes.append(f"the original compile failed after capturing this graph{why}")
    try:
        p.rebuilt = rebuild(c)
    except TlviewError as e:
        p.fatal = f"inputs not rebuilt: {e.message}"
        return p
    bind.placeholders(p, code)
    if p.fatal:
        return p
    _bodies(p, code)
    bind.outputs(p, code)
    return p


def _checked(p: Plan, allow_import: Sequence[str], keep: KeepPolicy | None) -> gc.GraphCode | None:
    """The graph's code, read and its names and ops checked (blockers for what a fresh
    process lacks); None when the plan is fatal. `keep`: what the report was read keeping."""
    p.fatal = _read_graph(p, keep)
    if p.fatal or p.code is None:
        return None
    code = p.code
    if code.name in SCRIPT_NAMES or not gc.is_identifier(code.name):
        p.fatal = f"the graph's class is named {code.name!r}, a name the script needs"
        return None
    _check_names(p, code)
    if p.fatal:
        return None
    if allow_import:  # before the ops are looked up: importing them registers theirs
        p.imports, failed = thirdparty.import_allowed(allow_import, code.text)
        p.blockers += failed
    _check_ops(p, code, allow_import)
    _check_torch(p, code)
    return code


def _read_graph(p: Plan, keep: KeepPolicy | None) -> str | None:
    g = p.graph
    if g is None:
        return f"compile {p.compile.key} has no {GRAPH_KIND} record (status {p.compile.status})"
    if not g.ok:
        return f"the graph record at line {g.line} is damaged (its payload's md5 does not match)"
    if g.text is None:
        return _not_kept(g, p.compile.key, keep)
    if g.cut:
        return (
            f"the graph code at line {g.line} is {g.bytes} bytes, over the {MAX_GRAPH_BYTES} kept"
        )
    try:
        p.code = gc.parse(g.text)
    except gc.GraphCodeError as e:
        return f"line {g.line}: {e}"
    return None


def _not_kept(g: Payload, key: str, keep: KeepPolicy | None) -> str:
    """Why a graph's code is not in memory: the report was read without asking for it (a
    `tlview.read` without `keep=`, or keeping other texts), or the log's budget of graph code
    ran out before it."""
    if keep is not None and keep.payload_bytes > 0 and keep.wants(g.kind, key):
        return (
            f"the graph code at line {g.line} was not kept in memory "
            f"(over {keep.total_bytes} bytes of graphs)"
        )
    return (
        f"the graph code at line {g.line} was not kept: the report was read without keeping "
        "this graph's code (read it with tlview.read(PATH, "
        "keep=tlview.replay.make.graph_keep()), or give tlview.repro the log's path)"
    )


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


# torch's modules that read or write files, fetch or build code, or start processes: no graph
# fx printed names one of their functions.
_NOT_GRAPH = (
    "torch.serialization", "torch.hub", "torch.package", "torch.utils.cpp_extension",
    "torch.jit._serialization", "torch.multiprocessing", "torch.utils.data",
    "torch._inductor.codecache", "torch.distributed.checkpoint", "torch.utils.benchmark",
)  # fmt: skip


def _check_torch(p: Plan, code: gc.GraphCode) -> None:
    """Each `torch.x.y` the graph names must be torch's own, reached through torch's modules
    (`torch.os.system` is not) and outside the modules no graph calls (`torch.load`): what
    cannot be shown to be is a blocker, so the repro is written but never run."""
    torch = lazy_torch()
    for name in code.torch_names:
        why = _not_torch(torch, name)
        if why:
            p.blockers.append(f"the graph names {name}, {why}: not code fx prints, not run")


def _in(module: object, prefixes: tuple[str, ...]) -> bool:
    return isinstance(module, str) and module.startswith(prefixes)


def _attr(obj: object, part: str) -> object:
    """OBJ.PART, a submodule of torch's imported if need be (`torch.distributed.tensor`)."""
    try:
        return getattr(obj, part)
    except Exception:  # torch's lazy attributes import; a missing one raises anything
        pass
    if isinstance(obj, types.ModuleType) and _in(obj.__name__, ("torch",)):
        try:
            return importlib.import_module(f"{obj.__name__}.{part}")
        except Exception:  # not a module of this torch either
            return None
    return None


def _not_torch(torch: types.ModuleType, name: str) -> str | None:
    """Why NAME (`torch.a.b`) is not shown to be torch's own code, or None when it is."""
    obj: object = torch
    owner: object = torch
    for part in name.split(".")[1:]:
        owner = obj
        obj = _attr(obj, part)
        if obj is None:
            return "which this torch does not have"
        if isinstance(obj, types.ModuleType) and not _in(obj.__name__, ("torch",)):
            return f"which reaches the module {obj.__name__}"
    module = getattr(obj, "__module__", None)
    if isinstance(obj, types.ModuleType):
        module = obj.__name__
    elif module is None:  # a method of a torch class (`torch.Tensor.add`), or an instance
        # of one that keeps no module of its own (`torch.contiguous_format`, `torch.strided`)
        module = getattr(owner, "__module__", None)
        if isinstance(owner, types.ModuleType):
            module = getattr(type(obj), "__module__", None)
    if not _in(module, ("torch",)):
        return f"which is {module or 'no module'}'s"
    if _in(module, _NOT_GRAPH):
        return f"of {module}, which reads or writes files or code"
    return None


def _check_ops(p: Plan, code: gc.GraphCode, allow_import: Sequence[str] = ()) -> None:
    for op in code.ops:
        ns, name = op.split(".")[2:4]
        if ns in COLLECTIVES:
            p.collectives = True
        elif not _op_found(p, ns, name, allow_import):
            p.blockers.append(_unregistered(p, ns, name, _defined_outside_torch(ns, name)))
    if p.collectives:
        world_of(p, p.graph.text if p.graph is not None and p.graph.text else "")


def _op_found(p: Plan, ns: str, name: str, allow_import: Sequence[str]) -> bool:
    """Whether a fresh process running the repro has the op: torch's own (the modules of
    torch's that define it go into the plan), or a package's that --allow-import imports."""
    modules = _registered_by(ns, name)
    if modules:  # whether or not this process imported them already
        p.registers.extend(m for m in modules if m not in p.registers)
        return True
    # Whether this process has the op says nothing of a fresh one's when a package of the
    # program's defined it (the API's caller imported transformers, or an earlier repro's
    # --allow-import did): the module that defined it says.
    definer = _defined_outside_torch(ns, name)
    if definer is None:
        return _op_exists(ns, name)
    if not any(thirdparty.inside(definer, a) for a in allow_import):
        return False
    if definer not in p.imports:  # imported already: repro.py must import it too
        p.imports.append(definer)
    return True


# A collective's group size and name as fx prints its call: `all_gather_into_tensor(y, 2, '0')`,
# `reduce_scatter_tensor(x, 'sum', 2, '0')`, `all_reduce(x, 'sum', '0')`.
# Each is matched at the start of one call's text (`_calls`), never searched for across a line.
_SIZED = re.compile(
    r"(?:all_gather_into_tensor(?:_out|_coalesced)?|all_gather_tensor)"
    r"\((?:\w+|\[[^\]]*\]), ([0-9]+),"
    r"|reduce_scatter_tensor(?:_coalesced)?\((?:\w+|\[[^\]]*\]), '\w+', ([0-9]+),"
)
_GROUP = re.compile(r"\w+\(.*?, '(\w*)'\)")
_CALL = "_c10d_functional."
WORLD_GROUP = "0"  # the name torch gives the default group's (dist.group.WORLD) collectives


def _calls(text: str) -> Iterator[str]:
    """Each collective call's text: from its name to the next call or the line's end (fx writes
    one op a statement), so every character is read once, however many calls a line holds."""
    for line in text.split("\n"):
        if _CALL in line:
            yield from line.split(_CALL)[1:]


def world_of(p: Plan, text: str) -> None:
    """The ranks the graph's collectives ran on, read off their calls (the group size that
    all_gather_into_tensor and reduce_scatter_tensor take), else the job's ranks."""
    sizes: set[int] = set()
    groups: set[str] = set()
    for call in _calls(text):
        m = _SIZED.match(call)
        v = number(m.group(1) or m.group(2)) if m else None
        if v is not None:
            sizes.add(v)
        g = _GROUP.match(call)
        if g:
            groups.add(g.group(1))
    p.groups = sorted(groups)
    if len(sizes) > 1:
        p.blockers.append(
            f"the graph's collectives ran on groups of {sorted(sizes)} ranks: a repro makes "
            "one world"
        )
    if sizes:
        p.world = max(sizes)
    else:  # all_reduce, broadcast: no size in the call; the job's ranks, when they are known
        p.world = max(1, len(p.job_ranks))
        p.notes.append(
            f"the graph's collectives do not say their group's size: it runs on {p.world} "
            "rank(s), the ranks of the logs read"
        )
    others = [g for g in p.groups if g != WORLD_GROUP]
    if others:
        p.blockers.append(
            f"the graph's collectives use process group {others[0]!r}, not the world's: a "
            "repro recreates only the world"
        )


# torch's own modules that define ops of a namespace when imported, not with `import torch`:
# every `torch.library.Library(NS, "DEF" or "FRAGMENT")` and `custom_op("NS::...")` in torch
# 2.13's Python source (its tests and examples aside). A graph calling one needs its import.
_OP_MODULES: dict[str, tuple[str, ...]] = {
    "prims": ("torch._inductor.inductor_prims",),  # fma, random, lookup_seed, ...
    "fsdp": (
        "torch.distributed.fsdp._fully_shard._fsdp_param",  # copy_
        "torch.distributed.fsdp._fully_shard._fsdp_collectives",  # all_gather_copy_in, ...
    ),
    "_dtensor": ("torch.distributed.tensor._collective_utils",),
    "symm_mem": ("torch.distributed._symmetric_memory",),
    "device_mesh": ("torch.distributed._ops.device_mesh",),
    "cplib": ("torch.distributed.tensor.experimental._context_parallel._cp_custom_ops",),
    "pippy": ("torch.distributed.pipelining._IR",),
    "ao": ("torch._functorch._activation_offloading.offload_ops",),
    "bucketing": ("torch._inductor.fx_passes.bucketing",),
    "_inductor_debug": ("torch._inductor.runtime.debug_utils",),
    "_inductor_test": ("torch._inductor.test_operators",),
    "debug_mode_ops": ("torch.utils._debug_mode._mode",),
    "flex_lib": ("torch._dynamo._trace_wrapped_higher_order_op",),
    "streams": ("torch._dynamo.variables.streams",),
    "torch_attn": ("torch.nn.attention.varlen",),
    "semi_structured": ("torch.sparse.semi_structured",),
    "export": ("torch.export.custom_ops",),
    "quantized_decomposed": ("torch.ao.quantization.fx._decomposed",),
}


def _registered_by(ns: str, name: str) -> list[str]:
    """The modules of torch's own (`_OP_MODULES`) that define the op, which a script calling
    it must import (importing them here first: they are torch's, not the log's); [] for
    other ops."""
    found: list[str] = []
    for module in _OP_MODULES.get(ns, ()):
        try:
            mod = importlib.import_module(module)
        except Exception:  # a torch without that module
            continue
        if ns == "prims" and not hasattr(mod, name):
            continue  # torch defines most prims itself; inductor's module the few it adds
        found.append(module)
        if _op_exists(ns, name):
            return found
    return []


def _op_exists(ns: str, name: str) -> bool:
    """Whether this torch has the op (a lookup by name: nothing is imported or run)."""
    torch = lazy_torch()
    try:
        getattr(getattr(torch.ops, ns), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _unregistered(p: Plan, ns: str, name: str, definer: str | None) -> str:
    """Why a graph calling an op a package of the program defines will not run as it is, and
    which module to let the repro import: the one that defined it here, the package its
    namespace names, one the graph's `# File:` comments name; else where the graph calls it."""
    op = f"the graph calls the custom op {ns}::{name}"
    if definer == "__main__":
        return (
            f"{op}, which the program defined in its own script: move its definition into a "
            "module and pass --allow-import with that module, or define it at the top of "
            "repro.py"
        )
    package = definer.split(".")[0] if definer else ns
    text = (p.graph.text if p.graph else None) or ""
    call = f"torch.ops.{ns}.{name}"
    named = _named_modules(text, package, call)
    if definer is None and not named and not thirdparty.importable(ns):
        return _own_code(op, ns, thirdparty.call_site(text, call))
    return (
        f"{op}, which the program registered at run time: pass --allow-import "
        f"{package if gc.is_identifier(package) else 'PACKAGE'} to import the package that "
        f"defines it{named}, or import it at the top of repro.py"
    )


def _named_modules(text: str, package: str, call: str) -> str:
    """The modules of PACKAGE the graph's `# File:` comments name, in words: the one that
    calls the op, else the first two; "" for none."""
    where = thirdparty.caller(text, package, call)
    if where:
        return f" (the graph calls it from {where})"
    files = thirdparty.modules_named(text, package)[:2]
    return f" (the graph's code names {', '.join(files)})" if files else ""


def _own_code(op: str, ns: str, site: tuple[str, int] | None) -> str:
    """The hint for an op no module here is named after: the program's own code defined it,
    or a module the log does not name."""
    if site is None:
        return (
            f"{op}, which the program registered at run time, and no module here is named "
            f"{ns!r}: pass --allow-import with the module that defines it (the log does not "
            "name it), or define it at the top of repro.py"
        )
    path, line = site
    file = path.replace("\\", "/").rsplit("/", 1)[-1]
    return (
        f"{op}, which the program registered at run time; the graph calls it from {path}:{line}, "
        f"the program's own code, and no module here is named {ns!r}: pass --allow-import with "
        f"the module that defines the op, its directory on PYTHONPATH (if {file} is the script "
        "that was run, which a repro cannot import, move the definition into a module of its "
        "own first), or define the op at the top of repro.py"
    )


def _defined_outside_torch(ns: str, name: str) -> str | None:
    """The module that defined the op in this process with `torch.library.custom_op`, when it
    is not torch's (transformers.integrations.moe, when imported, defines
    transformers::grouped_mm_fallback): a repro in a fresh process must import it too. None
    for an op this process does not have, or has from torch or C++."""
    lazy_torch()
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:  # a torch without custom_op
        return None
    fn = getattr(OPDEFS.get(f"{ns}::{name}"), "_init_fn", None)
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str) or module == "torch" or module.startswith("torch."):
        return None
    return module


def _bodies(p: Plan, code: gc.GraphCode) -> None:
    for path, nargs in code.bodies.items():
        parts = path.split(".")
        owner = ".".join([code.name, *parts[:-1]])
        target = "mod." + ".body.".join(parts)
        nouts = code.body_outputs.get(path)
        p.bodies.append(Body(path, owner, parts[-1], target, nargs, nouts))
