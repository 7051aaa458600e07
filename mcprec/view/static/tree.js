/* mcprec view: JSON kept exactly as recorded, shown as a collapsible tree.
 *
 * parse() keeps every number as the text it was written as (an integer past 2^53 stays exact),
 * and object keys in their order. Paths are written as mcprec writes them (jsonpath.join_key),
 * so the paths of a diff report find their node here, into strings that hold JSON too. */
"use strict";

(function (global) {
  // --- parsing --------------------------------------------------------------------------------

  const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

  /** Parse JSON text into nodes {t, v}: t is "o" (v: [[key, node]...]), "a" (v: [node...]),
   * "s" (string), "n" (number, v: its text), "b" (boolean) or "z" (null). Throws SyntaxError. */
  function parse(text) {
    let i = 0;
    const n = text.length;

    function fail(what) {
      throw new SyntaxError(`${what} at character ${i}`);
    }
    function ws() {
      for (; i < n; i++) {
        const c = text.charCodeAt(i);
        if (c !== 32 && c !== 10 && c !== 13 && c !== 9) break;
      }
    }
    function string() {
      const start = i;
      let j = i + 1;
      for (;;) {
        const q = text.indexOf('"', j);
        if (q < 0) fail("unterminated string");
        let k = q - 1;
        while (text.charCodeAt(k) === 92) k--; // backslashes before the quote
        if ((q - 1 - k) % 2 === 0) {
          i = q + 1;
          return JSON.parse(text.slice(start, i));
        }
        j = q + 1;
      }
    }
    function value(depth) {
      if (depth > 5000) fail("nested too deeply");
      ws();
      const c = text[i];
      if (c === "{") {
        i++;
        const entries = [];
        ws();
        if (text[i] === "}") { i++; return { t: "o", v: entries }; }
        for (;;) {
          ws();
          if (text[i] !== '"') fail("expected a key");
          const key = string();
          ws();
          if (text[i] !== ":") fail("expected ':'");
          i++;
          entries.push([key, value(depth + 1)]);
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "}") { i++; return { t: "o", v: entries }; }
          fail("expected ',' or '}'");
        }
      }
      if (c === "[") {
        i++;
        const items = [];
        ws();
        if (text[i] === "]") { i++; return { t: "a", v: items }; }
        for (;;) {
          items.push(value(depth + 1));
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "]") { i++; return { t: "a", v: items }; }
          fail("expected ',' or ']'");
        }
      }
      if (c === '"') return { t: "s", v: string() };
      if (text.startsWith("true", i)) { i += 4; return { t: "b", v: true }; }
      if (text.startsWith("false", i)) { i += 5; return { t: "b", v: false }; }
      if (text.startsWith("null", i)) { i += 4; return { t: "z", v: null }; }
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (m) { i = NUMBER.lastIndex; return { t: "n", v: m[0] }; }
      fail("unexpected character");
    }
    const root = value(0);
    ws();
    if (i < n) fail("unexpected text after the value");
    return root;
  }

  /** The node a string holds when it is a JSON object or array (as the diff reads it), else null. */
  function embedded(node) {
    if (node.t !== "s") return null;
    if (node.e !== undefined) return node.e;
    node.e = null;
    const s = node.v.trimStart();
    if (s[0] === "{" || s[0] === "[") {
      try { node.e = parse(node.v); } catch (e) { node.e = null; }
    }
    return node.e;
  }

  function stringify(node, indent, level) {
    const pad = indent ? "\n" + " ".repeat(indent * ((level || 0) + 1)) : "";
    const end = indent ? "\n" + " ".repeat(indent * (level || 0)) : "";
    const sep = indent ? ": " : ":";
    switch (node.t) {
      case "o":
        if (!node.v.length) return "{}";
        return "{" + node.v.map(([k, v]) => pad + JSON.stringify(k) + sep +
          stringify(v, indent, (level || 0) + 1)).join(",") + end + "}";
      case "a":
        if (!node.v.length) return "[]";
        return "[" + node.v.map((v) => pad + stringify(v, indent, (level || 0) + 1)).join(",") +
          end + "]";
      case "s": return JSON.stringify(node.v);
      case "n": return node.v;
      case "b": return String(node.v);
      default: return "null";
    }
  }

  // --- paths ----------------------------------------------------------------------------------

  const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

  function joinKey(path, key) {
    if (typeof key === "number") return `${path}[${key}]`;
    if (PLAIN_KEY.test(key)) return path ? `${path}.${key}` : key;
    return `${path}[${JSON.stringify(key)}]`;
  }

  /** Whether `path` is `prefix` or lies below it. */
  function under(path, prefix) {
    if (!path.startsWith(prefix)) return false;
    const c = path[prefix.length];
    return c === undefined || c === "." || c === "[";
  }

  /** Images and audio in a message: content items and resources that carry base64 data. */
  function media(root) {
    const found = [];
    const TYPE = /^(image|audio)\/[A-Za-z0-9.+-]+$/;
    (function walk(node, path) {
      if (found.length >= 20) return;
      if (node.t === "a") node.v.forEach((c, i) => walk(c, joinKey(path, i)));
      if (node.t !== "o") return;
      const get = (k) => { const e = node.v.find(([key]) => key === k); return e && e[1]; };
      const data = get("data") || get("blob");
      const mime = get("mimeType");
      if (data && data.t === "s" && mime && mime.t === "s" && TYPE.test(mime.v) &&
          /^[A-Za-z0-9+/=\s]*$/.test(data.v)) {
        found.push({ kind: mime.v.split("/")[0], mime: mime.v, data: data.v.replace(/\s/g, ""), path });
      }
      node.v.forEach(([k, c]) => walk(c, joinKey(path, k)));
    })(root, "$");
    return found;
  }

  // --- rendering ------------------------------------------------------------------------------

  const CHUNK = 200;
  const STRING_PREVIEW = 300;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function preview(node) {
    if (node.t === "o") return node.v.length === 1 ? "{1 key}" : `{${node.v.length} keys}`;
    if (node.t === "a") return node.v.length === 1 ? "[1 item]" : `[${node.v.length} items]`;
    return "";
  }

  /** How many nodes `node` has, counting no further than `limit`. */
  function size(node, limit) {
    let n = 1;
    const kids = node.t === "o" ? node.v.map((e) => e[1]) : node.t === "a" ? node.v : [];
    for (const k of kids) {
      if (n > limit) break;
      n += size(k, limit - n);
    }
    return n;
  }

  /** A tree for `root`. options.changes: paths to mark (their ancestors open); options.open:
   * how many levels start open (default: all of a small message, two levels of a large one);
   * options.copy(text, button): copies. */
  function render(root, options) {
    const opts = Object.assign({ changes: [], copy: null }, options || {});
    if (opts.open === undefined) opts.open = size(root, 80) <= 80 ? Infinity : 2;
    const tree = el("div", "tree");
    tree.appendChild(renderNode(root, null, "$", 0, opts));
    return tree;
  }

  function marks(path, opts) {
    let exact = false, below = false;
    for (const c of opts.changes) {
      if (c === path) exact = true;
      else if (under(c, path)) below = true;
    }
    return { exact, below };
  }

  function actions(node, path, opts) {
    const box = el("span", "node-actions");
    if (!opts.copy) return box;
    const value = el("button", "mini", "copy");
    value.type = "button";
    value.title = "Copy this value as JSON";
    value.addEventListener("click", (ev) => {
      ev.preventDefault(); ev.stopPropagation();
      opts.copy(node.t === "s" ? node.v : stringify(node, 2), value);
    });
    const where = el("button", "mini", "path");
    where.type = "button";
    where.title = `Copy the path ${path} (as --ignore takes it)`;
    where.addEventListener("click", (ev) => {
      ev.preventDefault(); ev.stopPropagation();
      opts.copy(path, where);
    });
    box.append(value, where);
    return box;
  }

  function keyLabel(key) {
    if (key === null) return null;
    return el("span", typeof key === "number" ? "k idx" : "k", String(key));
  }

  function renderNode(node, key, path, depth, opts) {
    const inner = embedded(node);
    const m = marks(path, opts);
    if (node.t !== "o" && node.t !== "a" && !inner) return leaf(node, key, path, m, opts);
    const box = document.createElement("details");
    box.className = "node" + (m.exact ? " changed" : "") + (m.below ? " has-change" : "");
    box.dataset.path = path;
    const head = el("summary");
    const k = keyLabel(key);
    if (k) head.append(k, el("span", "colon", ": "));
    if (inner) {
      head.append(el("span", "badge json", "JSON"), el("span", "v-s dim", clip(node.v, 80)));
    } else {
      head.append(el("span", "punct", preview(node)));
    }
    head.appendChild(actions(node, path, opts));
    box.appendChild(head);
    const target = inner || node;
    let filled = false;
    const fill = () => {
      if (filled) return;
      filled = true;
      const kids = el("div", "kids");
      box.appendChild(kids);
      children(target, path, depth, opts, kids, 0);
    };
    if (depth < opts.open || m.below || m.exact) {
      box.open = true;
      fill();
    }
    box.addEventListener("toggle", () => { if (box.open) fill(); });
    return box;
  }

  function children(node, path, depth, opts, into, from) {
    const list = node.t === "o" ? node.v : node.v.map((v, i) => [i, v]);
    const upto = Math.min(list.length, from + CHUNK);
    for (let i = from; i < upto; i++) {
      const [k, v] = list[i];
      into.appendChild(renderNode(v, k, joinKey(path, k), depth + 1, opts));
    }
    if (upto < list.length) {
      const more = el("button", "more", `show ${Math.min(CHUNK, list.length - upto)} more ` +
        `(${list.length - upto} left)`);
      more.type = "button";
      more.addEventListener("click", () => { more.remove(); children(node, path, depth, opts, into, upto); });
      into.appendChild(more);
    }
  }

  function clip(s, n) {
    return s.length > n ? JSON.stringify(s.slice(0, n)).slice(0, -1) + "…\"" : JSON.stringify(s);
  }

  function leaf(node, key, path, m, opts) {
    const row = el("div", "leaf" + (m.exact ? " changed" : ""));
    row.dataset.path = path;
    const k = keyLabel(key);
    if (k) row.append(k, el("span", "colon", ": "));
    if (node.t === "s") {
      const v = el("span", "v-s");
      const long = node.v.length > STRING_PREVIEW;
      v.textContent = long ? `"${node.v.slice(0, STRING_PREVIEW)}…"` : `"${node.v}"`;
      row.appendChild(v);
      if (long) {
        const all = el("button", "more", `show all ${node.v.length} characters`);
        all.type = "button";
        all.addEventListener("click", () => { v.textContent = `"${node.v}"`; all.remove(); });
        row.appendChild(all);
      }
    } else {
      row.appendChild(el("span", "v-" + node.t, node.t === "z" ? "null" : String(node.v)));
    }
    row.appendChild(actions(node, path, opts));
    return row;
  }

  /** Open the tree down to `path` (rendering what is still folded) and return its element. */
  function reveal(tree, path) {
    let best = null;
    for (let guard = 0; guard < 200; guard++) {
      const nodes = tree.querySelectorAll("[data-path]");
      let found = null;
      for (const n of nodes) {
        const p = n.dataset.path;
        if (p === path) return openUp(n);
        if (under(path, p) && (!found || p.length > found.dataset.path.length)) found = n;
      }
      if (!found || found === best) return best ? openUp(best) : null;
      best = found;
      if (found.tagName === "DETAILS" && !found.open) found.open = true; // renders its children
      else return openUp(found);
    }
    return null;
  }

  function openUp(node) {
    for (let n = node; n; n = n.parentElement) if (n.tagName === "DETAILS") n.open = true;
    return node;
  }

  global.McprecTree = { parse, stringify, embedded, joinKey, under, media, render, reveal };
})(globalThis);
