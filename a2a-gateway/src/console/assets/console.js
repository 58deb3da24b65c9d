// a2a-gateway operator console. Vanilla JavaScript, no build step, nothing loaded from elsewhere.
"use strict";

const { $, el, fmt } = A2ADom;
const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs = {}) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (r.status === 401) { location.assign("/console"); throw new Error("logged out"); }
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

const state = { agents: null, capabilities: {}, labels: {}, selected: null };

// ---------- tabs (A2ADom.tabs: the WAI-ARIA tabs pattern) ----------
function setupTabs() {
  const select = A2ADom.tabs((view) => { if (view === "metrics") refreshMetrics(); });
  const initial = $("#tab-" + location.hash.slice(1));
  if (initial) select(initial, false);
}

// ---------- network: the permission matrix ----------
async function refreshNetwork() {
  try {
    const data = await api("/console/api/agents");
    state.agents = data.agents;
    $("#gateway-did").textContent = (data.gateway.name ? data.gateway.name + " · " : "") + data.gateway.did;
    state.capabilities = {};
    state.labels = {};
    for (const a of data.agents) {
      state.labels[a.endpoint] = a.label;
      for (const c of a.capabilities) if (!state.capabilities[c.name]) state.capabilities[c.name] = { decl: c, agent: a };
    }
    renderMatrix(data);
    fillCapabilities(data.capabilities);
    $("#network-error").textContent = "";
    $("#network-updated").textContent = "Updated " + new Date().toLocaleTimeString() + ".";
  } catch (e) {
    $("#network-error").textContent = "Cannot read the agents: " + e.message;
  }
}
function renderMatrix(data) {
  const table = $("#matrix");
  const head = el("tr", {}, el("th", { scope: "col", text: "Agent" }), el("th", { scope: "col", text: "Health" }),
    el("th", { scope: "col", text: "In flight" }), el("th", { scope: "col", text: "Version" }));
  for (const name of data.capabilities) head.append(el("th", { scope: "col", "data-capability": name, text: name }));
  table.tHead.replaceChildren(head);
  const rows = data.agents.map((a) => {
    const tr = el("tr", { "data-agent": a.label });
    tr.append(el("th", { scope: "row" },
      el("div", {}, el("strong", { text: a.label }), " ", el("span", { class: "muted", text: a.from_config ? "(config)" : "(registry)" })),
      el("div", { class: "mono", text: a.endpoint }),
      el("div", { class: "mono muted", text: a.did || "" }),
      a.error ? el("div", { class: "err", text: a.error }) : null));
    tr.append(el("td", {}, el("span", { class: a.healthy ? "ok" : "bad", text: a.healthy ? "healthy" : "ejected" })));
    tr.append(el("td", { text: String(a.in_flight) }));
    tr.append(el("td", { text: a.version || "–" }, a.features.length ? el("div", { class: "muted", text: a.features.join(", ") }) : null));
    for (const name of data.capabilities) {
      const c = a.capabilities.find((x) => x.name === name);
      if (!c) { tr.append(el("td", { class: "muted", text: "–" })); continue; }
      const regions = (c.region_restriction || []).length ? c.region_restriction.join(", ") : "any region";
      tr.append(el("td", { "data-capability": name },
        el("span", { class: "cell auth-" + c.auth_requirement, text: c.auth_requirement }),
        el("div", { class: "muted", text: regions })));
    }
    return tr;
  });
  table.tBodies[0].replaceChildren(...rows);
}

