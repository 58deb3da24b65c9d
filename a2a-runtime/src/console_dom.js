// The DOM helpers every console script shares: the agent's console and the gateway's load it first
// (/console/assets/dom.js, a2a_runtime::console_auth::DOM_JS), then their own script, "Try it" and the Sessions view.
// Vanilla JavaScript, no build step, nothing loaded from elsewhere.
"use strict";

const A2ADom = (() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  // An element: attributes (`class`, `text` for its text, `onX` for a listener; undefined, null and false are left
  // out, true is an empty attribute), then children (nodes, or anything else as text).
  const el = (tag, attrs = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  };
  const fmt = (n, digits = 2) => (n === null || n === undefined || Number.isNaN(n)) ? "–" :
    (Number.isInteger(n) ? String(n) : n.toFixed(digits));

  // The views: the WAI-ARIA tabs pattern (arrows, Home and End move among the visible tabs; the focus follows; the
  // selected view is the page's #fragment). onSelect(view) runs after each selection. Returns select(tab, focus).
  function tabs(onSelect) {
    const all = () => [...document.querySelectorAll("[role=tab]")];
    const select = (tab, focus) => {
      for (const t of all()) {
        const on = t === tab;
        t.setAttribute("aria-selected", String(on));
        t.tabIndex = on ? 0 : -1;
        $("#" + t.getAttribute("aria-controls")).hidden = !on;
      }
      if (focus) tab.focus();
      const view = tab.id.replace("tab-", "");
      if (location.hash !== "#" + view) history.replaceState(null, "", "#" + view);
      if (onSelect) onSelect(view);
    };
    for (const t of all()) {
      t.addEventListener("click", () => select(t, false));
      t.addEventListener("keydown", (e) => {
        const visible = all().filter((v) => !v.hidden);
        const i = visible.indexOf(t);
        let j = null;
        if (e.key === "ArrowRight") j = (i + 1) % visible.length;
        else if (e.key === "ArrowLeft") j = (i - 1 + visible.length) % visible.length;
        else if (e.key === "Home") j = 0;
        else if (e.key === "End") j = visible.length - 1;
        if (j !== null) { e.preventDefault(); select(visible[j], true); }
      });
    }
    return select;
  }

  return { $, el, fmt, tabs };
})();
