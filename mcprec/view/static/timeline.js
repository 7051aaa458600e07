/* mcprec view: a session's timeline: one row per request, what the server sent while
 * handling it inside, stderr lines between, a waterfall; a virtual list of any length. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { h, fmtTime, fmtDur, fmtSize, fmtStamp, ARROWS, DIR_TITLE, failure, secretWarning, api, serverLabel, showMessage, stderrDetail } = V;
  const { VirtualList } = globalThis.McprecList;
  const ROW = 26;
  const PAGE = 200;
  const main = document.getElementById("main");

  async function timelineView(alive, sid, seq) {
    // the first page is asked for at once, alongside the session, not after it
    const firstPage = api(`/api/sessions/${sid}/timeline`, { start: 0, count: PAGE });
    firstPage.catch(() => {});
    const s = await api(`/api/sessions/${sid}`);
    if (!alive()) return null;
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
        const r = await (n === 0 ? firstPage : api(`/api/sessions/${sid}/timeline`, { start: n * PAGE, count: PAGE }));
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
        (e.secrets && e.secrets.length) || (e.answer && e.answer.secrets && e.answer.secrets.length)
          ? h("span.secret", { title: "looks like a secret: select to see it, after a warning" }, " ⚠ secret?") : null,
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

  Object.assign(V, { timelineView });
})();
