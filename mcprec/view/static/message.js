/* mcprec view: one message in the detail pane: its tree, raw text and HTTP details, media,
 * copy buttons, what looks like a secret behind a warning. */
"use strict";

(function () {
  const V = globalThis.McprecView;
  const { h, fmtTime, fmtDur, fmtSize, ARROWS, DIR_TITLE, copy, failure, secretWarning, FILE, api } = V;
  const Tree = globalThis.McprecTree;

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
    if (m.cancel !== undefined) links.push(link(`cancelled by #${m.cancel}`, m.cancel));
    if (m.cancels !== undefined) links.push(link(`cancels request #${m.cancels}`, m.cancels));
    const title = [m.method || m.kind, m.label].filter(Boolean).join(" ");
    const box = h("div.message",
      h("h2", title),
      h("p.meta",
        `#${m.seq} · `, h("span", { title: DIR_TITLE[m.dir] }, `${ARROWS[m.dir]} ${m.dir}`), ` · ${m.kind}`,
        m.id !== null && m.id !== undefined ? ` · id ${m.id}` : "", ` · ${fmtSize(m.size)} · at ${fmtTime(m.t)}`,
        m.kind === "request" && m.status ? [" · ", h(`span.st.st-${{ ok: "ok", error: "error", isError: "error", cancelled: "cancelled" }[m.status] || "pending"}`,
          m.status === "error" && m.code !== undefined ? `error ${m.code}` : m.status)] : null),
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

  function stderrDetail(e) {
    const body = h("pre.raw");
    const show = () => { body.textContent = e.line === null ? "" : e.line; };
    const box = h("div.message", h("h2", "stderr"), h("p.meta", `at ${fmtTime(e.t)}`));
    if (e.secrets && e.secrets.length) box.appendChild(secretWarning(e.secrets, e.withheld ? null : show, "this line"));
    else show();
    box.appendChild(body);
    return box;
  }

  Object.assign(V, { showMessage, section, stderrDetail });
})();
