/* mcprec view: a list of any length that renders only the rows in sight.
 *
 * Rows have one fixed height. The list asks `render(i)` for the rows on screen (and a few
 * around them) on every scroll, and tells `onRange(lo, hi)` which rows those are, so that the
 * caller can fetch the pages it lacks; `before(lo, hi)` runs first. Fifty rows in the DOM, whether the list has a hundred
 * or a million. */
"use strict";

(function (global) {
  const OVERSCAN = 12;

  class VirtualList {
    constructor(host, { rowHeight, render, onRange, before }) {
      this.rowHeight = rowHeight;
      this.render = render;
      this.before = before || (() => {});
      this.onRange = onRange || (() => {});
      this.count = 0;
      this.scroller = document.createElement("div");
      this.scroller.className = "vlist";
      this.scroller.tabIndex = 0;
      this.spacer = document.createElement("div");
      this.spacer.className = "vlist-spacer";
      this.layer = document.createElement("div");
      this.layer.className = "vlist-rows";
      this.spacer.appendChild(this.layer);
      this.scroller.appendChild(this.spacer);
      host.appendChild(this.scroller);
      this.pending = false;
      this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
      if (global.ResizeObserver) new ResizeObserver(() => this.schedule()).observe(this.scroller);
    }

    setCount(n) {
      this.count = n;
      this.spacer.style.height = `${n * this.rowHeight}px`;
      this.schedule();
    }

    schedule() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }

    range() {
      const top = this.scroller.scrollTop;
      const height = this.scroller.clientHeight || 600;
      const lo = Math.max(0, Math.floor(top / this.rowHeight) - OVERSCAN);
      const hi = Math.min(this.count, Math.ceil((top + height) / this.rowHeight) + OVERSCAN);
      return [lo, hi];
    }

    draw() {
      const [lo, hi] = this.range();
      this.before(lo, hi);
      const frag = document.createDocumentFragment();
      for (let i = lo; i < hi; i++) {
        const row = this.render(i);
        row.style.top = `${i * this.rowHeight}px`;
        row.style.height = `${this.rowHeight}px`;
        row.dataset.index = String(i);
        frag.appendChild(row);
      }
      this.layer.replaceChildren(frag);
      this.onRange(lo, hi);
    }

    /** Scroll so that row `i` is in sight (centred when it was not). */
    show(i) {
      const top = i * this.rowHeight;
      const view = this.scroller.clientHeight || 600;
      if (top < this.scroller.scrollTop || top + this.rowHeight > this.scroller.scrollTop + view) {
        this.scroller.scrollTop = Math.max(0, top - view / 2 + this.rowHeight / 2);
      }
      this.schedule();
    }
  }

  global.McprecList = { VirtualList };
})(globalThis);
