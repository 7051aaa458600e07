/* mcprec view: the diff of two sessions: the verdict, the summary, each exchange side by
 * side with its changed paths marked, latency per method. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { h, fmtDur, copy, failure, secretWarning, go, api, sessions, serverLabel } = V;
  const Tree = globalThis.McprecTree;
  const main = document.getElementById("main");

  async function diffView(alive, a, b, x) {
    const list = await sessions();
    if (!alive()) return null;
    const pick = (name, value) => h("select", { "aria-label": `Session ${name}`, name },
      h("option", { value: "" }, `Session ${name}…`),
      list.slice().reverse().map((s) => h("option", { value: String(s.id), selected: String(s.id) === value }, `${s.name} (${serverLabel(s) || s.transport})`)));
    const selA = pick("A", a), selB = pick("B", b);
    const compare = h("button", { type: "button", onclick: () => {
      if (selA.value && selB.value) go(`#/diff?a=${selA.value}&b=${selB.value}`);
    } }, "Compare");
    const out = h("div.diff-out");
    const fixed = V.staticDiff && V.staticDiff(a, b);  // a page of one report: nothing to pick
    main.replaceChildren(h("section.page",
      h("div.page-head", h("h1", fixed && fixed.verify ? "Verify" : "Diff"),
        h("span.dim", fixed && fixed.verify ? "the server under test against a recorded session" : "what changed in the server's behaviour from A to B")),
      fixed ? null : h("div.toolbar", selA, h("span", "→"), selB, compare), out));
    if (!a || !b) {
      out.appendChild(h("p.empty", "Pick two sessions to compare."));
      return null;
    }
    out.appendChild(h("p.loading", "Comparing…"));
    const d = await api("/api/diff", { a, b });
    if (!alive()) return null;
    out.replaceChildren(diffReport(d, Number(a), Number(b), x === null ? null : Number(x)));
    return null;
  }

  // a change's or an exchange's severity, as the CLI and JSON say it: one source (d.counts,
  // c.severity, e.severity), three badges
  const SEVERITY = { breaking: "BREAKING", warning: "WARNING", compatible: "compatible" };
  const severityBadge = (sev) => sev ? h(`span.badge.sev-${sev}`, { dataset: { severity: sev } }, SEVERITY[sev] || sev) : null;

  function verifyHead(v) {
    const what = v.target ? ["target ", h("code", v.target)] : ["server ", h("code", (v.server || []).join(" "))];
    return h("p.verify-head", { dataset: { exitStatus: String(v.exit_status) } },
      "mcprec verify: ", ...what, ", against the reference ", h("code", v.reference),
      ` — exit status ${v.exit_status}${v.exit_status === 0 ? " (passed)" : v.exit_status === 1 ? " (failed)" : ""}`);
  }

  // when the client's messages with a cause went, and how many minted values were followed
  function verifyNotes(v) {
    const notes = (v.client_order || []).map((line) => h("li", "client order: " + line));
    if (v.minted) notes.push(h("li", `minted values followed: ${v.minted} (sent back as the live server minted them; compared as the recorded ones)`));
    return notes.length ? h("ul.verify-notes.dim", notes) : null;
  }

  function diffReport(d, a, b, open) {
    const equal = d.equal;
    const counts = d.counts || { breaking: d.breaking, warning: 0, compatible: d.summary.changes.length - d.breaking };
    const parts = [];
    for (const sev of ["breaking", "warning", "compatible"]) {
      if (counts[sev]) parts.push(`${counts[sev]} ${sev} change${counts[sev] === 1 ? "" : "s"}`);
    }
    if (d.exchanges.length) parts.push(`(${d.exchanges.length} exchange${d.exchanges.length === 1 ? "" : "s"} differ)`);
    if (d.latency_regressions) parts.push(`${d.latency_regressions} latency regression${d.latency_regressions === 1 ? "" : "s"}`);
    // the verdict as the text report says it (the JSON's `verdict`), else made here
    const verdict = d.verdict ? d.verdict : equal ? `EQUAL${d.ignore.length ? ` after ignoring ${d.ignore.length} path(s)` : ""}` : `DIFFERENT: ${parts.join(", ")}`;
    return h("div.diff",
      d.verify ? verifyHead(d.verify) : null,
      d.verify ? verifyNotes(d.verify) : null,
      h(`div.verdict.${equal ? "equal" : d.severity === "breaking" ? "breaking" : "different"}`, { role: "status", dataset: { severity: d.severity || "" } }, verdict),
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
        severityBadge(c.severity || (c.breaking ? "breaking" : "compatible")), " ",
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
        h("span.mark", mark), " ", h("span.m", e.label || "(outside any request)"), severityBadge(e.severity),
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

  Object.assign(V, { diffView });
})();
