/* mcprec view: what every part of the page uses (elements, numbers, copying, errors,
 * warnings). The parts register themselves on globalThis.McprecView. */
"use strict";

(function () {
  const V = (globalThis.McprecView = {});

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

  class ApiError extends Error {}

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

  /** Show the page at `hash` (again, when it is the one on screen). */
  function go(hash) {
    if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = hash;
  }

  Object.assign(V, { h, fmtTime, fmtDur, fmtSize, fmtStamp, ARROWS, DIR_TITLE, copy, ApiError, failure,
    secretWarning, go });
})();
