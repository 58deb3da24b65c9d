// The Sessions view (spec §17), shared by the agent's console and the gateway's (a2a_runtime::console_try). Vanilla
// JavaScript, no build step. The page gives it a container (#sessions-root) and calls A2ASessions.start(root). It reads
// the console's backend, which reads the agents' own §17 endpoints: GET /console/api/sessions (every agent's
// GET /a2a/sessions), GET /console/api/sessions/history (GET /a2a/sessions/{key}/history) and the event stream
// GET /console/api/sessions/events (GET /a2a/events?session=KEY, from the start of the agent's buffer, live).
"use strict";

const A2ASessions = (() => {
  const { $, el } = A2ADom;
  const q = (o) => new URLSearchParams(o).toString();
  const selected = { agent: null, session: null, source: null, runs: new Map() };

  async function api(path) {
    const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (r.status === 401) { location.assign("/console"); throw new Error("logged out"); }
    const j = await r.json().catch(() => null);
    if (!r.ok) throw new Error(j && j.error ? j.error.code + ": " + j.error.message : path + ": " + r.status);
    return j;
  }

  function render(root) {
    root.replaceChildren(
      el("p", { class: "muted" }, "The sessions each agent lets this console see (its own ", el("code", { text: "GET /a2a/sessions" }),
        ", as ", el("span", { id: "sessions-as", text: "this console" }), "). Select one (Enter) for its runs, its transcript and its events, live. ",
        el("span", { id: "sessions-updated", "aria-live": "polite" })),
      el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Sessions" },
        el("table", { id: "sessions" }, el("caption", { class: "sr-only", text: "Sessions" }),
          el("thead", {}, el("tr", {}, ...["Agent", "Session", "Label", "Kind", "Handler", "Summary", "Updated"].map((h) => el("th", { scope: "col", text: h })))),
          el("tbody"))),
      el("p", { id: "sessions-error", class: "err", role: "alert" }),
      el("div", { id: "session-detail", hidden: true },
        el("h3", { id: "session-title", tabindex: "-1" }),
        el("p", { class: "muted" }, el("span", { id: "session-stream", "aria-live": "polite", text: "not connected" })),
        el("h4", { text: "Runs" }),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Runs of the session" },
          el("table", { id: "session-runs" }, el("caption", { class: "sr-only", text: "Runs, newest first" }),
            el("thead", {}, el("tr", {}, ...["Run", "From", "Status", "State", "Ended by", "Reply"].map((h) => el("th", { scope: "col", text: h })))),
            el("tbody"))),
        el("h4", { text: "Events (live)" }),
        el("ol", { id: "session-events", class: "events", "aria-live": "polite", "aria-label": "Events of the session" }),
        el("h4", { text: "Transcript" }),
        el("ol", { id: "session-history", class: "events", "aria-label": "Transcript of the session" })));
  }

  async function refresh() {
    try {
      const data = await api("/console/api/sessions");
      if (data.as) $("#sessions-as").textContent = data.as;
      const rows = [];
      const errors = [];
      for (const a of data.agents) {
        if (a.error) errors.push(a.label + ": " + a.error);
        for (const s of a.sessions || []) {
          const tr = el("tr", { class: "selectable", tabindex: "0", "data-agent": a.label, "data-session": s.session_key,
            "aria-label": "Session " + s.session_key + " of " + a.label + ": open it" },
          el("td", { text: a.label }), el("th", { scope: "row", class: "mono", text: s.session_key }), el("td", { text: s.label || "" }),
          el("td", { text: s.kind }), el("td", { text: s.handler }), el("td", { text: s.summary }),
          el("td", { class: "mono", text: s.updated_at }));
          if (a.label === selected.agent && s.session_key === selected.session) tr.setAttribute("aria-selected", "true");
          const open = () => select(a.label, s.session_key, tr);
          tr.addEventListener("click", open);
          tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
          rows.push(tr);
        }
      }
      const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("#sessions tbody tr");
      const keep = focused ? [focused.dataset.agent, focused.dataset.session] : null;
      $("#sessions").tBodies[0].replaceChildren(...rows);
      if (keep) { const again = rows.find((r) => r.dataset.agent === keep[0] && r.dataset.session === keep[1]); if (again) again.focus(); }
      $("#sessions-error").textContent = errors.join(" · ");
      $("#sessions-updated").textContent = "Updated " + new Date().toLocaleTimeString() + ".";
      document.body.dataset.sessionsAt = String(Date.now());
    } catch (e) {
      $("#sessions-error").textContent = "Cannot read the sessions: " + e.message;
    }
  }

  function runRow(id) {
    let tr = selected.runs.get(id);
    if (!tr) {
      tr = el("tr", { "data-run": id }, el("td", { class: "mono", text: id }), el("td", { class: "mono" }), el("td"), el("td"), el("td"), el("td"));
      selected.runs.set(id, tr);
      $("#session-runs").tBodies[0].prepend(tr);
    }
    return tr;
  }
  function showRun(run) {
    const tr = runRow(run.run_id);
    const cells = tr.cells;
    cells[1].textContent = run.from || "";
    cells[2].replaceChildren(el("span", { class: run.status === "ok" || run.status === "no_reply" ? "ok" : (run.status ? "bad" : ""), text: run.status || "" }));
    cells[3].textContent = run.state || "";
    cells[4].textContent = run.ended_by || "";
    cells[5].textContent = run.reply || (run.error ? run.error.code + ": " + run.error.message : "");
    tr.dataset.status = run.status || "";
    tr.dataset.state = run.state || "";
  }
  function addEvent(type, e) {
    let data = {};
    try { data = JSON.parse(e.data || "{}"); } catch { /* shown raw */ }
    const what = type === "run" ? "run " + data.run_id + ": " + data.status + " (" + data.state + ")" :
      type === "announce" ? "announced: " + (data.text || "") :
      type === "spawn" ? "spawned " + (data.child || "") + ": " + (data.status || "") :
      type === "gap" ? "older events are no longer in the agent's buffer" : type;
    const li = el("li", { "data-event": type, "data-id": e.lastEventId || "", "data-run": data.run_id || "" },
      el("span", { class: "mono", text: (e.lastEventId ? "#" + e.lastEventId + " " : "") + (data.at || new Date().toISOString()) + " " }),
      el("strong", { text: type }), " ", what);
    $("#session-events").prepend(li);
    if (type === "run" && data.run_id) showRun(data);
    if (type === "announce" && data.run_id) runRow(data.run_id);
    if (type === "run" || type === "announce" || type === "spawn") loadHistory();
  }
  async function loadHistory() {
    if (!selected.session) return;
    const { agent, session } = selected;
    try {
      const h = await api("/console/api/sessions/history?" + q({ agent, session }));
      if (agent !== selected.agent || session !== selected.session) return;
      $("#session-history").replaceChildren(...h.messages.map((m) => el("li", { "data-role": m.role, "data-run": m.run_id || "" },
        el("span", { class: "mono", text: "#" + m.seq + " " + m.at + " " }), el("strong", { text: m.role }), " ", m.text)));
      for (const m of h.messages) if (m.run_id && !selected.runs.has(m.run_id)) runRow(m.run_id);
    } catch (e) {
      $("#session-history").replaceChildren(el("li", { class: "err", text: "Cannot read the transcript: " + e.message }));
    }
  }
  function select(agent, session, row) {
    for (const r of document.querySelectorAll("#sessions tr[aria-selected]")) r.removeAttribute("aria-selected");
    if (row) row.setAttribute("aria-selected", "true");
    if (selected.source) selected.source.close();
    Object.assign(selected, { agent, session, runs: new Map() });
    $("#session-detail").hidden = false;
    $("#session-title").textContent = "Session " + session + " (" + agent + ")";
    $("#session-runs").tBodies[0].replaceChildren();
    $("#session-events").replaceChildren();
    $("#session-history").replaceChildren();
    document.body.dataset.sessionStream = "connecting";
    const src = new EventSource("/console/api/sessions/events?" + q({ agent, session }));
    selected.source = src;
    src.addEventListener("open", () => { $("#session-stream").textContent = "Events: live."; document.body.dataset.sessionStream = "live"; });
    src.addEventListener("error", () => { $("#session-stream").textContent = "Events: reconnecting…"; document.body.dataset.sessionStream = "reconnecting"; });
    for (const t of ["announce", "run", "spawn", "gap", "shutdown"]) src.addEventListener(t, (e) => addEvent(t, e));
    loadHistory();
  }

  function start(root) {
    render(root);
    refresh().then(() => { document.body.dataset.sessionsReady = "true"; });
    setInterval(refresh, 3000);
  }
  return { start, refresh };
})();
