"""Hostile logs, third round (issue 34): the page's script (templates/report.js) on text from a
log. Its syntax colouring is one pass whatever the text (4N over N, as tests/growth.py bounds
it, measured inside node), and gives the tokens the old regex gave; its provenance maps find a
log's names (`constructor`, `__proto__`) as entries, never as the prototype's.

The parts are cut out of report.js by their markers (`// <scan>`, `// <maps>`) and run by node.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from growth import FLOOR, LIMIT, RUNS

SCRIPT = Path(__file__).resolve().parents[2] / "templates" / "report.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="no node to run the page's script")
# The colouring's regex before issue 34: the reference for the tokens on ordinary text.
OLD = r"""/(#[^\n]*)|("""
OLD += r'''"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')'''
OLD += r"""|(\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)|([A-Za-z_]\w*)/g"""


def part(name: str) -> str:
    text = SCRIPT.read_text()
    start, end = text.index(f"// <{name}>"), text.index(f"// </{name}>")
    return text[start:end]


def node(code: str, data: Any) -> Any:
    assert NODE is not None
    prog = f"{code}\nconst input = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
    prog += "process.stdout.write(JSON.stringify(main(input)));\n"
    res = subprocess.run(
        [NODE, "--expose-gc", "-e", prog],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_colouring_gives_the_old_tokens_on_ordinary_text() -> None:
    """Fuzz: on short texts of code-like characters the one-pass scanner finds the tokens the
    regex found (a comment, a string, a number, a word), at the same places."""
    rng = random.Random(34)
    alphabet = "ab1 ._\"'\\#\n\r()e+-9"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(30))) for _ in range(3000)]
    texts += ['x = """a\n"b" """ # c', "f('a\\'b', 1.5e3) # x", "'''never closed\n'a'", '"\\"\\"']
    code = (
        part("scan")
        + f"""
const OLD = {OLD};
function old(src) {{
  const out = [];
  OLD.lastIndex = 0;
  let m;
  while ((m = OLD.exec(src)) !== null) {{
    const kind = m[1] !== undefined ? "c" : m[2] !== undefined ? "s" : m[3] !== undefined ? "n" : "w";
    out.push(m.index, OLD.lastIndex, kind);
  }}
  return out;
}}
function main(texts) {{
  return texts.map((t) => [JSON.stringify(tokens(t)) === JSON.stringify(old(t)), t]);
}}
"""
    )
    wrong = [t for same, t in node(code, texts) if not same]
    assert not wrong, wrong[:5]


@pytest.mark.slow  # node times each text at N and 4N, best of three
def test_colouring_is_linear_on_hostile_text() -> None:
    """Each text that made the regex restart at every opener: 4N over N within growth.LIMIT."""
    units = {
        "escaped quotes": '\\"',  # `\"\"\"...`: each quote opens a string that never closes
        "escaped apostrophes": "\\'",
        "closed triples": '"""x',
        "triples of one quote": "'''\"",
        "digits": "1" * 50 + "a",
        "comments": "#" * 40 + "\n",
    }
    code = (
        part("scan")
        + f"""
function clock(f, reps) {{
  global.gc();  // as growth.clock: no collection owed by earlier runs lands in this one
  const s = process.hrtime.bigint();
  for (let k = 0; k < reps; k += 1) f();
  return Number(process.hrtime.bigint() - s);
}}
function best(f, reps) {{
  let t = Infinity;
  for (let k = 0; k < {RUNS}; k += 1) t = Math.min(t, clock(f, reps));
  return t;
}}
function main(units) {{
  const out = {{}};
  for (const [name, unit] of Object.entries(units)) {{
    const small = unit.repeat(Math.ceil(25000 / unit.length));
    const large = small.repeat(4);
    tokens(large);
    const reps = Math.max(1, Math.ceil({FLOOR * 1e9} / Math.max(clock(() => tokens(small), 1), 1)));
    out[name] = best(() => tokens(large), reps) / best(() => tokens(small), reps);
  }}
  return out;
}}
"""
    )
    ratios = node(code, units)
    slow = {k: round(r, 1) for k, r in ratios.items() if r > LIMIT}
    if slow:  # once more: a burst of the other core lands on one figure
        again = node(code, {k: units[k] for k in slow})
        slow = {k: round(r, 1) for k, r in again.items() if r > LIMIT}
    assert not slow, f"4N/N over {LIMIT}: {slow}"


def test_provenance_maps_find_a_logs_names_and_nothing_else() -> None:
    """A node or kernel named `constructor`, `toString` or `__proto__` is looked up in the
    map the page was given: its own entry when it has one, none otherwise; no TypeError."""
    maps = {
        "preToPost": {"constructor": ["add"], "__proto__": ["mul"]},
        "postToCode": {"add": ["k0"], "toString": ["k1"]},
        "codeToPost": {},
        "postToPre": {},
    }
    code = (
        part("maps")
        + """
function main(text) {
  const m = JSON.parse(text, bare);
  return [
    LINKS.pre(m, ["constructor"]),
    LINKS.pre(m, ["__proto__"]),
    LINKS.post(m, ["toString", "hasOwnProperty", "constructor"]),
    LINKS.code(m, ["valueOf", "__proto__"]),
    Object.getPrototypeOf(m) === null,
  ];
}
"""
    )
    got = node(code, json.dumps(maps))
    assert got[0] == {"pre": ["constructor"], "post": ["add"], "code": ["k0"]}
    assert got[1] == {"pre": ["__proto__"], "post": ["mul"], "code": []}
    assert got[2] == {
        "pre": [],
        "post": ["toString", "hasOwnProperty", "constructor"],
        "code": ["k1"],
    }
    assert got[3] == {"pre": [], "post": [], "code": ["valueOf", "__proto__"]}
    assert got[4] is True
