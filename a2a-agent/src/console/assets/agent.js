// a2a-server single-agent console. Vanilla JavaScript, no build step, nothing loaded from elsewhere.
"use strict";

const { $, el, fmt } = A2ADom;

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) { location.assign("/console"); throw new Error("logged out"); }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

async function loadAgent() {
  const a = await api("/console/api/agent");
  $("#agent-did").textContent = a.did + (a.streaming ? " · streaming" : "") + (a.sessions ? " · sessions" : "");
  $("#capabilities").tBodies[0].replaceChildren(...a.capabilities.map((c) => el("tr", { "data-capability": c.name },
    el("th", { scope: "row", text: c.name }),
    el("td", {}, el("span", { class: "cell auth-" + c.auth_requirement, text: c.auth_requirement })),
    el("td", { text: (c.region_restriction || []).length ? c.region_restriction.join(", ") : "any region" }),
    el("td", { text: c.description }),
    el("td", {}, el("pre", { class: "mono", tabindex: "0", text: JSON.stringify(c.input_schema) })))));
  const entries = {};
  for (const c of a.capabilities) entries[c.name] = { decl: c, streaming: a.streaming };
  A2ATry.setCapabilities(a.capabilities.map((c) => c.name), entries);
  if (a.sessions) {
    $("#tab-sessions").hidden = false;
    A2ASessions.start($("#sessions-root"));
  }
  document.body.dataset.ready = "true";
}

// The readings of the last minutes, kept in the page: rates are the differences between them.
const ring = [];
function quantile(q, buckets) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [le, n] of buckets) {
    if (n >= rank) {
      if (le === "+Inf") return lower * 1000;
      return (lower + (le - lower) * (n > below ? (rank - below) / (n - below) : 1)) * 1000;
    }
    lower = le === "+Inf" ? lower : le;
    below = n;
  }
  return lower * 1000;
}
function chart(title, points) {
  const W = 360, H = 120, L = 36, B = 16, T = 8, NS = "http://www.w3.org/2000/svg";
  const s = document.createElementNS(NS, "svg");
  s.setAttribute("viewBox", `0 0 ${W} ${H}`);
  s.setAttribute("role", "img");
  s.setAttribute("aria-label", title);
  const max = Math.max(1e-9, ...points.map((p) => p[1]));
  const t0 = points.length ? points[0][0] : 0, t1 = points.length ? points[points.length - 1][0] : 1;
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - 4);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  if (points.length) {
    const p = document.createElementNS(NS, "path");
    p.setAttribute("d", points.map((q, i) => (i ? "L" : "M") + x(q[0]).toFixed(1) + " " + y(q[1]).toFixed(1)).join(" "));
    p.setAttribute("fill", "none");
    p.setAttribute("stroke", "#0b57d0");
    p.setAttribute("stroke-width", "2");
    s.append(p);
  }
  const label = document.createElementNS(NS, "text");
  label.setAttribute("x", "2");
  label.setAttribute("y", String(T + 8));
  label.textContent = fmt(max);
  s.append(label);
  const last = points.length ? points[points.length - 1][1] : null;
  return el("figure", { class: "chart" }, el("figcaption", { text: title + ": " + fmt(last) }), s);
}
async function loadMetrics() {
  const m = await api("/console/api/metrics");
  ring.push(m);
  if (ring.length > 150) ring.shift();
  const total = m.requests.reduce((a, r) => a + r.value, 0);
  const errors = m.requests.filter((r) => r.outcome !== "ok").reduce((a, r) => a + r.value, 0);
  const item = (k, label, v) => el("div", {}, el("dt", { text: label }), el("dd", { "data-total": k, text: fmt(v) }));
  $("#totals").replaceChildren(item("requests", "Requests", total), item("errors", "Errors", errors),
    item("p50", "p50 ms", quantile(0.5, m.latency_buckets)), item("p95", "p95 ms", quantile(0.95, m.latency_buckets)),
    item("p99", "p99 ms", quantile(0.99, m.latency_buckets)),
    item("signature_failures", "Signature failures", m.signature_failures),
    item("fallback_offered", "Fallbacks offered", m.fallback_offered),
    item("executions_in_flight", "Executions in flight", m.executions_in_flight));
  const rate = [], err = [];
  for (let i = 1; i < ring.length; i++) {
    const a = ring[i - 1], b = ring[i];
    const dt = Math.max((b.at_ms - a.at_ms) / 1000, 0.001);
    const sum = (r, ok) => r.requests.filter((x) => ok === null || (x.outcome === "ok") === ok).reduce((s, x) => s + x.value, 0);
    rate.push([b.at_ms, Math.max(sum(b, null) - sum(a, null), 0) / dt]);
    err.push([b.at_ms, Math.max(sum(b, false) - sum(a, false), 0) / dt]);
  }
  $("#charts").replaceChildren(chart("Request rate (/s)", rate), chart("Error rate (/s)", err));
  $("#metrics-updated").textContent = "updated " + new Date().toLocaleTimeString();
}
async function loadTraffic() {
  const t = await api("/console/api/audit?limit=100");
  $("#traffic").tBodies[0].replaceChildren(...t.records.map((r) => el("tr", { "data-step": r.step },
    el("td", { class: "mono", text: new Date(r.time_ms).toLocaleTimeString() }), el("td", { text: r.step }),
    el("td", { text: r.capability || "" }), el("td", { class: "mono", text: r.sender_id }),
    el("td", {}, el("span", { class: r.outcome === "ok" ? "ok" : "bad", text: r.outcome })),
    el("td", { text: fmt(r.latency_us / 1000, 1) + " ms" }), el("td", { class: "mono", text: r.execution_id || "" }))));
}
function tick() {
  Promise.all([loadMetrics(), loadTraffic()]).catch((e) => { $("#metrics-updated").textContent = e.message; });
}
document.addEventListener("DOMContentLoaded", () => {
  const selectTab = A2ADom.tabs();
  A2ATry.start($("#try-root"));
  loadAgent().then(() => {
    const initial = $("#tab-" + location.hash.slice(1));
    if (initial && !initial.hidden) selectTab(initial, false);
  }).catch((e) => { $("#agent-did").textContent = e.message; });
  tick();
  setInterval(tick, 2000);
});
