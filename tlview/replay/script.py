"""Writing a repro: the text of repro.py from the one Jinja environment, the check that no
string from the log changed its code, and repro.py and inputs.pt on disk."""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tlview.errors import EXIT_NO_REPRO, EXIT_REFUSED, TlviewError
from tlview.index.kinds import INDUCTOR_KINDS
from tlview.inert import code as inert_code
from tlview.model import Compile
from tlview.replay.planned import Plan
from tlview.runtime import templates
from tlview.version import __version__

SCRIPT = "repro.py"
INPUTS = "inputs.pt"


def script_text(
    p: Plan,
    backend: str | None,
    literal: Callable[[Any], str] = repr,
    mode: str = "random",
    world: str = "gloo",
    check_accuracy: bool = False,
    via: str = "backend",
) -> str:
    """The text of repro.py. `literal` writes every string from the log (repr: a Python literal)."""
    assert p.code is not None and p.graph is not None and p.graph.text is not None
    env = templates.environment().overlay()
    env.filters["py"] = literal
    text = p.graph.text if p.graph.text.endswith("\n") else p.graph.text + "\n"
    text = inert_code(text)  # no control or bidi character from the log reaches the file
    against = accuracy_backend(p.compile)
    script = env.get_template("repro.py.j2").render(
        log_name=p.compile.log,
        log_path=p.log_path,
        compile_id=p.compile.key,
        graph_line=int(p.graph.line),
        torch_version=p.torch_version,
        tlview_version=__version__,
        values="zero" if mode == "zeros" else "random",
        logged=_logged(p),
        class_name=p.code.name,
        graph_code=text,
        backend=backend,
        via=via,
        dynamic=True if p.dynamic else None,
        notes=[*p.blockers, *p.notes],
        std_modules=sorted({m for _, m, _ in p.std}),
        registers=p.registers,
        imports=p.imports,
        std_names=p.std,
        bodies=p.bodies,
        collectives=p.collectives,
        world=world if p.collectives else None,
        world_size=p.world,
        rank_inputs=[(r, rank_key(p, r)) for r, _ in p.ranks],
        no_grad=p.no_grad,
        standins=p.standins,
        attrs=p.attrs,
        symbols=p.symbols,
        args=p.args,
        outputs=p.outputs,
        moved=p.moved,
        check_accuracy=check_accuracy,
        accuracy_backend=against,
        accuracy_why=ACCURACY_WHY[against],
        domains=p.domains,
        changed=p.changed,
        items=p.items,
        nouts=p.nouts,
    )
    return script + "\n"  # the one environment drops a template's last newline


def _logged(p: Plan) -> int:
    """How many of the inputs hold the value the log recorded."""
    r = p.rebuilt
    return sum(1 for s in getattr(r, "logged", {}) if s in r.tensors) if r is not None else 0


# --check-accuracy's backend unless --backend names one: the logged run's, as its graphs say.
ACCURACY_WHY = {
    "inductor": "the logged run's backend: it logged inductor's graphs and code",
    "aot_eager": "the logged run compiled no inductor code: AOTAutograd's graphs, run eagerly",
}


def accuracy_backend(c: Compile) -> str:
    """What --check-accuracy compares eager with by default: inductor when the logged compile
    ran inductor, else aot_eager (an eager run's graph compared with itself says nothing)."""
    kinds = [g.kind for g in c.graphs] + [a.kind for a in c.artifacts]
    return "inductor" if any(INDUCTOR_KINDS.match(k) for k in kinds) else "aot_eager"


def rank_key(p: Plan, rank: int) -> str:
    """The key of a rank's inputs in inputs.pt: `rank1:0/0`."""
    return f"rank{rank}:{p.compile.key}"


def verify(
    p: Plan,
    script: str,
    backend: str | None,
    mode: str = "random",
    world: str = "gloo",
    check_accuracy: bool = False,
    via: str = "backend",
) -> None:
    """Check that strings from the log stayed strings: the script must parse to the same tree
    as one written with every string replaced by a harmless one."""
    try:
        got = _shape(ast.parse(script))
        blank = script_text(
            p, backend, _blank, mode=mode, world=world, check_accuracy=check_accuracy, via=via
        )
        ref = _shape(ast.parse(blank))
    except SyntaxError as e:
        raise TlviewError(
            f"repro.py would not parse ({e.msg}): not written", EXIT_NO_REPRO
        ) from None
    if got != ref:
        raise TlviewError(
            "a string from the log would change the code of repro.py: not written",
            EXIT_NO_REPRO,
        )


def _blank(v: Any) -> str:
    return repr("x") if isinstance(v, str) else repr(v)


def _shape(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree, include_attributes=False)


def write_files(
    p: Plan,
    out: Path,
    backend: str | None,
    force: bool,
    mode: str = "random",
    world: str = "gloo",
    check_accuracy: bool = False,
    via: str = "backend",
) -> None:
    """Write repro.py and inputs.pt into OUT (created if missing); a graph of a world of N
    ranks gets each rank's inputs too."""
    from tlview.runtime.output import output as open_output
    from tlview.tensors import emit

    script = script_text(p, backend, mode=mode, world=world, check_accuracy=check_accuracy, via=via)
    verify(p, script, backend, mode, world, check_accuracy, via)
    make_dir(out)
    obj = emit.saved(
        [(p.compile.key, p.rebuilt)] + [(rank_key(p, r), rb) for r, rb in p.ranks],
        p.torch_version,
    )
    with open_output(str(out / INPUTS), force) as f:
        emit.save(obj, f)
    with open_output(str(out / SCRIPT), force) as f:
        f.write(script.encode("utf-8"))


def check_dir(out: Path) -> None:
    """Stop with one line when OUT, or a directory it would be made in, is a file."""
    for at in (out, *out.parents):
        if at.exists():
            if not at.is_dir():
                where = "" if at == out else f", so {out} cannot be made in it"
                raise TlviewError(
                    f"{at}: is a file, not a directory{where}: -o names the directory that "
                    "repro.py and inputs.pt are written into",
                    EXIT_REFUSED,
                )
            return


def make_dir(out: Path) -> None:
    """OUT, made if missing (with its parents)."""
    check_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TlviewError(
            f"{out}: cannot create the directory: {e.strerror or e}", EXIT_REFUSED
        ) from None


MAX_SLUG = 100  # characters of a directory name (file systems take 255 bytes)


def slug(ref: str) -> str:
    """A directory name for a compile: `0/1_2` -> `0-1_2`, `!0/1/0` -> `ca0-1-0`, `0/1@2`
    (its process's second run) -> `0-1-run2`; a long one (a long log name) cut, with a hash of
    the whole in its place."""
    text = ref.replace("#", "-g").replace("!", "ca").replace("/", "-").replace(":", "--")
    text = text.replace("@", "-run")
    text = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".") or "graph"
    if len(text) <= MAX_SLUG:
        return text
    digest = hashlib.sha1(ref.encode("utf-8", "surrogatepass"), usedforsecurity=False)
    return f"{text[: MAX_SLUG - 13]}---{digest.hexdigest()[:10]}"
