(() => {
  "use strict";
  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

  // The compile table: filter by text and status, sort by any column.
  const table = $("#ctable");
  const filter = $("#filter");
  const status = $("#status");
  const shown = $("#shown");
  const rows = table ? Array.from(table.tBodies[0].rows) : [];
  const text = new Map(rows.map((tr) => [tr, tr.textContent.toLowerCase()]));

  function applyFilter() {
    if (!table) return;
    const q = filter.value.trim().toLowerCase();
    const st = status.value;
    let n = 0;
    for (const tr of rows) {
      const ok = (st === "*" || tr.dataset.status === st) && (!q || text.get(tr).includes(q));
      tr.hidden = !ok;
      if (ok) n += 1;
    }
    // Rows, not compiles: the table also has a row for the records outside any compile.
    const all = `${rows.length.toLocaleString("en-US")} row${rows.length === 1 ? "" : "s"}`;
    shown.textContent = n === rows.length ? all : `${n.toLocaleString("en-US")} of ${all}`;
  }

  function sortBy(th) {
    const col = th.cellIndex;
    const numeric = th.dataset.type === "num";
    const dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    for (const h of table.tHead.rows[0].cells) h.setAttribute("aria-sort", "none");
    th.setAttribute("aria-sort", dir);
    const sign = dir === "ascending" ? 1 : -1;
    const key = (tr) => {
      const td = tr.cells[col];
      return td.dataset.sort !== undefined ? td.dataset.sort : td.textContent.trim();
    };
    const sorted = rows.slice().sort((a, b) => {
      const x = key(a);
      const y = key(b);
      if (numeric) {
        if (x === "" || y === "") return (x === "") - (y === "");
        return sign * (parseFloat(x) - parseFloat(y));
      }
      return sign * x.localeCompare(y);
    });
    const body = table.tBodies[0];
    const frag = document.createDocumentFragment();
    for (const tr of sorted) frag.appendChild(tr);
    body.appendChild(frag);
  }

  if (table) {
    filter.addEventListener("input", applyFilter);
    status.addEventListener("change", applyFilter);
    for (const th of table.tHead.rows[0].cells) {
      const b = th.querySelector("button");
      if (b) b.addEventListener("click", () => sortBy(th));
    }
    applyFilter();
  }

  // Figures in the overview filter the table by status.
  for (const b of $$("button.fig[data-status]")) {
    b.addEventListener("click", () => {
      const want = b.dataset.status;
      const has = Array.from(status.options).some((o) => o.value === want);
      status.value = has ? want : "*";
      filter.value = "";
      applyFilter();
      $("#compiles").scrollIntoView();
    });
  }

  // Keys: "/" goes to the filter, Escape clears it; j and k move between compile sections.
  const summaries = $$("details.compile-d > summary");
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t instanceof HTMLInputElement || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/" && !typing && filter) {
      e.preventDefault();
      filter.focus();
      filter.select();
    } else if (e.key === "Escape" && t === filter) {
      filter.value = "";
      applyFilter();
    } else if ((e.key === "j" || e.key === "k") && !typing && summaries.length) {
      const at = summaries.indexOf(document.activeElement);
      let next = e.key === "j" ? at + 1 : at - 1;
      if (at < 0) next = e.key === "j" ? 0 : summaries.length - 1;
      const el = summaries[Math.max(0, Math.min(summaries.length - 1, next))];
      el.focus();
      el.scrollIntoView({ block: "nearest" });
    }
  });

  // Cheap syntax colouring, done when a block is first shown; text nodes only, never HTML.
  const PY_WORDS = new Set(("def class return if else elif for while in not and or is None True False import from as " +
    "with lambda pass raise try except finally yield async await del global nonlocal assert break continue").split(" "));
  const JSON_WORDS = new Set(["true", "false", "null"]);
  const COLOUR_LIMIT = 300000;

  // <scan> The tokens of a text as start, end, kind, flat (kind: c comment, s string, n number,
  // w word), left to right in one pass: each string's end is looked for once, and an opener
  // that cannot close (no closing quote before its line's end, no closing triple quote at all)
  // marks every later opener of its kind up to there as plain, so no text costs more than a
  // pass (a regex starts its search again at each opener: quadratic on `"\"\"\"...`).
  const NUMBER = /\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b/y;
  const WORD = /[A-Za-z_]\w*/y;
  const LINE_END = /[\n\r\u2028\u2029]/;
  function tokens(src) {
    const out = [];
    const open = new Map(); // an opener (a quote, three quotes) -> where its openers stop closing
    const n = src.length;
    let i = 0;
    while (i < n) {
      const ch = src[i];
      if (ch === "#") {
        let e = src.indexOf("\n", i);
        if (e < 0) e = n;
        out.push(i, e, "c");
        i = e;
        continue;
      }
      if (ch === '"' || ch === "'") {
        const three = ch + ch + ch;
        let e = -1;
        if (src.startsWith(three, i) && !((open.get(three) ?? -1) > i)) {
          const k = src.indexOf(three, i + 3);
          if (k < 0) open.set(three, n);
          else e = k + 3;
        }
        if (e < 0 && !((open.get(ch) ?? -1) > i)) {
          let j = i + 1;
          while (j < n) {
            const c = src[j];
            if (c === ch || c === "\n") break;
            if (c === "\\") {
              if (j + 1 >= n || LINE_END.test(src[j + 1])) break;
              j += 2;
            } else j += 1;
          }
          if (j < n && src[j] === ch) e = j + 1;
          else open.set(ch, j); // every opener of ch before j fails the same way
        }
        if (e >= 0) {
          out.push(i, e, "s");
          i = e;
        } else i += 1;
        continue;
      }
      NUMBER.lastIndex = i;
      if (NUMBER.test(src)) {
        out.push(i, NUMBER.lastIndex, "n");
        i = NUMBER.lastIndex;
        continue;
      }
      WORD.lastIndex = i;
      if (WORD.test(src)) {
        out.push(i, WORD.lastIndex, "w");
        i = WORD.lastIndex;
        continue;
      }
      i += 1;
    }
    return out;
  }
  // </scan>

  function colour(code) {
    if (code.dataset.done) return;
    if ((code.dataset.gz !== undefined || code.dataset.same !== undefined) && !code.dataset.unpacked) {
      unpack(code);  // coloured once its text is there
      return;
    }
    code.dataset.done = "1";
    const lang = code.dataset.lang;
    if (lang !== "py" && lang !== "json") return;
    const all = code.textContent;
    const src = all.length > COLOUR_LIMIT ? all.slice(0, COLOUR_LIMIT) : all;
    const words = lang === "py" ? PY_WORDS : JSON_WORDS;
    const frag = document.createDocumentFragment();
    let plain = "";
    let last = 0;
    const span = (cls, s) => {
      if (plain) {
        frag.appendChild(document.createTextNode(plain));
        plain = "";
      }
      const el = document.createElement("span");
      el.className = cls;
      el.textContent = s;
      frag.appendChild(el);
    };
    const found = tokens(src);
    for (let k = 0; k < found.length; k += 3) {
      const start = found[k];
      const end = found[k + 1];
      const kind = found[k + 2];
      plain += src.slice(last, start);
      last = end;
      const t = src.slice(start, end);
      if (kind === "c") {
        if (lang === "py") span("c", t);
        else plain += t;
      } else if (kind === "s") span("s", t);
      else if (kind === "n") span("n", t);
      else if (words.has(t)) span("k", t);
      else plain += t;
    }
    plain += all.slice(last);
    frag.appendChild(document.createTextNode(plain));
    code.textContent = "";
    code.appendChild(frag);
  }

  // Long payloads are in the page gzip-compressed, in base64 (data-gz), or are the same text as
  // another payload's (data-same: its code's id); each is unpacked when first shown, in the
  // browser, with nothing fetched. <html data-unpacking> counts those still being unpacked.
  const texts = new Map(); // id of a packed code -> Promise of its text
  const root = document.documentElement;
  root.dataset.unpacking = "0";

  function inflate(holder) {
    let got = texts.get(holder.id);
    if (got) return got;
    if (typeof DecompressionStream === "undefined") {
      got = Promise.reject(new Error("this browser has no DecompressionStream"));
    } else {
      const bin = atob(holder.dataset.gz);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i += 1) bytes[i] = bin.charCodeAt(i);
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      got = new Response(stream).text();
    }
    if (holder.id) texts.set(holder.id, got);
    return got;
  }

  function unpack(code) {
    if (code.dataset.unpacking) return;
    code.dataset.unpacking = "1";
    root.dataset.unpacking = String(Number(root.dataset.unpacking) + 1);
    const holder = code.dataset.same !== undefined ? document.getElementById(code.dataset.same) : code;
    const got = holder && holder.dataset.gz !== undefined ? inflate(holder) : Promise.reject(new Error("its text is missing"));
    got.then((text) => {
      code.textContent = text;
      code.dataset.unpacked = "1";
      colour(code);
    }, (err) => {
      code.textContent = `(not shown: ${err.message}; tlview show PATH --compile-id ID NAME writes it)`;
      code.dataset.unpacked = "1";
      code.dataset.done = "1";
    }).finally(() => {
      root.dataset.unpacking = String(Number(root.dataset.unpacking) - 1);
    });
  }

  // The text of a payload's code on the page: as it is, or unpacked.
  function payloadText(code) {
    if (code.dataset.gz === undefined && code.dataset.same === undefined) return Promise.resolve(code.textContent);
    const holder = code.dataset.same !== undefined ? document.getElementById(code.dataset.same) : code;
    if (!holder || holder.dataset.gz === undefined) return Promise.reject(new Error("its text is missing"));
    return inflate(holder);
  }

  // The provenance view (tlparse's -i): three panes of a compile's graphs and code, each line of
  // a node or kernel marked; a click marks it and what it maps to in the other two panes.
  // <maps>
  const LINKS = {
    pre: (m, items) => {
      const post = union(items, m.preToPost);
      return { pre: items, post, code: union(post, m.postToCode) };
    },
    post: (m, items) => ({ pre: union(items, m.postToPre), post: items, code: union(items, m.postToCode) }),
    code: (m, items) => {
      const post = union(items, m.codeToPost);
      return { pre: union(post, m.postToPre), post, code: items };
    },
  };
  const PANE_WORDS = { pre: "pre-grad", post: "post-grad", code: "kernels" };

  // The maps are keyed by names from the log (`constructor`, `__proto__`, `toString`): each
  // object is made with no prototype, so a lookup finds the log's own entries and nothing else.
  function bare(key, value) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
    const out = Object.create(null);
    for (const k of Object.keys(value)) out[k] = value[k];
    return out;
  }

  function own(map, name) {
    const v = map ? map[name] : undefined;
    return Array.isArray(v) ? v : [];
  }

  function union(names, map) {
    const out = new Set();
    for (const n of names) for (const x of own(map, n)) out.add(x);
    return Array.from(out);
  }
  // </maps>

  function buildView(view) {
    if (view.dataset.built) return;
    view.dataset.built = "1";
    const map = JSON.parse(view.dataset.map, bare);
    const panes = Object.create(null);
    const jobs = [];
    for (const pre of $$("pre.prov-text", view)) {
      const role = pre.dataset.pane;
      const source = document.getElementById(pre.dataset.source);
      const code = source && source.querySelector("pre code");
      root.dataset.unpacking = String(Number(root.dataset.unpacking) + 1);
      const job = (code ? payloadText(code) : Promise.reject(new Error("its payload is missing"))).then((text) => {
        const at = new Map(); // line -> the nodes or kernels on it
        for (const [name, lines] of Object.entries(map[role] || {})) {
          if (!Array.isArray(lines)) continue;
          for (const n of lines) {
            if (!at.has(n)) at.set(n, []);
            at.get(n).push(name);
          }
        }
        const frag = document.createDocumentFragment();
        const spans = [];
        text.split("\n").forEach((s, i) => {
          const span = document.createElement("span"); // a line: a block of its own (CSS)
          span.className = at.has(i + 1) ? "ln mark" : "ln";
          span.textContent = s;
          frag.appendChild(span);
          spans.push(span);
        });
        pre.textContent = "";
        pre.appendChild(frag);
        panes[role] = { pre, at, spans };
      }, (err) => {
        pre.textContent = `(not shown: ${err.message})`;
      }).finally(() => {
        root.dataset.unpacking = String(Number(root.dataset.unpacking) - 1);
      });
      jobs.push(job);
    }
    view.addEventListener("click", (e) => {
      const span = e.target instanceof Element ? e.target.closest("span.ln") : null;
      const pre = span && span.closest("pre.prov-text");
      if (!pre || !panes[pre.dataset.pane]) return;
      const pane = panes[pre.dataset.pane];
      const items = pane.at.get(pane.spans.indexOf(span) + 1);
      if (items) select(view, map, panes, pre.dataset.pane, items);
    });
  }

  function select(view, map, panes, role, items) {
    const chosen = LINKS[role](map, items);
    const said = [];
    for (const [name, pane] of Object.entries(panes)) {
      const names = chosen[name] || [];
      const lines = new Set();
      for (const n of names) for (const line of own(map[name], n)) lines.add(line);
      let first = null;
      pane.spans.forEach((span, i) => {
        const on = lines.has(i + 1);
        span.classList.toggle("hl", on);
        if (on && first === null) first = span;
      });
      if (first) pane.pre.scrollTop = first.offsetTop - pane.pre.offsetTop - 24;
      if (names.length) said.push(`${PANE_WORDS[name]}: ${names.join(", ")}`);
    }
    const out = $(".prov-said", view);
    if (out) out.textContent = said.join("; ");
  }

  document.addEventListener("toggle", (e) => {
    const d = e.target;
    if (d instanceof HTMLDetailsElement && d.open && d.classList.contains("prov")) buildView(d);
  }, true);

  function colourIn(details) {
    for (const code of $$("code[data-lang]", details)) {
      if (code.closest("details") === details) colour(code);
    }
  }

  document.addEventListener("toggle", (e) => {
    const d = e.target;
    if (d instanceof HTMLDetailsElement && d.open) colourIn(d);
  }, true);

  function visible(el) {
    for (let d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      if (!d.open) return false;
    }
    return true;
  }
  for (const code of $$("code[data-lang]")) if (visible(code)) colour(code);

  // Links to a compile (or to anything inside closed details) open what they point at.
  function reveal(id) {
    const el = id && document.getElementById(id);
    if (!el) return;
    for (let e = el; e; e = e.parentElement) if (e instanceof HTMLDetailsElement) e.open = true;
    const own = el.querySelector(":scope > details");
    if (own) own.open = true;
  }
  document.addEventListener("click", (e) => {
    const a = e.target instanceof Element ? e.target.closest("a") : null;
    const href = a ? a.getAttribute("href") : null;
    if (href && href.startsWith("#") && a.id !== "dl-trace") reveal(decodeURIComponent(href.slice(1)));
  });
  window.addEventListener("hashchange", () => {
    reveal(decodeURIComponent(location.hash.slice(1)));
  });
  if (location.hash) {
    reveal(decodeURIComponent(location.hash.slice(1)));
    const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }

  for (const [id, open] of [["open-all", true], ["close-all", false]]) {
    const b = document.getElementById(id);
    if (b) b.addEventListener("click", () => {
      for (const d of $$("details.compile-d")) d.open = open;
    });
  }

  // The compile phases as a Chrome trace, built from the timelines on this page.
  const dl = $("#dl-trace");
  if (dl) {
    dl.addEventListener("click", () => {
      const events = [];
      const names = new Map(); // trace pid -> the log (and rank) it stands for
      const procs = new Map(); // log and logged pid -> trace pid
      for (const tl of $$("svg.tl[data-cid]")) {
        const key = tl.dataset.log + "\u0000" + tl.dataset.pid;
        let pid = procs.get(key);
        if (pid === undefined) {
          // Ranks in separate containers often log the same pid: each keeps a process of its
          // own, numbered above any real pid.
          pid = Number(tl.dataset.pid) || 0;
          while (names.has(pid)) pid += 4194304;
          procs.set(key, pid);
          names.set(pid, tl.dataset.log);
        }
        for (const bar of $$("svg.ph", tl)) {
          const ev = {
            name: bar.querySelector("text").textContent, cat: "dynamo_timed", ts: Number(bar.dataset.ts),
            pid, tid: 0, args: { compile_id: tl.dataset.cid },
          };
          if (bar.dataset.dur === "") ev.ph = "B";
          else {
            ev.ph = "X";
            ev.dur = Number(bar.dataset.dur);
          }
          events.push(ev);
        }
      }
      for (const [pid, name] of names) events.push({ name: "process_name", ph: "M", pid, tid: 0, args: { name } });
      const blob = new Blob([JSON.stringify({ traceEvents: events, displayTimeUnit: "ms", otherData: { generator: "tlview" } })],
        { type: "application/json" });
      if (dl.dataset.url) URL.revokeObjectURL(dl.dataset.url);
      dl.dataset.url = URL.createObjectURL(blob);
      dl.href = dl.dataset.url;
    });
  }
})();
