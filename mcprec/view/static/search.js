/* mcprec view: search across the cassette, in slices the server scans. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { h, fmtTime, ARROWS, failure, api, sessions } = V;
  const main = document.getElementById("main");

  async function searchView(alive, text) {
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
        if (!alive() || stopped) return;
        found += r.hits.length;
        scanned += r.scanned;
        for (const hit of r.hits) results.appendChild(hitRow(hit, r.terms || [], all));
        cursor = r.next;
        if (!cursor) {
          status.textContent = r.capped ? `The first ${found} messages found; narrow the search to see others.`
            : found ? `${found} message${found === 1 ? "" : "s"} found.` : "Nothing found.";
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
    if (hit.type === "stderr") {
      return h("li.hit.stderr-hit", h("a", { href: `#/s/${hit.session}?f=${encodeURIComponent(terms.map((t) => /\s/.test(t) ? `"${t}"` : t).join(" "))}` },
        h("span.hit-where", `${name} stderr`), " ", h("span.dim", `! stderr line · ${fmtTime(hit.t)}`)), snippet);
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

  Object.assign(V, { searchView });
})();
