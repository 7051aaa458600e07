/* mcprec view: the data, from the server's JSON API (docs/view.md) or, in a
 * self-contained file, from the same answers embedded in the page. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { ApiError } = V;

  const embedded = document.getElementById("mcprec-data");

  const FILE = embedded ? JSON.parse(embedded.textContent) : null;

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
    const m = /^\/api\/sessions\/(\d+)(?:\/(timeline|locate|filter)|\/messages\/(\d+)(?:\/(during))?)?$/.exec(path);
    if (!m) missing(path);
    const sid = m[1];
    const info = d.session[sid] || missing(`Session #${sid}`);
    if (m[2] === "timeline") {
      const all = d.timeline[sid] || missing(`The timeline of session ${info.name}`);
      const start = Number(p.start || 0);
      return { session: Number(sid), total: all.length, start, duration_ns: info.duration_ns,
        entries: all.slice(start, start + Number(p.count || 100)) };
    }
    if (m[2] === "filter") {
      const all = d.timeline[sid] || missing(`The timeline of session ${info.name}`);
      const f = parseFilter(p.q || "");
      const msgs = d.messages[sid] || {};
      const indices = [];
      all.forEach((e, i) => {
        const texts = [];
        if (f.words.length) {
          if (e.type === "stderr") texts.push(e.line || "");
          else for (const one of [msgs[e.seq], e.answer && msgs[e.answer.seq]]) if (one && one.text) texts.push(one.text);
        }
        if (matchesFilter(f, e, texts)) indices.push(i);
      });
      return { session: Number(sid), filter: p.q || "", indices, total: all.length };
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

  /** The timeline filter of mcprec.view.data (parse_filter, matches_filter). */
  const FILTER_FIELDS = ["method", "tool", "status", "kind", "dir"];
  function parseFilter(text) {
    const fields = {}, words = [];
    const TERM = /(?:(\w+):)?(?:"((?:[^"\\]|\\.)*)"(?=\s|$)|(\S+))/g;
    let m;
    while ((m = TERM.exec(text)) !== null) {
      const name = m[1], quoted = m[2], bare = m[3];
      const value = quoted !== undefined ? quoted.replace(/\\"/g, '"') : bare;
      if (name !== undefined && FILTER_FIELDS.includes(name.toLowerCase())) fields[name.toLowerCase()] = value.toLowerCase();
      else if (value) words.push((name !== undefined && quoted === undefined ? m[0] : value).toLowerCase());
    }
    return { fields, words };
  }

  function matchesFilter(f, e, texts) {
    const stderr = e.type === "stderr";
    const method = stderr ? "" : (e.method || "").toLowerCase();
    const st = stderr ? "" : (e.status || "").toLowerCase();
    const code = e.code;
    for (const [name, want] of Object.entries(f.fields)) {
      if (name === "method") {
        if (stderr || !(want.endsWith("*") ? method.startsWith(want.slice(0, -1)) : method.includes(want))) return false;
      } else if (name === "tool") {
        if (stderr || (e.tool || "").toLowerCase() !== want) return false;
      } else if (name === "status") {
        const ok = st === want || (want === "error" && st === "iserror") ||
          ((want === "noanswer" || want === "no-answer") && st === "no answer") || (code !== undefined && code !== null && want === String(code));
        if (!ok) return false;
      } else if (name === "kind") {
        if ((stderr ? "stderr" : e.kind) !== want) return false;
      } else if (name === "dir") {
        const dir = { client: "c2s", server: "s2c" }[want] || want;
        if (stderr || e.dir !== dir) return false;
      }
    }
    if (!f.words.length) return true;
    const hay = [method, (e.label || "").toLowerCase(), st, code === undefined || code === null ? "" : String(code),
      ...texts.map((t) => t.toLowerCase())].join("\n");
    return f.words.every((w) => hay.includes(w));
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
        if (hits.length >= 500) return { query: text, terms: q.text, fields: q.fields, hits, next: null, scanned, capped: true };
      }
      if (terms.length && Object.keys(q.fields).every((k) => k === "session")) {
        for (const e of d.timeline[String(s.id)] || []) {
          if (e.type !== "stderr" || e.line === null || e.line === undefined) continue;
          const low = e.line.toLowerCase();
          if (!terms.every((t) => low.includes(t))) continue;
          const from = Math.max(0, low.indexOf(terms[0]) - 60);
          hits.push({ type: "stderr", session: s.id, session_name: s.name, stderr_id: e.id, seq: null, t: e.t, dir: null,
            kind: "stderr", method: null, id: null, size: e.line.length, snippet: e.secrets && e.secrets.length ? null : e.line.slice(from, from + 160),
            snippet_start: from, secrets: e.secrets || [] });
        }
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

  let sessionCache = null;

  async function sessions() {
    if (!sessionCache) sessionCache = (await api("/api/sessions")).sessions;
    return sessionCache;
  }

  function serverLabel(s) {
    return [s.server && s.server.name, s.server && s.server.version].filter(Boolean).join(" ");
  }

  /** In a file of one report (diff --format html, verify --html): that report, else null. */
  const staticDiff = FILE && FILE.diffs && Object.keys(FILE.diffs).length
    ? (a, b) => FILE.diffs[`${a}:${b}`] || null : null;

  Object.assign(V, { FILE, api, sessions, serverLabel, staticDiff });
})();
