/* mcprec view: sessions, a session's timeline, a message, search and diff, over the JSON API
 * (docs/view.md) or, in a self-contained file, over the same answers embedded in the page. */
"use strict";

(function () {
  const Tree = globalThis.McprecTree;
  const { VirtualList } = globalThis.McprecList;
  const ROW = 26;
  const PAGE = 200;

  // --- small helpers ----------------------------------------------------------------------------

  /** An element: h("div.cls", {title: "x", onclick: f}, child, "text", ...). */
  function h(spec, attrs, ...kids) {
    const [tag, ...classes] = spec.split(".");
    const e = document.createElement(tag || "div");
    if (classes.length) e.className = classes.join(" ");
    if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
      kids.unshift(attrs);
      attrs = null;
    }
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k in e && typeof v !== "string") e[k] = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  function fmtTime(ns) {
    if (ns === null || ns === undefined) return "";
    const ms = ns / 1e6;
    if (ms < 1000) return `${ms.toFixed(1)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(3)} s`;
    const m = Math.floor(s / 60);
    return `${m}:${(s - m * 60).toFixed(3).padStart(6, "0")}`;
  }

  function fmtDur(ns) {
    if (ns === null || ns === undefined) return "";
    if (ns < 1e6) return `${Math.round(ns / 1e3)} µs`;
    if (ns < 1e9) return `${(ns / 1e6).toFixed(1)} ms`;
    return `${(ns / 1e9).toFixed(2)} s`;
  }

  function fmtSize(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
    return `${(n / 1024 / 1024).toFixed(1)} MB`;
  }

  function fmtStamp(iso) {
    return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
  }

  const ARROWS = { c2s: "→", s2c: "←" };
  const DIR_TITLE = { c2s: "client to server", s2c: "server to client" };

  async function copy(text, button) {
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch (e) {
      const area = h("textarea.offscreen", { readonly: true });
      area.value = text;
      document.body.appendChild(area);
      area.select();
      try { ok = document.execCommand("copy"); } catch (e2) { ok = false; }
      area.remove();
    }
    if (button) {
      const was = button.textContent;
      button.textContent = ok ? "copied" : "copy failed";
      setTimeout(() => { button.textContent = was; }, 1200);
    }
  }

  // --- the data: a server, or the answers embedded in this file ----------------------------------

  const embedded = document.getElementById("mcprec-data");
  const FILE = embedded ? JSON.parse(embedded.textContent) : null;

  class ApiError extends Error {}

  async function live(path, params) {
    const url = new URL(path, location.href);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, v);
    }
    const r = await fetch(url, { headers: { accept: "application/json" } });
    const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
    if (!r.ok) throw new ApiError(body.error || `HTTP ${r.status}`);
    return body;
  }

  /** The API over a file's embedded answers: the same paths, the same JSON. */
  function fromFile(path, params) {
    const d = FILE;
    const p = params || {};
    const missing = (what) => { throw new ApiError(`${what} is not in this file; open the cassette with \`mcprec view\``); };
    if (path === "/api/cassette") return d.cassette;
    if (path === "/api/sessions") return { sessions: d.sessions };
    if (path === "/api/search") return fileSearch(d, p.q || "");
    if (path === "/api/diff") {
      return d.diffs[`${p.a}:${p.b}`] || missing("This diff");
    }
    const m = /^\/api\/sessions\/(\d+)(?:\/(timeline|locate)|\/messages\/(\d+)(?:\/(during))?)?$/.exec(path);
    if (!m) missing(path);
    const sid = m[1];
    const info = d.session[sid] || missing(`Session #${sid}`);
    if (m[2] === "timeline") {
      const all = d.timeline[sid] || missing(`The timeline of session ${info.name}`);
      const start = Number(p.start || 0);
      return { session: Number(sid), total: all.length, start, duration_ns: info.duration_ns,
        entries: all.slice(start, start + Number(p.count || 100)) };
    }
    if (m[2] === "locate") {
      const at = (d.locate[sid] || {})[p.seq];
      return at ? Object.assign({ session: Number(sid), seq: Number(p.seq) }, at) : missing(`Message ${p.seq}`);
    }
    if (m[3] === undefined) return info;
    if (m[4] === "during") {
      return (d.during[sid] || {})[m[3]] || { session: Number(sid), request: Number(m[3]), total: 0, entries: [] };
    }
    return (d.messages[sid] || {})[m[3]] || missing(`Message ${m[3]} of session ${info.name}`);
  }

  function fileSearch(d, text) {
    const q = parseQuery(text);
    const hits = [];
    if (!q.text.length && !Object.keys(q.fields).length) return { query: text, hits, next: null, scanned: 0 };
    const terms = q.text.map((t) => t.toLowerCase());
    let scanned = 0;
    for (const s of d.sessions) {
      if (q.fields.session && s.name !== q.fields.session) continue;
      const msgs = d.messages[String(s.id)] || {};
      for (const seq of Object.keys(msgs).map(Number).sort((x, y) => x - y)) {
        const m = msgs[seq];
        scanned++;
        if (!matches(m, q, terms)) continue;
        const text2 = m.text || "";
        const at = terms.length ? text2.toLowerCase().indexOf(terms[0]) : 0;
        const from = Math.max(0, at - 60);
        hits.push({ session: s.id, session_name: s.name, seq: m.seq, t: m.t, dir: m.dir,
          kind: m.kind, method: m.method, id: m.id, size: m.size,
          snippet: m.secrets && m.secrets.length ? null : text2.slice(from, from + 160),
          snippet_start: from, secrets: m.secrets || [] });
        if (hits.length >= 500) return { query: text, terms: q.text, fields: q.fields, hits, next: null, scanned };
      }
    }
    return { query: text, terms: q.text, fields: q.fields, hits, next: null, scanned };
  }

  const DIRS = { c2s: "c2s", client: "c2s", client_to_server: "c2s", s2c: "s2c", server: "s2c", server_to_client: "s2c" };

  function matches(m, q, terms) {
    const f = q.fields;
    if (f.method) {
      if (f.method.endsWith("*") ? !(m.method || "").startsWith(f.method.slice(0, -1)) : m.method !== f.method) return false;
    }
    if (f.kind && m.kind !== f.kind) return false;
    if (f.dir && m.dir !== (DIRS[f.dir.toLowerCase()] || f.dir)) return false;
    if (f.tool) {
      if (m.method !== "tools/call" || m.kind !== "request" || !m.text) return false;
      try { if (JSON.parse(m.text).params.name !== f.tool) return false; } catch (e) { return false; }
    }
    if (!terms.length) return true;
    if (m.text === null || m.text === undefined) return false;
    const low = m.text.toLowerCase();
    return terms.every((t) => low.includes(t));
  }

  /** The search grammar of mcprec.cassette.views.parse_query. */
  function parseQuery(text) {
    const out = { text: [], fields: {} };
    const TERM = /(?:(\w+):)?(?:"((?:[^"\\]|\\.)*)"(?=\s|$)|(\S+))/g;
    const FIELDS = ["method", "tool", "kind", "dir", "session"];
    let m;
    while ((m = TERM.exec(text)) !== null) {
      const name = m[1], quoted = m[2], bare = m[3];
      const value = quoted !== undefined ? quoted.replace(/\\"/g, '"') : bare;
      if (name !== undefined && FIELDS.includes(name.toLowerCase())) out.fields[name.toLowerCase()] = value;
      else out.text.push(name !== undefined && quoted === undefined ? m[0] : value);
    }
    out.text = out.text.filter(Boolean);
    return out;
  }

  const api = (path, params) => FILE ? Promise.resolve().then(() => fromFile(path, params)) : live(path, params);

  // --- routing ----------------------------------------------------------------------------------

  const main = document.getElementById("main");
  let current = null; // the view on screen: {dispose()}
  let generation = 0;

  function parseHash() {
    const raw = location.hash.replace(/^#/, "") || "/";
    const q = raw.indexOf("?");
    const path = q < 0 ? raw : raw.slice(0, q);
    const params = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
    return { parts: path.split("/").filter(Boolean), params };
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  async function route() {
    const { parts, params } = parseHash();
    const gen = ++generation;
    if (current && current.dispose) current.dispose();
    current = null;
    main.replaceChildren();
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.remove("active");
    if (parts[0] !== "search") document.getElementById("search-input").value = "";
    try {
      if (parts[0] === "s" && parts[1]) {
        current = await timelineView(gen, Number(parts[1]), parts[2] === "m" ? Number(parts[3]) : null);
      } else if (parts[0] === "search") {
        current = await searchView(gen, params.get("q") || "");
      } else if (parts[0] === "diff") {
        nav("diff");
        current = await diffView(gen, params.get("a"), params.get("b"), params.get("x"));
      } else {
        nav("sessions");
        current = await sessionsView(gen, params.get("f") || "");
      }
    } catch (e) {
      if (gen === generation) main.replaceChildren(failure(e));
    }
  }

  function nav(name) {
    const a = document.querySelector(`[data-nav="${name}"]`);
    if (a) a.classList.add("active");
  }

  function failure(e) {
    return h("div.error", { role: "alert" }, e instanceof ApiError ? e.message : `Something went wrong: ${e.message || e}`);
  }

  function secretWarning(kinds, reveal, what) {
    const box = h("div.warning", { role: "alert" },
      h("strong", "Looks like a secret: "), kinds.join(", "), ". ",
      `mcprec scan would flag ${what || "this"}; it should have been redacted when it was recorded ` +
      "(see `mcprec redact`). ");
    if (reveal) {
      box.appendChild(h("button.reveal", { type: "button", onclick: () => { box.remove(); reveal(); } }, "Show anyway"));
    } else {
      box.appendChild(document.createTextNode("It is left out of this file."));
    }
    return box;
  }

  // --- sessions ---------------------------------------------------------------------------------

  let sessionCache = null;

  async function sessions() {
    if (!sessionCache) sessionCache = (await api("/api/sessions")).sessions;
    return sessionCache;
  }

  function serverLabel(s) {
    return [s.server && s.server.name, s.server && s.server.version].filter(Boolean).join(" ");
  }

  async function sessionsView(gen, filter) {
    const [info, list] = await Promise.all([api("/api/cassette"), sessions()]);
    if (gen !== generation) return null;
    const picked = new Set();
    const input = h("input.filter", { type: "search", placeholder: "Filter sessions", value: filter, "aria-label": "Filter sessions" });
    const diffButton = h("button", { type: "button", disabled: true, onclick: () => {
      const [a, b] = [...picked];
      go(`#/diff?a=${a}&b=${b}`);
    } }, "Diff the two selected");
    const body = h("tbody");
    const table = h("table.sessions", h("thead", h("tr",
      ["", "Session", "Started", "Transport", "Target", "Server", "Protocol", "Messages", "Duration", "Status"].map((c) => h("th", c)))), body);
    const count = h("span.dim");
    const draw = () => {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      body.replaceChildren();
      let shown = 0;
      for (const s of list.slice().reverse()) {
        const hay = [s.name, s.target, serverLabel(s), s.status, s.transport, s.protocol_version, s.started_at].join(" ").toLowerCase();
        if (!words.every((w) => hay.includes(w))) continue;
        shown++;
        const box = h("input", { type: "checkbox", "aria-label": `Select ${s.name} for a diff`, checked: picked.has(s.id),
          onclick: (ev) => ev.stopPropagation(),
          onchange: (ev) => {
            if (ev.target.checked) picked.add(s.id); else picked.delete(s.id);
            while (picked.size > 2) picked.delete(picked.values().next().value);
            diffButton.disabled = picked.size !== 2;
            draw();
          } });
        const secret = s.secrets && s.secrets.length;
        body.appendChild(h("tr.session", { dataset: { id: s.id, name: s.name }, tabindex: 0,
          onclick: () => go(`#/s/${s.id}`),
          onkeydown: (ev) => { if (ev.key === "Enter") go(`#/s/${s.id}`); } },
          h("td", box),
          h("td.name", h("a", { href: `#/s/${s.id}` }, s.name)),
          h("td.nowrap", fmtStamp(s.started_at)),
          h("td", s.transport),
          h("td.target", secret ? h("span.secret", { title: s.secrets.join(", ") }, "⚠ hidden: looks like a secret") : s.target),
          h("td", serverLabel(s)),
          h("td", s.protocol_version || ""),
          h("td.num", String(s.messages)),
          h("td.num", fmtDur(s.duration_ns)),
          h("td", h(`span.status.${s.status}`, s.status))));
      }
      count.textContent = `${shown} of ${list.length} session${list.length === 1 ? "" : "s"}`;
    };
    input.addEventListener("input", () => {
      history.replaceState(null, "", input.value ? `#/?f=${encodeURIComponent(input.value)}` : "#/");
      draw();
    });
    draw();
    main.replaceChildren(h("section.page",
      h("div.page-head",
        h("h1", "Sessions"),
        h("span.dim", info.path, " · format ", String(info.format_version), FILE ? " · saved file" : " · read-only")),
      h("div.toolbar", input, count, diffButton),
      list.length ? h("div.table-wrap", table) : h("p.empty", "This cassette holds no sessions yet.")));
    input.focus();
    return null;
  }

  // --- a session's timeline ---------------------------------------------------------------------

  async function timelineView(gen, sid, seq) {
    const s = await api(`/api/sessions/${sid}`);
    if (gen !== generation) return null;
    document.title = `${s.name} · mcprec view`;
    const pages = new Map(); // page number -> entries
    const loading = new Map(); // page number -> its fetch, while in flight
    const expanded = new Map(); // entry index -> {entries, total}
    // entries: null while the server still builds the session's outline; the pages of its
    // head come meanwhile, and the whole count a little later
    let total = s.entries === null ? 0 : s.entries;
    let counting = null;
    let duration = s.duration_ns || 1;
    let selected = null; // {index: display index, seq}
    let disposed = false;

    const head = sessionHead(s);
    const listHost = h("div.list-host");
    const detail = h("aside.detail", { "aria-label": "Message" }, h("p.empty", "Select a message to see it here."));
    // the waterfall's scale: the whole session, or the time of the rows in sight
    let zoom = false;
    let waterfall = { from: 0, span: duration };
    const scaleFrom = h("span", "0"), scaleTo = h("span", fmtDur(duration));
    const zoomButton = h("button.mini.zoom", { type: "button", title: "Scale the waterfall to the whole session, or to the rows in sight",
      onclick: () => { zoom = !zoom; zoomButton.textContent = zoom ? "scale: rows in sight" : "scale: session"; list.schedule(); } }, "scale: session");
    const scale = h("div.scale", scaleFrom, zoomButton, scaleTo);
    function frame(lo, hi) {
      if (!zoom) {
        waterfall = { from: 0, span: duration };
      } else {
        let from = Infinity, to = -Infinity;
        for (let d = lo; d < hi; d++) {
          const at = locate(d);
          const e = entryAt(at.entry);
          const item = e && (at.child < 0 ? e : (expanded.get(at.entry).entries[at.child]));
          if (!item) continue;
          from = Math.min(from, item.t);
          to = Math.max(to, item.t + (item.answer ? item.answer.latency_ns : 0));
        }
        waterfall = from < to ? { from, span: to - from } : { from: 0, span: duration };
      }
      scaleFrom.textContent = waterfall.from ? fmtTime(waterfall.from) : "0";
      scaleTo.textContent = fmtTime(waterfall.from + waterfall.span);
    }
    const columns = h("div.row.columns", h("span.c-seq", "#"), h("span.c-time", "time"), h("span.c-dir", ""),
      h("span.c-kind", "kind"), h("span.c-method", "method"), h("span.c-id", "id"), h("span.c-size", "size"),
      h("span.c-lat", "latency"), h("span.c-fall", scale));
    main.replaceChildren(h("section.timeline", head,
      h("div.split", h("div.list-pane", columns, listHost), detail)));

    if (s.file_note) listHost.appendChild(h("p.empty", s.file_note));

    // display rows: the entries, with the children of expanded ones after them
    const keys = () => [...expanded.keys()].sort((a, b) => a - b);
    const displayCount = () => total + [...expanded.values()].reduce((n, e) => n + e.entries.length, 0);
    function locate(d) {
      let offset = 0;
      for (const k of keys()) {
        const n = expanded.get(k).entries.length;
        if (d <= k + offset) return { entry: d - offset, child: -1 };
        if (d <= k + offset + n) return { entry: k, child: d - offset - k - 1 };
        offset += n;
      }
      return { entry: d - offset, child: -1 };
    }
    function displayOf(entry) {
      let offset = 0;
      for (const k of keys()) {
        if (k >= entry) break;
        offset += expanded.get(k).entries.length;
      }
      return entry + offset;
    }
    const entryAt = (i) => { const p = pages.get(Math.floor(i / PAGE)); return p ? p[i % PAGE] : undefined; };

    function awaitCount() {
      if (counting) return;
      counting = (async () => {
        for (let wait = 100; !disposed; wait = Math.min(1000, wait * 2)) {
          await new Promise((done) => setTimeout(done, wait));
          const again = await api(`/api/sessions/${sid}`);
          if (again.entries !== null) {
            if (!disposed && again.entries !== total) { total = again.entries; list.setCount(displayCount()); }
            return;
          }
        }
      })().catch(() => {}).finally(() => { counting = null; });
    }

    function fetchPage(n) {
      if (pages.has(n)) return Promise.resolve();
      if (!loading.has(n)) loading.set(n, loadPage(n));
      return loading.get(n);
    }

    async function loadPage(n) {
      try {
        const r = await api(`/api/sessions/${sid}/timeline`, { start: n * PAGE, count: PAGE });
        if (disposed) return;
        if (r.total !== null || r.entries.length === PAGE) pages.set(n, r.entries);
        const known = r.total !== null ? r.total : Math.max(total, r.known);
        if (known !== total) { total = known; list.setCount(displayCount()); }
        if (r.total === null) awaitCount();
        if (r.duration_ns && r.duration_ns !== duration) {
          duration = r.duration_ns;
        }
        list.schedule();
      } catch (e) {
        if (!disposed) detail.replaceChildren(failure(e));
      } finally {
        loading.delete(n);
      }
    }

    const list = new VirtualList(listHost, {
      rowHeight: ROW,
      before: frame,
      render: (d) => {
        const at = locate(d);
        const e = entryAt(at.entry);
        if (!e) return h("div.row.placeholder", h("span.c-seq", "…"));
        const item = at.child < 0 ? e : expanded.get(at.entry).entries[at.child];
        if (!item) return h("div.row.placeholder", h("span.c-seq", "…"));
        const row = entryRow(item, at.child >= 0, at.child < 0 && expanded.has(at.entry), waterfall);
        if (selected && selected.display === d) row.classList.add("selected");
        row.addEventListener("click", (ev) => {
          if (ev.target.closest(".twisty")) toggle(at.entry);
          else select(d, item);
        });
        return row;
      },
      onRange: (lo, hi) => {
        const a = locate(lo).entry, b = locate(Math.max(lo, hi - 1)).entry;
        for (let n = Math.floor(a / PAGE); n <= Math.floor(b / PAGE); n++) fetchPage(n);
      },
    });
    list.setCount(total);
    list.scroller.setAttribute("aria-label", "Timeline");
    list.scroller.addEventListener("keydown", (ev) => {
      if (!["ArrowDown", "ArrowUp", "j", "k", "Enter"].includes(ev.key)) return;
      ev.preventDefault();
      const cur = selected ? selected.display : -1;
      if (ev.key === "Enter") { if (selected) { const at = locate(cur); if (at.child < 0) toggle(at.entry); } return; }
      const next = Math.max(0, Math.min(displayCount() - 1, cur + (ev.key === "ArrowDown" || ev.key === "j" ? 1 : -1)));
      const at = locate(next);
      const e = entryAt(at.entry);
      const item = e && (at.child < 0 ? e : expanded.get(at.entry).entries[at.child]);
      if (item) { select(next, item); list.show(next); }
    });

    async function toggle(entry) {
      const e = entryAt(entry);
      if (!e || !e.children) return;
      if (expanded.has(entry)) {
        expanded.delete(entry);
        if (selected && selected.entry === entry && selected.child >= 0) selected = null;
      } else {
        const r = await api(`/api/sessions/${sid}/messages/${e.seq}/during`);
        if (disposed) return;
        expanded.set(entry, r);
      }
      if (selected) selected.display = selected.entry === undefined ? selected.display : displayOf(selected.entry) + (selected.child + 1);
      list.setCount(displayCount());
    }

    function select(d, item) {
      const at = locate(d);
      selected = { display: d, entry: at.entry, child: at.child, seq: item.seq };
      list.schedule();
      if (item.type === "stderr") {
        detail.replaceChildren(stderrDetail(item));
        return;
      }
      history.replaceState(null, "", `#/s/${sid}/m/${item.seq}`);
      showMessage(detail, sid, item.seq, (target) => jump(target));
    }

    async function jump(target) {
      const where = await api(`/api/sessions/${sid}/locate`, { seq: target });
      if (disposed) return;
      await fetchPage(Math.floor(where.index / PAGE));
      let d = displayOf(where.index);
      const e = entryAt(where.index);
      if (where.chain.length > 1 && e && e.children && e.seq !== where.chain[0] &&
          !(e.answer && e.answer.seq === where.chain[0])) {
        if (!expanded.has(where.index)) {
          expanded.set(where.index, await api(`/api/sessions/${sid}/messages/${e.seq}/during`));
          if (disposed) return;
          list.setCount(displayCount());
        }
        const kids = expanded.get(where.index).entries;
        const k = kids.findIndex((c) => c.seq === where.chain[0] || (c.answer && c.answer.seq === where.chain[0]) ||
          c.seq === where.chain[1]);
        if (k >= 0) d = displayOf(where.index) + 1 + k;
      }
      selected = { display: d, entry: locate(d).entry, child: locate(d).child, seq: target };
      list.show(d);
      history.replaceState(null, "", `#/s/${sid}/m/${target}`);
      showMessage(detail, sid, target, (t) => jump(t));
    }

    if (seq !== null && !Number.isNaN(seq)) {
      jump(seq).catch((e) => detail.replaceChildren(failure(e)));
    }
    setTimeout(() => list.scroller.focus(), 0);
    return { dispose: () => { disposed = true; } };
  }

  function sessionHead(s) {
    const secret = s.secrets && s.secrets.length;
    const facts = h("dl.facts",
      fact("Started", fmtStamp(s.started_at)),
      fact("Transport", s.transport),
      fact("Target", secret ? "hidden (see the warning)" : s.target),
      fact("Server", serverLabel(s) || "?"),
      fact("Client", [s.client && s.client.name, s.client && s.client.version].filter(Boolean).join(" ") || "?"),
      fact("Protocol", s.protocol_version || "?"),
      fact("Messages", `${s.messages}${s.stderr_lines ? ` + ${s.stderr_lines} stderr lines` : ""}`),
      fact("Duration", fmtDur(s.duration_ns)),
      s.exit_code !== null && s.exit_code !== undefined ? fact("Exit code", String(s.exit_code)) : null,
      Object.keys(s.tags || {}).length ? fact("Tags", Object.entries(s.tags).map(([k, v]) => `${k}=${v}`).join(" ")) : null);
    const box = h("div.session-head",
      h("div.title-line",
        h("h1", s.name),
        h(`span.status.${s.status}`, s.status),
        h("span.spacer"),
        h("a.button", { href: `#/search?q=${encodeURIComponent(`session:${quoteIfNeeded(s.name)} `)}` }, "Search this session"),
        h("a.button", { href: `#/diff?a=${s.id}` }, "Diff with…")),
      facts);
    if (secret) {
      box.appendChild(secretWarning(s.secrets, s.withheld ? null : () => {
        facts.querySelector("[data-fact=Target]").textContent = s.target;
      }, "this session's target, tags or info"));
    }
    return box;
  }

  function quoteIfNeeded(text) {
    return /\s|"/.test(text) ? `"${text.replace(/"/g, '\\"')}"` : text;
  }

  function fact(name, value) {
    return h("div.fact", h("dt", name), h("dd", { dataset: { fact: name } }, value));
  }

  /** A row of the timeline; `scale` ({from, span} in ns) places its waterfall bar. */
  function entryRow(e, child, open, scale) {
    if (e.type === "stderr") {
      const secret = e.secrets && e.secrets.length;
      return h("div.row.stderr", { title: "stderr" },
        h("span.c-seq", ""), h("span.c-time", fmtTime(e.t)), h("span.c-dir", "!"),
        h("span.c-kind", "stderr"),
        h("span.c-method.wide", secret ? h("span.secret", "⚠ hidden: looks like a secret (select to see)") : e.line));
    }
    const failed = e.transport_failure || (e.answer && e.answer.transport_failure && `transport failure: ${e.answer.transport_failure}`) ||
      (e.answer && e.answer.failure) || (e.kind === "error" && (e.failure || "error"));
    const cls = ["row", "msg", `k-${e.kind}`, e.dir];
    if (child) cls.push("child");
    if (failed) cls.push("failed");
    if (e.transport_failure) cls.push("transport");
    const twisty = e.children && !child
      ? h("button.twisty", { type: "button", title: `${e.children} message(s) sent while handling this request`,
        "aria-expanded": String(open) }, open ? "▾" : "▸", h("span.count", String(e.children)))
      : child ? null : h("span.twisty");
    const method = e.transport_failure
      ? h("span.c-method", h("span.fail", "transport failure: ", e.transport_failure))
      : h("span.c-method", twisty, h("span.m", e.method || (e.kind === "invalid" ? "(not JSON-RPC)" : "—")),
        e.label ? h("span.label", " ", e.label) : null,
        failed && !e.transport_failure ? h("span.fail", " ", typeof failed === "string" ? failed : "failed") : null,
        e.truncated ? h("span.badge", `truncated: ${fmtSize(e.truncated)} sent`) : null);
    const latency = e.answer ? e.answer.latency_ns : null;
    const bar = h("span.bar");
    const left = Math.max(0, Math.min(100, ((e.t - scale.from) / scale.span) * 100));
    bar.style.left = `${left}%`;
    if (latency !== null) {
      bar.style.width = `${Math.max(0, Math.min(100 - left, (latency / scale.span) * 100))}%`;
      bar.classList.add("span");
    } else {
      bar.classList.add("tick");
    }
    return h(`div.${cls.join(".")}`, { title: DIR_TITLE[e.dir] || "" },
      h("span.c-seq", String(e.seq)),
      h("span.c-time", fmtTime(e.t)),
      h("span.c-dir", { title: DIR_TITLE[e.dir] || "" }, ARROWS[e.dir] || "?"),
      h("span.c-kind", e.kind),
      method,
      h("span.c-id", e.id === null || e.id === undefined ? "" : e.id),
      h("span.c-size", { title: e.answer ? `${fmtSize(e.size)} + answer ${fmtSize(e.answer.size)}` : "" },
        fmtSize(e.size + (e.answer ? e.answer.size : 0))),
      h("span.c-lat", latency === null ? "" : fmtDur(latency)),
      h("span.c-fall", bar));
  }

  function stderrDetail(e) {
    const body = h("pre.raw");
    const show = () => { body.textContent = e.line === null ? "" : e.line; };
    const box = h("div.message", h("h2", "stderr"), h("p.meta", `at ${fmtTime(e.t)}`));
    if (e.secrets && e.secrets.length) box.appendChild(secretWarning(e.secrets, e.withheld ? null : show, "this line"));
    else show();
    box.appendChild(body);
    return box;
  }

  // --- one message ------------------------------------------------------------------------------

  async function showMessage(pane, sid, seq, jump) {
    pane.replaceChildren(h("p.loading", "Loading…"));
    const token = (pane.token = (pane.token || 0) + 1);
    let m;
    try {
      m = await api(`/api/sessions/${sid}/messages/${seq}`);
    } catch (e) {
      if (pane.token === token) pane.replaceChildren(failure(e));
      return;
    }
    if (pane.token !== token) return;
    const links = [];
    const link = (text, target) => h("a", { href: `#/s/${sid}/m/${target}`, onclick: (ev) => { ev.preventDefault(); jump(target); } }, text);
    if (m.reply_to !== null && m.reply_to !== undefined) links.push(link(`answers request #${m.reply_to}`, m.reply_to));
    if (m.context_seq !== null && m.context_seq !== undefined && m.context_seq !== m.reply_to) links.push(link(`sent while handling #${m.context_seq}`, m.context_seq));
    if (m.follows !== null && m.follows !== undefined && m.follows >= 0) links.push(link(`sent after client message #${m.follows}`, m.follows));
    if (m.waits_for !== null && m.waits_for !== undefined) links.push(link(`waited for #${m.waits_for}`, m.waits_for));
    const title = [m.method || m.kind, m.label].filter(Boolean).join(" ");
    const box = h("div.message",
      h("h2", title),
      h("p.meta",
        `#${m.seq} · `, h("span", { title: DIR_TITLE[m.dir] }, `${ARROWS[m.dir]} ${m.dir}`), ` · ${m.kind}`,
        m.id !== null && m.id !== undefined ? ` · id ${m.id}` : "", ` · ${fmtSize(m.size)} · at ${fmtTime(m.t)}`),
      links.length ? h("p.links", links.map((l, i) => [i ? " · " : "", l])) : null,
      section(m, m.kind === "request" ? `Request #${m.seq}` : `Message #${m.seq}`, sid));
    pane.replaceChildren(box);
    if (m.kind === "request" && m.answer_seq !== null && m.answer_seq !== undefined) {
      const slot = h("div.slot", h("p.loading", "Loading the answer…"));
      box.appendChild(slot);
      api(`/api/sessions/${sid}/messages/${m.answer_seq}`).then((a) => {
        if (pane.token !== token) return;
        const latency = a.t - m.t;
        slot.replaceChildren(section(a, `Answer #${a.seq} · ${a.kind} · after ${fmtDur(latency)}`, sid));
      }, (e) => slot.replaceChildren(failure(e)));
    }
    if (m.kind === "request" && m.dir === "c2s") {
      api(`/api/sessions/${sid}/messages/${m.seq}/during`).then((r) => {
        if (pane.token !== token || !r.total) return;
        box.appendChild(h("div.during", h("h3", `While handling it, the server sent ${r.total} message${r.total === 1 ? "" : "s"}`),
          h("ul", r.entries.map((c) => h("li", link(`#${c.seq}`, c.seq), ` ${fmtTime(c.t)} ${c.kind} ${c.method || ""} ${c.label || ""}`,
            c.answer ? [" → answered by ", link(`#${c.answer.seq}`, c.answer.seq)] : null))),
          r.total > r.entries.length ? h("p.dim", `… and ${r.total - r.entries.length} more in the timeline`) : null));
      }, () => {});
    }
  }

  /** A message's body: tree, raw text and HTTP details, media, copy buttons, secrets guarded. */
  function section(m, heading, sid) {
    const body = h("div.section-body");
    const tabs = h("div.tabs", { role: "tablist" });
    const box = h("section.msg-section", { dataset: { seq: m.seq } }, h("div.section-head", h("h3", heading), tabs), body);
    if (m.withheld) {
      body.appendChild(secretWarning(m.secrets, null, "this message"));
      return box;
    }
    let node = null;
    let parseError = null;
    if (m.complete && m.utf8) {
      try { node = Tree.parse(m.text); } catch (e) { parseError = e.message; }
    }
    const views = {
      Tree: () => node ? [mediaOf(node), Tree.render(node, { copy })] : h("p.dim", parseError
        ? `Not JSON (${parseError}): see Raw.` : "Too large to show as a tree here: see Raw."),
      Raw: () => [h("pre.raw", m.text), m.complete ? null : h("p.dim", `The first ${fmtSize(m.text.length)} of ${fmtSize(m.size)}.`,
        FILE ? null : [" ", h("a", { href: `api/sessions/${sid}/messages/${m.seq}/raw` }, "Download all of it")])],
    };
    if (m.http) views.HTTP = () => Tree.render(Tree.parse(JSON.stringify(m.http)), { copy, open: 3 });
    let active = node ? "Tree" : "Raw";
    const draw = () => {
      tabs.replaceChildren(...Object.keys(views).map((name) => h("button.tab", { type: "button", role: "tab",
        "aria-selected": String(name === active), onclick: () => { active = name; draw(); } }, name)),
      h("button.tab.copy", { type: "button", title: "Copy the message exactly as recorded",
        onclick: (ev) => copy(m.text, ev.currentTarget) }, "Copy raw"),
      node ? h("button.tab.copy", { type: "button", title: "Copy the message as indented JSON",
        onclick: (ev) => copy(Tree.stringify(node, 2), ev.currentTarget) }, "Copy pretty") : null);
      body.replaceChildren(...[views[active]()].flat().filter(Boolean));
    };
    if (m.secrets && m.secrets.length) {
      body.appendChild(secretWarning(m.secrets, draw, "this message"));
    } else {
      draw();
    }
    if (m.failure) box.classList.add("failed");
    return box;
  }

  function mediaOf(node) {
    const found = Tree.media(node);
    if (!found.length) return null;
    return h("div.media", found.map((f) => f.kind === "image"
      ? h("figure", h("img", { src: `data:${f.mime};base64,${f.data}`, alt: `image at ${f.path}` }), h("figcaption", `${f.mime} · ${f.path}`))
      : h("figure", h("audio", { controls: true, src: `data:${f.mime};base64,${f.data}` }), h("figcaption", `${f.mime} · ${f.path}`))));
  }

  // --- search -----------------------------------------------------------------------------------

  async function searchView(gen, text) {
    const input = document.getElementById("search-input");
    input.value = text;
    const results = h("ol.hits");
    const status = h("p.dim.search-status");
    const more = h("button", { type: "button", hidden: true }, "Search further");
    main.replaceChildren(h("section.page",
      h("div.page-head", h("h1", "Search"), h("span.dim", "text anywhere in a message; method:tools/call, tool:NAME, kind:error, dir:s2c, session:NAME")),
      status, results, more));
    if (!text.trim()) { status.textContent = "Type in the search box above."; input.focus(); return null; }
    let cursor = null, found = 0, scanned = 0, stopped = false;
    const all = await sessions();
    const run = async () => {
      more.hidden = true;
      status.textContent = "Searching…";
      for (;;) {
        const r = await api("/api/search", { q: text, cursor });
        if (gen !== generation || stopped) return;
        found += r.hits.length;
        scanned += r.scanned;
        for (const hit of r.hits) results.appendChild(hitRow(hit, r.terms || [], all));
        cursor = r.next;
        if (!cursor) {
          status.textContent = found ? `${found} message${found === 1 ? "" : "s"} found.` : "Nothing found.";
          return;
        }
        if (r.hits.length) {
          status.textContent = `${found} message${found === 1 ? "" : "s"} so far; ${scanned} searched.`;
          more.hidden = false;
          return;
        }
        status.textContent = `Searching… ${scanned} messages so far.`;
      }
    };
    more.addEventListener("click", () => run().catch((e) => status.replaceChildren(failure(e))));
    run().catch((e) => status.replaceChildren(failure(e)));
    return { dispose: () => { stopped = true; } };
  }

  function hitRow(hit, terms, all) {
    const name = hit.session_name || (all.find((s) => s.id === hit.session) || {}).name || `#${hit.session}`;
    const snippet = h("code.snippet");
    if (hit.snippet === null) {
      snippet.appendChild(h("span.secret", `⚠ not shown: looks like a secret (${hit.secrets.join(", ")}); open the message to see it`));
    } else {
      markTerms(snippet, (hit.snippet_start > 0 ? "…" : "") + hit.snippet, terms);
    }
    return h("li.hit", h("a", { href: `#/s/${hit.session}/m/${hit.seq}` },
      h("span.hit-where", `${name} #${hit.seq}`), " ",
      h("span.dim", `${ARROWS[hit.dir] || ""} ${hit.kind} ${hit.method || ""} · ${fmtTime(hit.t)}`)), snippet);
  }

  function markTerms(into, text, terms) {
    const low = text.toLowerCase();
    const spans = [];
    for (const t of terms) {
      const needle = t.toLowerCase();
      if (!needle) continue;
      for (let i = low.indexOf(needle); i >= 0; i = low.indexOf(needle, i + needle.length)) spans.push([i, i + needle.length]);
    }
    spans.sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [a, b] of spans) {
      if (a < at) continue;
      into.append(text.slice(at, a), h("mark", text.slice(a, b)));
      at = b;
    }
    into.append(text.slice(at));
  }

  // --- diff -------------------------------------------------------------------------------------

  async function diffView(gen, a, b, x) {
    const list = await sessions();
    if (gen !== generation) return null;
    const pick = (name, value) => h("select", { "aria-label": `Session ${name}`, name },
      h("option", { value: "" }, `Session ${name}…`),
      list.slice().reverse().map((s) => h("option", { value: String(s.id), selected: String(s.id) === value }, `${s.name} (${serverLabel(s) || s.transport})`)));
    const selA = pick("A", a), selB = pick("B", b);
    const compare = h("button", { type: "button", onclick: () => {
      if (selA.value && selB.value) go(`#/diff?a=${selA.value}&b=${selB.value}`);
    } }, "Compare");
    const out = h("div.diff-out");
    main.replaceChildren(h("section.page",
      h("div.page-head", h("h1", "Diff"), h("span.dim", "what changed in the server's behaviour from A to B")),
      h("div.toolbar", selA, h("span", "→"), selB, compare), out));
    if (!a || !b) {
      out.appendChild(h("p.empty", "Pick two sessions to compare."));
      return null;
    }
    out.appendChild(h("p.loading", "Comparing…"));
    const d = await api("/api/diff", { a, b });
    if (gen !== generation) return null;
    out.replaceChildren(diffReport(d, Number(a), Number(b), x === null ? null : Number(x)));
    return null;
  }

  function diffReport(d, a, b, open) {
    const equal = d.equal;
    const compatible = d.summary.changes.length - d.breaking;
    const parts = [];
    if (d.breaking) parts.push(`${d.breaking} breaking change${d.breaking === 1 ? "" : "s"}`);
    if (compatible) parts.push(`${compatible} compatible change${compatible === 1 ? "" : "s"}`);
    if (d.exchanges.length) parts.push(`${d.exchanges.length} exchange${d.exchanges.length === 1 ? "" : "s"} differ`);
    if (d.latency_regressions) parts.push(`${d.latency_regressions} latency regression${d.latency_regressions === 1 ? "" : "s"}`);
    const verdict = equal ? `EQUAL${d.ignore.length ? ` after ignoring ${d.ignore.length} path(s)` : ""}` : `DIFFERENT: ${parts.join(", ")}`;
    return h("div.diff",
      h(`div.verdict.${equal ? "equal" : d.breaking ? "breaking" : "different"}`, { role: "status" }, verdict),
      d.warnings.length ? h("ul.warnings", d.warnings.map((w) => h("li", w))) : null,
      h("table.sides", h("thead", h("tr", h("th", ""), h("th", "A"), h("th", "B"))), h("tbody",
        h("tr", h("th", "session"), h("td", h("a", { href: `#/s/${a}` }, d.a.session)), h("td", h("a", { href: `#/s/${b}` }, d.b.session))),
        h("tr", h("th", "server"), h("td", d.a.server || "?"), h("td", d.b.server || "?")),
        h("tr", h("th", "requests"), h("td", String(d.a.requests)), h("td", String(d.b.requests))),
        h("tr", h("th", "cassette"), h("td.dim", d.a.cassette), h("td.dim", d.b.cassette)))),
      d.ignore.length ? h("p.dim", "Ignoring: ", d.ignore.join(", ")) : null,
      summaryPart(d),
      exchangesPart(d, a, b, open),
      latencyPart(d));
  }

  const CATEGORY = { server: "Server", tool: "Tools", resource: "Resources", resource_template: "Resource templates", prompt: "Prompts" };

  function summaryPart(d) {
    const box = h("section.diff-part", h("h2", "Summary"));
    if (!d.summary.changes.length) box.appendChild(h("p.dim", "No changes to the server, tools, resources, templates or prompts."));
    for (const cat of Object.keys(CATEGORY)) {
      const changes = d.summary.changes.filter((c) => c.category === cat);
      if (!changes.length) continue;
      box.appendChild(h("h3", CATEGORY[cat]));
      box.appendChild(h("ul.changes", changes.map((c) => h(`li.change.${c.kind === "added" ? "added" : c.kind === "removed" ? "removed" : "changed"}`,
        c.breaking ? h("span.badge.breaking", "BREAKING") : h("span.badge.compatible", "compatible"), " ",
        c.name ? h("code", c.name) : null, c.name ? ": " : "", c.message))));
    }
    for (const n of d.summary.notes) box.appendChild(h("p.dim", `Note: ${n}`));
    return box;
  }

  function exchangesPart(d, a, b, open) {
    const st = d.stats;
    const box = h("section.diff-part", h("h2", "Exchanges"),
      h("p.dim", `${st.paired} paired (${st.same} same, ${st.changed} changed), ${st.only_a} only in A, ${st.only_b} only in B`));
    if (!d.exchanges.length) { box.appendChild(h("p.dim", "Every answer is the same.")); return box; }
    const list = h("ol.exchanges");
    d.exchanges.forEach((e, i) => {
      const mark = e.status === "only_a" ? "−" : e.status === "only_b" ? "+" : e.error === "appeared" ? "!" : "~";
      const notes = [];
      if (e.status === "only_a") notes.push("only in A (no matching request in B)");
      if (e.status === "only_b") notes.push("only in B (no matching request in A)");
      if (e.error) notes.push(`error ${e.error}: ${e.error_detail || ""}`);
      if (e.unanswered) notes.push(`no answer in ${e.unanswered.toUpperCase()}`);
      if (e.summarized) notes.push("answer changed: see the summary");
      for (const c of e.notifications) notes.push(`notifications: ${c.method} ${c.count_a} → ${c.count_b}`);
      for (const c of e.server_requests) notes.push(`server requests: ${c.method} ${c.count_a} → ${c.count_b}`);
      const panel = h("div.compare-slot");
      const item = h(`li.exchange.${e.status}`, { dataset: { index: i } },
        h("button.exchange-head", { type: "button", "aria-expanded": "false", onclick: () => {
          const opening = !panel.childElementCount;
          panel.replaceChildren();
          item.querySelector(".exchange-head").setAttribute("aria-expanded", String(opening));
          if (opening) {
            panel.appendChild(sideBySide(e, a, b));
            history.replaceState(null, "", `#/diff?a=${a}&b=${b}&x=${i}`);
          }
        } },
        h("span.mark", mark), " ", h("span.m", e.label || "(outside any request)"),
        h("span.dim", ` ${e.seq_a !== null ? `A #${e.seq_a}` : ""}${e.seq_a !== null && e.seq_b !== null ? ", " : ""}${e.seq_b !== null ? `B #${e.seq_b}` : ""}`),
        e.differences.length ? h("span.badge", `${e.differences.length} path${e.differences.length === 1 ? "" : "s"}`) : null),
        notes.length ? h("ul.notes", notes.map((n) => h("li", n))) : null,
        panel);
      list.appendChild(item);
      if (open === i) setTimeout(() => { item.querySelector(".exchange-head").click(); item.scrollIntoView({ block: "start" }); }, 0);
    });
    box.appendChild(list);
    for (const c of d.moved) box.appendChild(h("p.dim", `Note: ${c.count_a} ${c.method} attributed to other requests than in A (timing; not a difference)`));
    return box;
  }

  function sideBySide(e, a, b) {
    const paths = e.differences.filter((x) => x.where === "response").map((x) => x.path);
    const sides = h("div.sides-grid");
    const box = h("div.compare", differencesList(e, sides), sides);
    for (const [label, sid, seq] of [["A", a, e.seq_a], ["B", b, e.seq_b]]) {
      const col = h("div.side", { dataset: { side: label } }, h("h3", `${label}${seq !== null ? ` #${seq}` : ""}`));
      sides.appendChild(col);
      if (seq === null) { col.appendChild(h("p.dim", `No such request in ${label}.`)); continue; }
      (async () => {
        const req = await api(`/api/sessions/${sid}/messages/${seq}`);
        col.appendChild(compareTree(req, `Request`, [], 1));
        if (req.answer_seq === null || req.answer_seq === undefined) { col.appendChild(h("p.dim", "No answer.")); return; }
        const ans = await api(`/api/sessions/${sid}/messages/${req.answer_seq}`);
        col.appendChild(compareTree(ans, `Answer #${ans.seq} · after ${fmtDur(ans.t - req.t)}`, paths));
      })().catch((err) => col.appendChild(failure(err)));
    }
    return box;
  }

  function compareTree(m, heading, paths, open) {
    const box = h("div.compare-msg", h("h4", heading));
    if (m.withheld) { box.appendChild(secretWarning(m.secrets, null, "this message")); return box; }
    const draw = () => {
      let node = null;
      try { node = m.complete ? Tree.parse(m.text) : null; } catch (e) { node = null; }
      box.appendChild(node ? Tree.render(node, { changes: paths, open, copy }) : h("pre.raw", m.text));
    };
    if (m.secrets && m.secrets.length) box.appendChild(secretWarning(m.secrets, draw, "this message"));
    else draw();
    return box;
  }

  function differencesList(e, sides) {
    if (!e.differences.length) return null;
    const show = (v) => v === null || v === undefined ? "" : JSON.stringify(v);
    return h("ul.differences", e.differences.slice(0, 200).map((x) => {
      const secret = x.secrets && x.secrets.length;
      const value = secret ? h("span.secret", "⚠ values hidden: look like a secret") :
        x.kind === "removed" ? [h("span.before", show(x.before)), " removed"] :
          x.kind === "added" ? ["added ", h("span.after", show(x.after))] :
            [h("span.before", show(x.before)), " → ", h("span.after", show(x.after))];
      return h(`li.difference.${x.kind}`,
        x.where !== "response" ? h("span.dim", `${x.where} `) : null,
        h("button.path", { type: "button", title: "Show in both trees", onclick: () => {
          for (const t of sides.querySelectorAll(".compare-msg:last-child .tree")) {
            const n = Tree.reveal(t, x.path);
            if (n) { n.classList.add("flash"); n.scrollIntoView({ block: "center" }); setTimeout(() => n.classList.remove("flash"), 1500); }
          }
        } }, x.path), ": ", value);
    }));
  }

  function latencyPart(d) {
    const box = h("section.diff-part", h("h2", "Latency"),
      h("p.dim", `p50 per method; flagged at ≥ ${d.latency.threshold}× when a side takes ≥ ${d.latency.min_ms} ms`));
    const rows = d.latency.rows;
    if (!rows.length) { box.appendChild(h("p.dim", "No answered requests.")); return box; }
    const max = Math.max(...rows.map((r) => Math.max(r.p50_a_ms || 0, r.p50_b_ms || 0)), 0.001);
    const bar = (v, cls) => { const s = h(`span.lbar.${cls}`); s.style.width = `${((v || 0) / max) * 100}%`; return s; };
    box.appendChild(h("table.latency", h("thead", h("tr", ["method", "n", "A p50", "B p50", "B/A", ""].map((c) => h("th", c)))),
      h("tbody", rows.map((r) => h(`tr${r.flagged ? ".flagged" : ""}`,
        h("td", h("code", r.key)),
        h("td.num", r.count_a === r.count_b ? String(r.count_a) : `${r.count_a}/${r.count_b}`),
        h("td.num", r.p50_a_ms === null ? "-" : r.p50_a_ms.toFixed(1)),
        h("td.num", r.p50_b_ms === null ? "-" : r.p50_b_ms.toFixed(1)),
        h("td.num", r.ratio === null ? "-" : `${r.ratio.toFixed(2)}×${r.flagged ? " slower" : ""}`),
        h("td.bars", h("div.lbars", bar(r.p50_a_ms, "a"), bar(r.p50_b_ms, "b"))))))));
    return box;
  }

  // --- start ------------------------------------------------------------------------------------

  document.getElementById("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = document.getElementById("search-input").value;
    go(`#/search?q=${encodeURIComponent(q)}`);
  });
  api("/api/cassette").then((info) => {
    document.getElementById("cassette-name").textContent = info.name + (FILE ? " (saved file)" : "");
  }, () => {});
  window.addEventListener("hashchange", route);
  if (FILE && !location.hash && FILE.start) history.replaceState(null, "", FILE.start);
  route();
})();
