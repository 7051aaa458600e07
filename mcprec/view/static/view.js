/* mcprec view: the page's routes (#/, #/s/ID[/m/SEQ], #/search?q=, #/diff?a=&b=) and the
 * sessions page. The views live in timeline.js, message.js, search.js and diff.js. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { h, fmtDur, fmtStamp, failure, go, FILE, api, sessions, serverLabel, timelineView, searchView, diffView } = V;

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

  async function route() {
    const { parts, params } = parseHash();
    const gen = ++generation;
    const alive = () => gen === generation; // still the page on screen
    if (current && current.dispose) current.dispose();
    current = null;
    main.replaceChildren();
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.remove("active");
    if (parts[0] !== "search") document.getElementById("search-input").value = "";
    try {
      if (parts[0] === "s" && parts[1]) {
        current = await timelineView(alive, Number(parts[1]), parts[2] === "m" ? Number(parts[3]) : null, params.get("f") || "");
      } else if (parts[0] === "search") {
        current = await searchView(alive, params.get("q") || "");
      } else if (parts[0] === "diff") {
        nav("diff");
        current = await diffView(alive, params.get("a"), params.get("b"), params.get("x"));
      } else {
        nav("sessions");
        current = await sessionsView(alive, params.get("f") || "");
      }
    } catch (e) {
      if (gen === generation) main.replaceChildren(failure(e));
    }
  }

  function nav(name) {
    const a = document.querySelector(`[data-nav="${name}"]`);
    if (a) a.classList.add("active");
  }

  async function sessionsView(alive, filter) {
    const [info, list] = await Promise.all([api("/api/cassette"), sessions()]);
    if (!alive()) return null;
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
          h("td", h(`span.status.${s.status}`, { title: s.lost ? `${s.lost.lost_messages} message(s) forwarded but not recorded: ${s.lost.reason}` : "" },
            s.lost ? `${s.status} (lost ${s.lost.lost_messages})` : s.status))));
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
