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

  async function timelineView(alive, sid, seq, filter) {
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
    const closeDetail = h("button.mini.close", { type: "button", title: "Close (Esc)", "aria-label": "Close the message",
      onclick: () => deselect() }, "×");
    const detailBody = h("div.detail-body");
    const detail = h("aside.detail", { "aria-label": "Message" }, closeDetail, detailBody);
    // the waterfall's scale: the whole session, the time of the rows in sight, or a log scale
    let mode = "session";
    let waterfall = { from: 0, span: duration, log: false };
    const scaleFrom = h("span.from", "0"), scaleTo = h("span.to", fmtDur(duration));
    const scale = h("span.scale", scaleFrom, scaleTo);
    const scaleSelect = h("select.scale-mode", { "aria-label": "Waterfall scale", title: "The waterfall's scale",
      onchange: () => { mode = scaleSelect.value; list.schedule(); } },
      h("option", { value: "session" }, "waterfall: whole session"),
      h("option", { value: "sight" }, "waterfall: rows in sight"),
      h("option", { value: "log" }, "waterfall: latency, log scale"));
    // zoom: drag across the waterfall's header to see that stretch of time; double-click: whole
    let zoomed = null;
    const brush = h("span.brush");
    scale.appendChild(brush);
    scale.title = "Drag to zoom into a stretch of time; double-click to see it all";
    scale.addEventListener("pointerdown", (ev) => {
      if (mode === "log") return;
      ev.preventDefault();
      scale.setPointerCapture(ev.pointerId);
      const box = scale.getBoundingClientRect();
      const x0 = ev.clientX;
      const at = (x) => Math.max(0, Math.min(1, (x - box.left) / box.width));
      const move = (e) => {
        const a = at(Math.min(x0, e.clientX)), b = at(Math.max(x0, e.clientX));
        brush.style.left = `${a * 100}%`; brush.style.width = `${(b - a) * 100}%`; brush.classList.add("on");
      };
      const up = (e) => {
        scale.removeEventListener("pointermove", move); scale.removeEventListener("pointerup", up);
        brush.classList.remove("on");
        const a = at(Math.min(x0, e.clientX)), b = at(Math.max(x0, e.clientX));
        if (b - a > 0.01) {
          const w = waterfall;
          zoomed = { from: w.from + a * w.span, span: Math.max(1000, (b - a) * w.span) };
          if (mode === "sight") { mode = "session"; scaleSelect.value = "session"; }
          list.schedule();
        }
      };
      scale.addEventListener("pointermove", move);
      scale.addEventListener("pointerup", up);
    });
    scale.addEventListener("dblclick", () => { zoomed = null; list.schedule(); });
    function frame(lo, hi) {
      if (mode === "log") {
        waterfall = { from: 0, span: duration, log: true };
      } else if (mode === "session") {
        waterfall = zoomed ? { from: zoomed.from, span: zoomed.span, log: false } : { from: 0, span: duration, log: false };
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
        waterfall = from < to ? { from, span: to - from, log: false } : { from: 0, span: duration, log: false };
      }
      scale.classList.toggle("zoomed", !!zoomed && mode === "session");
      if (waterfall.log) {
        scaleFrom.textContent = "latency (log)";
        scaleTo.textContent = fmtDur(waterfall.span);
      } else {
        scaleFrom.textContent = waterfall.from ? fmtTime(waterfall.from) : "0";
        scaleTo.textContent = fmtTime(waterfall.from + waterfall.span);
      }
    }
    const cols = columnState();
    const listPane = h("div.list-pane");
    const header = h("div.row.columns", { role: "row" }, COLUMNS.map((c) => headerCell(c, cols, listPane, () => list.schedule(),
      c.key === "fall" ? scale : null)));
    const headerBox = h("div.columns-box", header);
    // the filter: in place, the timeline stays
    const filterInput = h("input.tl-filter", { type: "search", placeholder: "Filter: text, method:…, tool:…, status:error|cancelled|no answer",
      "aria-label": "Filter the timeline", spellcheck: "false" });
    const filterCount = h("span.dim.filter-count", "");
    const toolbar = h("div.tl-toolbar", filterInput, filterCount, h("span.spacer"), scaleSelect, columnMenu(cols, listPane));
    listPane.append(toolbar, headerBox, listHost);
    applyColumns(cols, listPane);
    const split = h("div.split", listPane, detail);
    main.replaceChildren(h("section.timeline", head, split));

    if (s.file_note) listHost.appendChild(h("p.empty", s.file_note));

    // a filter: the positions shown are these entries (indices in the whole timeline)
    let shown = null;
    const real = (p) => (shown ? shown[p] : p);
    const count = () => (shown ? shown.length : total);
    let filterTimer = null, filterGen = 0;
    async function applyFilter(text) {
      const gen = ++filterGen;
      if (!text.trim()) {
        shown = null;
        filterCount.textContent = "";
        listPane.dataset.filter = "";
      } else {
        filterCount.textContent = "filtering…";
        const r = await api(`/api/sessions/${sid}/filter`, { q: text });
        if (disposed || gen !== filterGen) return;
        shown = r.indices;
        filterCount.textContent = `${r.indices.length} of ${r.total}`;
        listPane.dataset.filter = text;
      }
      expanded.clear();
      deselect();
      list.scroller.scrollTop = 0;
      list.setCount(displayCount());
    }
    filterInput.addEventListener("input", () => {
      clearTimeout(filterTimer);
      filterTimer = setTimeout(() => applyFilter(filterInput.value).catch((e) => { filterCount.textContent = e.message; }), 180);
    });
    filterInput.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { filterInput.value = ""; applyFilter(""); } });
    // display rows: the entries, with the children of expanded ones after them
    const keys = () => [...expanded.keys()].sort((a, b) => a - b);
    const displayCount = () => count() + [...expanded.values()].reduce((n, e) => n + e.entries.length, 0);
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
    // entryAt: the entry at a position (of the filtered list, when a filter is on)
    const entryAt = (pos) => { const i = real(pos); if (i === undefined) return undefined; const p = pages.get(Math.floor(i / PAGE)); return p ? p[i % PAGE] : undefined; };

    function awaitCount() {
      if (counting) return;
      counting = (async () => {
        for (let wait = 100; !disposed; wait = Math.min(1000, wait * 2)) {
          await new Promise((done) => setTimeout(done, wait));
          const again = await api(`/api/sessions/${sid}`);
          if (again.entries !== null) {
            if (!disposed && again.entries !== total) { total = again.entries; if (!shown) list.setCount(displayCount()); }
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
        if (known !== total) { total = known; if (!shown) list.setCount(displayCount()); }
        if (r.total === null) awaitCount();
        if (r.duration_ns && r.duration_ns !== duration) duration = r.duration_ns;
        list.schedule();
      } catch (e) {
        if (!disposed) showDetail(failure(e));
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
          const link = ev.target.closest("[data-jump]");
          if (link) { ev.stopPropagation(); jump(Number(link.dataset.jump)).catch((e) => showDetail(failure(e))); return; }
          if (ev.target.closest(".twisty")) toggle(at.entry);
          else select(d, item);
        });
        return row;
      },
      onRange: (lo, hi) => {
        const a = locate(lo).entry, b = locate(Math.max(lo, hi - 1)).entry;
        if (!shown) {
          for (let n = Math.floor(a / PAGE); n <= Math.floor(b / PAGE); n++) fetchPage(n);
        } else {
          const wanted = new Set();
          for (let p = a; p <= b && p < shown.length; p++) wanted.add(Math.floor(shown[p] / PAGE));
          for (const n of wanted) fetchPage(n);
        }
      },
    });
    list.scroller.addEventListener("scroll", () => { header.style.transform = `translateX(${-list.scroller.scrollLeft}px)`; }, { passive: true });
    list.setCount(total);
    list.scroller.setAttribute("aria-label", "Timeline");
    list.scroller.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") { deselect(); return; }
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

    function showDetail(...content) {
      detailBody.replaceChildren(...content);
      split.classList.add("open");
    }
    function deselect() {
      selected = null;
      split.classList.remove("open");
      detailBody.replaceChildren();
      if (/\/m\/\d+$/.test(location.hash)) history.replaceState(null, "", `#/s/${sid}`);
      list.schedule();
    }

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
      split.classList.add("open");
      if (item.type === "stderr") {
        showDetail(stderrDetail(item));
        return;
      }
      history.replaceState(null, "", `#/s/${sid}/m/${item.seq}`);
      showMessage(detailBody, sid, item.seq, (target) => jump(target));
    }

    async function jump(target) {
      const where = await api(`/api/sessions/${sid}/locate`, { seq: target });
      if (disposed) return;
      await fetchPage(Math.floor(where.index / PAGE));
      if (shown && !shown.includes(where.index)) {  // filtered out: the filter goes
        filterInput.value = "";
        await applyFilter("");
      }
      const pos = shown ? shown.indexOf(where.index) : where.index;
      let d = displayOf(pos);
      const e = entryAt(pos);
      if (where.chain.length > 1 && e && e.children && e.seq !== where.chain[0] &&
          !(e.answer && e.answer.seq === where.chain[0])) {
        if (!expanded.has(pos)) {
          expanded.set(pos, await api(`/api/sessions/${sid}/messages/${e.seq}/during`));
          if (disposed) return;
          list.setCount(displayCount());
        }
        const kids = expanded.get(pos).entries;
        const k = kids.findIndex((c) => c.seq === where.chain[0] || (c.answer && c.answer.seq === where.chain[0]) ||
          c.seq === where.chain[1]);
        if (k >= 0) d = displayOf(pos) + 1 + k;
      }
      selected = { display: d, entry: locate(d).entry, child: locate(d).child, seq: target };
      list.show(d);
      history.replaceState(null, "", `#/s/${sid}/m/${target}`);
      split.classList.add("open");
      showMessage(detailBody, sid, target, (t) => jump(t));
    }

    if (seq !== null && !Number.isNaN(seq)) {
      jump(seq).catch((e) => showDetail(failure(e)));
    } else if (filter) {
      filterInput.value = filter;
      applyFilter(filter).catch((e) => { filterCount.textContent = e.message; });
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
        s.lost ? h("span.lost", `lost ${s.lost.lost_messages} message(s) that were forwarded but not recorded: ${s.lost.reason}`) : null,
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

  // --- columns: resizable (drag a header's right edge), hideable (the Columns menu), kept in
  // localStorage; the method column is never narrower than its minimum: a narrow window
  // scrolls the list sideways instead
  const COLUMNS = [
    { key: "seq", title: "#", width: 46 },
    { key: "time", title: "time", width: 70 },
    { key: "dir", title: "", width: 16, fixed: true, label: "direction" },
    { key: "kind", title: "kind", width: 72 },
    { key: "method", title: "method", width: 320, flex: 1, always: true },
    { key: "status", title: "status", width: 82 },
    { key: "id", title: "id", width: 38 },
    { key: "size", title: "size", width: 58 },
    { key: "lat", title: "latency", width: 64 },
    { key: "fall", title: "waterfall", width: 140, flex: 0.55 },
  ];
  const STORE = "mcprec.view.columns";

  function columnState() {
    let saved = {};
    try { saved = JSON.parse(localStorage.getItem(STORE) || "{}") || {}; } catch (e) { saved = {}; }
    const widths = {}, hidden = new Set(), sized = new Set();
    for (const c of COLUMNS) {
      const w = saved.widths && Number(saved.widths[c.key]);
      widths[c.key] = w && w >= 16 && w <= 2000 ? w : c.width;
      if (w) sized.add(c.key);
      if (!c.always && Array.isArray(saved.hidden) && saved.hidden.includes(c.key)) hidden.add(c.key);
    }
    // a narrow window, the first time: the kind (the arrow and the method say it) and the id
    // make way for the method
    if (!Array.isArray(saved.hidden) && window.innerWidth < 1000) { hidden.add("kind"); hidden.add("id"); }
    return { widths, hidden, sized };
  }

  function saveColumns(cols) {
    try {
      localStorage.setItem(STORE, JSON.stringify({ widths: Object.fromEntries([...cols.sized].map((k) => [k, cols.widths[k]])), hidden: [...cols.hidden] }));
    } catch (e) { /* no storage (a file:// page may have none): the layout lasts the page */ }
  }

  function applyColumns(cols, pane) {
    const tracks = [], hide = [];
    let min = 16;
    for (const c of COLUMNS) {
      if (cols.hidden.has(c.key)) { hide.push(c.key); continue; }
      const w = cols.widths[c.key];
      min += w + 6;
      // the method grows; the waterfall grows less, until it is sized by hand
      tracks.push(c.flex && !(c.key === "fall" && cols.sized.has("fall")) ? `minmax(${w}px, ${c.flex}fr)` : `${w}px`);
    }
    pane.style.setProperty("--cols", tracks.join(" "));
    pane.style.setProperty("--row-min", `${min}px`);
    pane.dataset.hidden = hide.join(" ");
    // a stderr line runs from the method column to the waterfall
    const before = ["seq", "time", "dir", "kind"].filter((k) => !cols.hidden.has(k)).length;
    pane.style.setProperty("--wide", `${before + 1} / ${cols.hidden.has("fall") ? -1 : -2}`);
    for (const c of COLUMNS) pane.classList.toggle(`hide-${c.key}`, cols.hidden.has(c.key));
  }

  function headerCell(c, cols, pane, redraw, content) {
    const cell = h(`span.c-${c.key}`, { role: "columnheader", dataset: { col: c.key } }, content || h("span.t", c.title));
    if (c.fixed) return cell;
    const grip = h("span.grip", { title: "Drag to resize", "aria-hidden": "true" });
    grip.addEventListener("pointerdown", (ev) => {
      ev.preventDefault();
      grip.setPointerCapture(ev.pointerId);
      const x0 = ev.clientX, w0 = cell.getBoundingClientRect().width;
      const move = (e) => {
        cols.widths[c.key] = Math.max(c.key === "method" ? 120 : 24, Math.min(2000, Math.round(w0 + e.clientX - x0)));
        cols.sized.add(c.key);
        applyColumns(cols, pane);
        redraw();
      };
      const up = () => { grip.removeEventListener("pointermove", move); grip.removeEventListener("pointerup", up); saveColumns(cols); };
      grip.addEventListener("pointermove", move);
      grip.addEventListener("pointerup", up);
    });
    grip.addEventListener("dblclick", () => { cols.sized.delete(c.key); cols.widths[c.key] = c.width; applyColumns(cols, pane); saveColumns(cols); redraw(); });
    cell.appendChild(grip);
    return cell;
  }

  function columnMenu(cols, pane) {
    const boxes = COLUMNS.filter((c) => !c.always).map((c) => h("label",
      h("input", { type: "checkbox", checked: !cols.hidden.has(c.key), dataset: { col: c.key },
        onchange: (ev) => {
          if (ev.target.checked) cols.hidden.delete(c.key); else cols.hidden.add(c.key);
          applyColumns(cols, pane);
          saveColumns(cols);
        } }), " ", c.label || c.title));
    const reset = h("button.mini", { type: "button", onclick: () => {
      cols.hidden.clear(); cols.sized.clear();
      for (const c of COLUMNS) cols.widths[c.key] = c.width;
      for (const b of menu.querySelectorAll("input")) b.checked = true;
      applyColumns(cols, pane); saveColumns(cols);
    } }, "reset");
    const menu = h("details.columns-menu", h("summary.button", "Columns"), h("div.menu", boxes, reset));
    return menu;
  }

  /** What the status column says of an entry: [text, class, title, the message it links to]. */
  function statusOf(e) {
    if (e.transport_failure || (e.answer && e.answer.transport_failure)) return ["failed", "error", "transport failure", null];
    switch (e.status) {
      case "ok": return ["ok", "ok", "answered", null];
      case "error": return [e.code !== undefined ? String(e.code) : "error", "error", "JSON-RPC error", null];
      case "isError": return ["isError", "error", "the tool's result says isError: true", null];
      case "cancelled": return ["cancelled", "cancelled", `cancelled by #${e.cancel}: no answer`, e.cancel];
      case "no answer": return ["no answer", "pending", "never answered in the recording", null];
      case "pending": return ["pending", "pending", "no answer yet: the session is still being recorded", null];
      default: break;
    }
    if (e.cancels !== undefined) return [`cancels #${e.cancels}`, "cancel", `cancels request #${e.cancels}`, e.cancels];
    return ["", "", "", null];
  }

  /** Where a bar goes: percentages of the waterfall for [start, end]. On the log scale, every
   * bar starts at the left and its length is its latency on a log scale (10 µs to the session's
   * length), so a 2 ms answer stays visible next to a 2 s initialize. */
  function place(scale, t0, t1) {
    if (scale.log) {
      const f = (d) => Math.log1p(Math.max(0, d) / 1e4) / Math.log1p(Math.max(1e4, scale.span) / 1e4);
      return [0, Math.max(0, Math.min(1, f(t1 - t0))) * 100];
    }
    const f = (t) => (t - scale.from) / scale.span;
    return [Math.max(0, Math.min(1, f(t0))) * 100, Math.max(0, Math.min(1, f(t1))) * 100];
  }

  /** A row of the timeline; `scale` ({from, span, log} in ns) places its waterfall bar. */

  function entryRow(e, child, open, scale) {
    if (e.type === "stderr") {
      const secret = e.secrets && e.secrets.length;
      const bar = h("span.bar.tick");
      bar.style.left = `min(${place(scale, e.t, e.t)[0]}%, calc(100% - 3px))`;
      return h("div.row.stderr", { title: "stderr" },
        h("span.c-seq", ""), h("span.c-time", fmtTime(e.t)), h("span.c-dir", "!"),
        h("span.c-kind", "stderr"),
        h("span.c-method.wide", secret ? h("span.secret", "⚠ hidden: looks like a secret (select to see)") : e.line),
        h("span.c-fall", bar));
    }
    const failed = e.transport_failure || (e.answer && e.answer.transport_failure && `transport failure: ${e.answer.transport_failure}`) ||
      (e.answer && e.answer.failure) || (e.kind === "error" && (e.failure || "error"));
    const [stText, stClass, stTitle, stLink] = statusOf(e);
    const cls = ["row", "msg", `k-${e.kind}`, e.dir];
    if (child) cls.push("child");
    if (failed) cls.push("failed");
    if (e.transport_failure) cls.push("transport");
    if (stClass === "cancelled" || stClass === "pending") cls.push(`is-${stClass}`);
    const twisty = e.children && !child
      ? h("button.twisty", { type: "button", title: `${e.children} message(s) sent while handling this request`,
        "aria-expanded": String(open) }, open ? "▾" : "▸", h("span.count", String(e.children)))
      : child ? null : h("span.twisty");
    const method = e.transport_failure
      ? h("span.c-method", h("span.fail", "transport failure: ", e.transport_failure))
      : h("span.c-method", { title: [e.method, e.label, typeof failed === "string" ? failed : ""].filter(Boolean).join(" ") },
        twisty, h("span.m", e.method || (e.kind === "invalid" ? "(not JSON-RPC)" : "—")),
        e.label ? h("span.label", " ", e.label) : null,
        (e.secrets && e.secrets.length) || (e.answer && e.answer.secrets && e.answer.secrets.length)
          ? h("span.secret", { title: "looks like a secret: select to see it, after a warning" }, " ⚠ secret?") : null,
        failed && !e.transport_failure ? h("span.fail", " ", typeof failed === "string" ? failed : "failed") : null,
        e.truncated ? h("span.badge", `truncated: ${fmtSize(e.truncated)} sent`) : null);
    const status = h("span.c-status", { title: stTitle },
      stText ? (stLink !== null && stLink !== undefined
        ? h(`button.st.jump.st-${stClass}`, { type: "button", dataset: { jump: String(stLink) }, title: `${stTitle} (go there)` }, stText)
        : h(`span.st.st-${stClass}`, stText)) : null);
    const latency = e.answer ? e.answer.latency_ns : null;
    const bar = h("span.bar");
    if (latency !== null) {
      const [a, b] = place(scale, e.t, e.t + latency);
      // never clipped: a bar is at least 2 px, and ends inside the column
      bar.style.width = `max(2px, ${b - a}%)`;
      bar.style.left = `min(${a}%, calc(100% - max(2px, ${b - a}%) - 1px))`;
      bar.classList.add("span");
    } else if (stClass === "cancelled" || stClass === "pending") {
      const [a] = place(scale, e.t, e.t);
      bar.style.left = `min(${a}%, calc(100% - 8px))`;
      bar.style.right = "0";
      bar.classList.add("open");
      bar.title = stTitle;
    } else {
      bar.style.left = `min(${place(scale, e.t, e.t)[0]}%, calc(100% - 3px))`;
      bar.classList.add("tick");
    }
    return h(`div.${cls.join(".")}`, { title: DIR_TITLE[e.dir] || "" },
      h("span.c-seq", String(e.seq)),
      h("span.c-time", fmtTime(e.t)),
      h("span.c-dir", { title: DIR_TITLE[e.dir] || "" }, ARROWS[e.dir] || "?"),
      h("span.c-kind", e.kind),
      method,
      status,
      h("span.c-id", e.id === null || e.id === undefined ? "" : e.id),
      h("span.c-size", { title: e.answer ? `this message ${fmtSize(e.size)}; its answer ${fmtSize(e.answer.size)}` : `${fmtSize(e.size)}` },
        fmtSize(e.size)),
      h("span.c-lat", latency === null ? (stClass === "cancelled" || stClass === "pending" ? "—" : "") : fmtDur(latency)),
      h("span.c-fall", bar));
  }

  Object.assign(V, { timelineView });
})();