// ---------- traffic: the audit trail, live ----------
const MAX_ROWS = 500;
let source = null;
function filterQuery() {
  const p = new URLSearchParams();
  for (const k of ["sender", "capability", "agent", "outcome"]) {
    const v = $("#f-" + k).value.trim();
    if (v) p.set(k, v);
  }
  return p.toString();
}
function connectTraffic() {
  if (source) source.close();
  $("#traffic").tBodies[0].replaceChildren();
  const q = filterQuery();
  source = new EventSource("/console/api/traffic" + (q ? "?" + q : ""));
  source.addEventListener("open", () => { $("#traffic-status").textContent = "Live."; });
  source.addEventListener("error", () => { $("#traffic-status").textContent = "Reconnecting…"; });
  source.addEventListener("record", (e) => addRecord(JSON.parse(e.data)));
  source.addEventListener("lagged", (e) => {
    $("#traffic-status").textContent = "Live (" + e.data + " records were missed: the view fell behind).";
  });
}
function addRecord(r) {
  const body = $("#traffic").tBodies[0];
  const ok = r.outcome === "ok";
  const tr = el("tr", {
    "data-step": r.step, "data-execution": r.execution_id || "", "data-capability": r.capability || "",
    "data-outcome": r.outcome,
  });
  const when = new Date(r.time_ms);
  tr.append(el("td", { class: "mono", text: when.toLocaleTimeString() + "." + String(when.getMilliseconds()).padStart(3, "0") }),
    el("td", { text: r.step }), el("td", { text: r.capability || "" }), el("td", { class: "mono", text: r.sender_id }),
    el("td", { text: r.agent_label || (r.agent ? r.agent : "gateway") }),
    el("td", {}, el("span", { class: ok ? "ok" : "bad", text: r.outcome })),
    el("td", { text: r.status === undefined ? "" : String(r.status) }),
    el("td", { text: fmt(r.latency_us / 1000, 1) + " ms" }),
    el("td", { text: r.verified ? "verified" : "unsigned" }));
  if (r.execution_id) {
    tr.classList.add("selectable");
    tr.tabIndex = 0;
    tr.setAttribute("aria-label", r.step + " of execution " + r.execution_id + ": open its timeline");
    const open = () => openTimeline(r.execution_id, tr);
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
  }
  body.prepend(tr);
  while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
}
async function openTimeline(id, row) {
  for (const r of document.querySelectorAll("#traffic tr[aria-selected]")) r.removeAttribute("aria-selected");
  if (row) row.setAttribute("aria-selected", "true");
  const aside = $("#timeline");
  aside.replaceChildren(el("h3", { text: "Timeline of " + id }), el("p", { class: "muted", text: "Loading…" }));
  try {
    const t = await api("/console/api/execution/" + encodeURIComponent(id));
    const steps = t.steps;
    if (!steps.length) {
      aside.replaceChildren(el("h3", { text: "Timeline of " + id }), el("p", { class: "muted", text: "No audit record of this execution." }));
      return;
    }
    const start = Math.min(...steps.map((s) => s.start_ms));
    const end = Math.max(...steps.map((s) => s.time_ms));
    const span = Math.max(end - start, 1);
    const list = el("div", { class: "tl", role: "list" });
    for (const s of steps) {
      const bar = el("div", { class: "tl-bar" + (s.outcome === "ok" ? "" : " bad") });
      bar.style.marginLeft = ((s.start_ms - start) / span * 100).toFixed(1) + "%";
      bar.style.width = Math.max(s.duration_ms / span * 100, 0.5).toFixed(1) + "%";
      list.append(el("div", { class: "tl-row", role: "listitem", "data-step": s.step },
        el("span", {}, el("strong", { text: s.step }), el("br"), el("span", { class: s.outcome === "ok" ? "ok" : "bad", text: s.outcome })),
        el("div", {}, bar, el("span", { class: "muted", text: "+" + (s.start_ms - start) + " ms · " + s.signature +
          (s.execution_status ? " · " + s.execution_status : "") + (s.agent_label ? " · " + s.agent_label : "") })),
        el("span", { class: "mono", text: fmt(s.duration_ms, 1) + " ms" })));
    }
    aside.replaceChildren(el("h3", { text: "Timeline of " + id }),
      el("p", { class: "muted mono", text: "negotiation " + (t.negotiation_id || "–") }), list);
    aside.focus();
  } catch (e) {
    aside.replaceChildren(el("h3", { text: "Timeline" }), el("p", { class: "err", text: e.message }));
  }
}

// ---------- golden metrics, drawn in SVG ----------
const COLOURS = ["#0b57d0", "#a50e0e", "#0a6b2f", "#7a4b00", "#6a1b9a"];
function chart(title, id, series, unit) {
  const W = 360, H = 140, L = 40, B = 18, T = 8;
  const fig = el("figure", { class: "chart", id: "chart-" + id });
  fig.append(el("figcaption", { text: title }));
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  const all = series.flatMap((x) => x.points.map((p) => p[1])).filter((v) => v !== null);
  const max = Math.max(1e-9, ...all);
  const t0 = Math.min(...series.flatMap((x) => x.points.map((p) => p[0])));
  const t1 = Math.max(...series.flatMap((x) => x.points.map((p) => p[0])));
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - 4);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  s.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - 4, y2: H - B }),
    svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const top = svg("text", { x: 2, y: T + 8 }); top.textContent = fmt(max); s.append(top);
  const zero = svg("text", { x: 2, y: H - B }); zero.textContent = "0"; s.append(zero);
  const ago = svg("text", { x: L, y: H - 4 }); ago.textContent = all.length ? `−${Math.round((t1 - t0) / 1000)} s` : "no samples yet"; s.append(ago);
  const legend = el("div", { class: "legend" });
  series.forEach((ser, i) => {
    const pts = ser.points.filter((p) => p[1] !== null);
    const colour = COLOURS[i % COLOURS.length];
    if (pts.length) {
      const d = pts.map((p, k) => (k ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      s.append(svg("path", { d, fill: "none", stroke: colour, "stroke-width": 2, "data-series": ser.name }));
    }
    const last = pts.length ? pts[pts.length - 1][1] : null;
    const item = el("span", { "data-series": ser.name, text: ser.name + ": " + fmt(last) + (unit ? " " + unit : "") });
    item.style.setProperty("--c", colour);
    legend.append(item);
  });
  fig.append(s, legend);
  return fig;
}
async function refreshMetrics() {
  if ($("#view-metrics").hidden) return;
  try {
    const m = await api("/console/api/metrics");
    const t = m.totals;
    const total = (k, label, v) => el("div", {}, el("dt", { text: label }), el("dd", { "data-total": k, text: fmt(v) }));
    const errs = Object.values(t.errors).reduce((a, b) => a + b, 0);
    $("#totals").replaceChildren(total("requests", "Requests", t.requests), total("errors", "Errors", errs),
      total("signature_rejections", "Signature rejections", t.signature_rejections),
      total("clock_skew_rejections", "Clock-skew rejections", t.clock_skew_rejections),
      total("fallback_answers", "Fallback answers", t.fallback_answers),
      total("p95", "p95 since start (ms)", t.p95));
    const w = m.windows;
    const pts = (f) => w.map((x) => [x.t, f(x)]);
    const codes = [...new Set(w.flatMap((x) => Object.keys(x.errors)))];
    $("#charts").replaceChildren(
      chart("Request rate (/s)", "rate", [{ name: "rate", points: pts((x) => x.rate) }], "/s"),
      chart("Latency (ms)", "latency", ["p50", "p95", "p99"].map((q) => ({ name: q, points: pts((x) => x[q]) })), "ms"),
      chart("Errors by code (/s)", "errors", codes.length ? codes.map((c) => ({ name: c, points: pts((x) => (x.errors[c] || 0) / x.seconds) }))
        : [{ name: "errors", points: pts((x) => x.error_rate) }], "/s"),
      chart("Rejections and fallbacks (per window)", "rejections", [
        { name: "signature", points: pts((x) => x.signature_rejections) },
        { name: "clock skew", points: pts((x) => x.clock_skew_rejections) },
        { name: "fallback", points: pts((x) => x.fallback_answers) }]));
    const last = w.length ? w[w.length - 1] : { agents: {}, capabilities: {} };
    const agentRows = Object.entries(t.by_agent).map(([label, tot]) => {
      const l = last.agents[label] || {};
      return el("tr", { "data-agent": label }, el("th", { scope: "row", title: m.agents[label] || "edge (answered by the gateway)", text: label }),
        el("td", { "data-total": "requests", text: fmt(tot.requests) }), el("td", { text: fmt(tot.errors) }),
        el("td", { text: fmt(l.rate) }), el("td", { text: fmt(l.p50) }), el("td", { text: fmt(l.p95) }), el("td", { text: fmt(l.p99) }));
    });
    $("#per-agent").tBodies[0].replaceChildren(...agentRows);
    const capRows = Object.entries(t.by_capability).map(([cap, n]) => {
      const l = last.capabilities[cap] || {};
      return el("tr", { "data-capability": cap }, el("th", { scope: "row", text: cap }), el("td", { "data-total": "requests", text: fmt(n) }),
        el("td", { text: fmt(l.rate) }), el("td", { text: fmt(l.p50) }), el("td", { text: fmt(l.p95) }), el("td", { text: fmt(l.p99) }));
    });
    $("#per-capability").tBodies[0].replaceChildren(...capRows);
    $("#metrics-updated").textContent = "Updated " + new Date().toLocaleTimeString() + ".";
    document.body.dataset.metricsAt = String(Date.now());
  } catch (e) {
    $("#metrics-updated").textContent = "Cannot read the metrics: " + e.message;
  }
}

// ---------- try it: a2a_runtime's shared panel (try.js), sending to this gateway's /a2a ----------
function fillCapabilities(names) {
  const entries = {};
  for (const [name, c] of Object.entries(state.capabilities)) {
    entries[name] = { decl: c.decl, streaming: (c.agent.features || []).includes("streaming") };
  }
  A2ATry.setCapabilities(names, entries);
}

// ---------- start ----------
function start() {
  setupTabs();
  $("#traffic-filter").addEventListener("submit", (e) => { e.preventDefault(); connectTraffic(); });
  $("#traffic-filter").addEventListener("reset", () => setTimeout(connectTraffic, 0));
  A2ATry.start($("#try-root"));
  A2ASessions.start($("#sessions-root"));
  refreshNetwork().then(() => { document.body.dataset.ready = "true"; });
  setInterval(refreshNetwork, 2000);
  connectTraffic();
  setInterval(refreshMetrics, 2000);
}
document.addEventListener("DOMContentLoaded", start);
