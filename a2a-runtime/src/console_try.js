// "Try it", shared by the agent's console and the gateway's (a2a_runtime::console_try). Vanilla JavaScript, no build
// step, nothing loaded from elsewhere. The page gives it a container (#try-root) and, as its capabilities change,
// A2ATry.setCapabilities(names, entries) with entries[name] = {decl, streaming}. <body data-try-via="console"> sends
// the protocol's requests through the console's backend (POST /console/api/try: the agent's console, which may be
// served on another listener than the agent); otherwise the browser sends them itself, to /a2a on this origin.
"use strict";

const A2ATry = (() => {
  const { $, el } = A2ADom;
  const entries = {};
  const run = { negotiation: null, execution: null };
  let signer = null;

  function render(root) {
    const field = (label, input) => [el("label", { for: input.id, text: label }), input];
    root.replaceChildren(el("div", { class: "split" },
      el("div", {},
        ...field("Capability", el("select", { id: "try-capability" })),
        ...field("A2A-Sender-ID", el("input", { id: "try-sender", value: "did:web:console.localhost", autocomplete: "off" })),
        ...field("A2A-Region (empty: none sent)", el("input", { id: "try-region", autocomplete: "off" })),
        el("details", { id: "try-signing" }, el("summary", { text: "Signing key (for did_auth capabilities)" }),
          el("p", { id: "try-signer-status", class: "muted", role: "status", text: "No key: requests go unsigned." }),
          ...field("DID the key signs as", el("input", { id: "try-key-did", autocomplete: "off", placeholder: "did:web:you.example.com" })),
          ...field("Key id in its DID document", el("input", { id: "try-key-id", value: "key-1", autocomplete: "off" })),
          ...field("P-256 private key (PEM or JWK)", el("textarea", { id: "try-key", rows: "4", spellcheck: "false", autocomplete: "off" })),
          ...field("or read it from a file", el("input", { id: "try-key-file", type: "file", accept: ".pem,.key,.jwk,.json" })),
          el("div", { class: "buttons" },
            el("button", { id: "try-key-upload", type: "button", text: "Use this key" }),
            el("button", { id: "try-key-forget", type: "button", text: "Forget the key" })),
          el("label", { class: "inline" }, el("input", { type: "checkbox", id: "try-sign", disabled: true }), " Sign requests (A2A-Signature)")),
        el("details", { open: true }, el("summary", { text: "Declaration" }), el("pre", { id: "try-declaration", tabindex: "0" })),
        el("fieldset", { id: "try-form" }, el("legend", { text: "Payload" })),
        ...field("Payload (JSON; built from the form, editable)", el("textarea", { id: "try-payload", rows: "6", spellcheck: "false" })),
        ...field("Proposed schema (NEGOTIATE)", el("textarea", { id: "try-proposal", rows: "6", spellcheck: "false" })),
        el("label", { class: "inline" }, el("input", { type: "checkbox", id: "try-stream" }), " Stream RESULT (A2A-Stream: true)"),
        el("div", { class: "buttons" },
          el("button", { id: "try-negotiate", type: "button", text: "1. Negotiate" }),
          el("button", { id: "try-execute", type: "button", text: "2. Execute" }),
          el("button", { id: "try-confirm", type: "button", text: "3. Confirm" }),
          el("button", { id: "try-result", type: "button", text: "4. Result" }),
          el("button", { id: "try-all", type: "button", class: "primary", text: "Run all" })),
        el("p", { id: "try-status", role: "status", "aria-live": "polite" })),
      el("div", { id: "try-log", role: "region", "aria-label": "Requests and responses" })));
  }

  function setCapabilities(names, given) {
    for (const k of Object.keys(entries)) delete entries[k];
    Object.assign(entries, given);
    const sel = $("#try-capability");
    const current = sel.value;
    if ([...sel.options].map((o) => o.value).join() === names.join()) return;
    sel.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
    if (names.includes(current)) sel.value = current;
    showCapability();
  }
  function example(schema) {
    if (!schema || typeof schema !== "object") return null;
    if (schema.default !== undefined) return schema.default;
    if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
    const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
    switch (type) {
      case "string": return schema.format === "date-time" ? new Date().toISOString().replace(/\.\d+Z$/, "Z") : "";
      case "integer": case "number": return schema.minimum !== undefined ? schema.minimum : 0;
      case "boolean": return false;
      case "array": return [];
      case "object": {
        const o = {};
        for (const [k, v] of Object.entries(schema.properties || {})) o[k] = example(v);
        return o;
      }
      default: return null;
    }
  }
  function showCapability() {
    const entry = entries[$("#try-capability").value];
    const form = $("#try-form");
    form.replaceChildren(el("legend", { text: "Payload" }));
    if (!entry) return;
    const decl = entry.decl;
    $("#try-declaration").textContent = JSON.stringify(decl, null, 2);
    $("#try-proposal").value = JSON.stringify(decl.input_schema, null, 2);
    // A region-restricted capability (§4) is tried from its first region.
    $("#try-region").value = (decl.region_restriction || [])[0] || "";
    $("#try-stream").disabled = !entry.streaming;
    $("#try-stream").checked = false;
    const schema = decl.input_schema || {};
    const required = new Set(schema.required || []);
    for (const [key, prop] of Object.entries(schema.properties || {})) {
      const id = "field-" + key;
      const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
      let input;
      if (Array.isArray(prop.enum)) {
        input = el("select", { id, "data-key": key, "data-type": "enum" }, ...prop.enum.map((v) => el("option", { value: JSON.stringify(v), text: String(v) })));
      } else if (type === "boolean") {
        input = el("input", { id, type: "checkbox", "data-key": key, "data-type": "boolean" });
      } else if (type === "integer" || type === "number") {
        input = el("input", { id, type: "number", step: type === "integer" ? "1" : "any", "data-key": key, "data-type": type, value: String(example(prop)) });
      } else if (type === "string") {
        input = el("input", { id, "data-key": key, "data-type": "string", value: example(prop) });
      } else {
        input = el("textarea", { id, rows: "3", "data-key": key, "data-type": "json" });
        input.value = JSON.stringify(example(prop));
      }
      input.addEventListener("input", buildPayload);
      input.addEventListener("change", buildPayload);
      form.append(el("label", { for: id, text: key + (required.has(key) ? " (required)" : "") + (prop.description ? " — " + prop.description : "") }), input);
    }
    buildPayload();
  }
  function buildPayload() {
    const out = {};
    for (const input of document.querySelectorAll("#try-form [data-key]")) {
      const key = input.dataset.key;
      const t = input.dataset.type;
      try {
        if (t === "boolean") out[key] = input.checked;
        else if (t === "integer" || t === "number") { if (input.value !== "") out[key] = Number(input.value); }
        else if (t === "enum" || t === "json") out[key] = JSON.parse(input.value);
        else out[key] = input.value;
      } catch { out[key] = input.value; }
    }
    $("#try-payload").value = JSON.stringify(out, null, 2);
  }

  // ---------- the signing key: kept by the console's backend for this login, never by the page ----------
  async function consoleCall(method, path, body) {
    const r = await fetch(path, {
      method, credentials: "same-origin",
      headers: body === undefined ? { Accept: "application/json" } : { "Content-Type": "application/json", Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status === 401) { location.assign("/console"); throw new Error("logged out"); }
    const j = await r.json().catch(() => null);
    if (!r.ok) throw new Error(j && j.error ? j.error.code + ": " + j.error.message : path + ": " + r.status);
    return j;
  }
  function showSigner(s) {
    signer = s;
    const sign = $("#try-sign");
    sign.disabled = !s;
    sign.checked = !!s;
    $("#try-signer-status").textContent = s ? "Signing as " + s.kid + " (the key stays in the console's memory for this login)." :
      "No key: requests go unsigned.";
    $("#try-signer-status").className = "muted";
    if (s) $("#try-sender").value = s.did;
  }
  async function uploadKey() {
    const status = $("#try-signer-status");
    try {
      const text = $("#try-key").value.trim();
      const key = text.startsWith("{") ? JSON.parse(text) : text;
      const r = await consoleCall("POST", "/console/api/signer", { did: $("#try-key-did").value.trim(), key_id: $("#try-key-id").value.trim(), key });
      $("#try-key").value = "";
      $("#try-key-file").value = "";
      showSigner(r.signer);
    } catch (e) {
      status.textContent = "The key was not taken: " + e.message;
      status.className = "err";
    }
  }
  async function forgetKey() {
    try { await consoleCall("DELETE", "/console/api/signer"); showSigner(null); } catch (e) { status(e.message, true); }
  }
  const signing = () => signer && $("#try-sign").checked;

  // ---------- the handshake ----------
  function headersOf(extra) {
    const region = $("#try-region").value.trim();
    const h = { "A2A-Version": "0.3", "A2A-Sender-ID": $("#try-sender").value.trim() };
    if (region) h["A2A-Region"] = region;
    return Object.assign(h, extra);
  }
  function show(res) {
    return "HTTP " + res.status + "\n" + res.headers.map(([k, v]) => k + ": " + v).join("\n") + "\n\n" + res.body;
  }
  function logExchange(step, req, res) {
    const box = el("section", { class: "exchange", "data-step": step });
    box.append(el("h3", { text: step }),
      el("div", { class: "muted", text: "Request" }),
      el("pre", { tabindex: "0", text: req.method + " " + req.path + "\n" + Object.entries(req.headers).map(([k, v]) => k + ": " + v).join("\n") +
        (req.body ? "\n\n" + req.body : "") }),
      el("div", { class: "muted", text: "Response" }),
      el("pre", { tabindex: "0", "data-status": String(res.status), text: show(res) }));
    $("#try-log").prepend(box);
  }
  function lastResult(text) {
    const last = text.trim().split(/\n\n/).reverse().find((b) => /^event: result$/m.test(b));
    const data = last ? last.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n") : "null";
    return JSON.parse(data);
  }
  async function exchange(step, method, path, extra, body) {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const headers = headersOf(text === undefined ? extra : Object.assign({ "Content-Type": "application/json" }, extra));
    if (signing()) {
      // INT-1..INT-10: the backend signs exactly this request (method, target, A2A headers, the body's hash).
      const s = await consoleCall("POST", "/console/api/sign", { method, target: path, headers, body: text === undefined ? null : text });
      headers["A2A-Signature"] = s.signature;
    }
    const req = { method, path, headers, body: text || "" };
    const res = { status: 0, headers: [], body: "" };
    if (document.body.dataset.tryVia === "console") {
      const r = await consoleCall("POST", "/console/api/try", { method, path, headers, body: text === undefined ? null : text });
      Object.assign(res, { status: r.status, headers: r.headers, body: r.body });
      const ct = (r.headers.find(([k]) => k === "content-type") || ["", ""])[1];
      if (ct.startsWith("text/event-stream")) { logExchange(step, req, res); return { status: r.status, json: lastResult(r.body) }; }
    } else {
      const r = await fetch(path, { method, headers, body: text, credentials: "omit" });
      Object.assign(res, { status: r.status, headers: [...r.headers.entries()] });
      if ((r.headers.get("content-type") || "").startsWith("text/event-stream")) {
        // Streamed RESULT (§18): each event shown as it arrives.
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        logExchange(step, req, res);
        const pre = $("#try-log .exchange pre[data-status]");
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          res.body += dec.decode(value, { stream: true });
          pre.textContent = show(res);
        }
        return { status: r.status, json: lastResult(res.body) };
      }
      res.body = await r.text();
    }
    let json = null;
    try { json = JSON.parse(res.body); res.body = JSON.stringify(json, null, 2); } catch { /* not JSON */ }
    logExchange(step, req, res);
    return { status: res.status, json };
  }
  function status(text, bad) {
    const s = $("#try-status");
    s.textContent = text;
    s.className = bad ? "err" : "";
    document.body.dataset.tryStatus = text;
  }
  const why = (r) => r.status + (r.json && r.json.error ? " " + r.json.error.code + ": " + r.json.error.message : "");
  async function negotiate() {
    let proposal;
    try { proposal = JSON.parse($("#try-proposal").value); } catch (e) { status("The proposed schema is not JSON: " + e.message, true); return false; }
    const r = await exchange("NEGOTIATE", "POST", "/a2a/negotiate", {}, { target_capability: $("#try-capability").value, proposed_schema: proposal });
    if (r.status !== 200) { status("NEGOTIATE answered " + why(r), true); document.body.dataset.lastResult = "failed"; return false; }
    run.negotiation = r.json.negotiation_id;
    status("Negotiated " + run.negotiation + (r.json.tightened ? " (the agent tightened the schema: see agreed_schema and changes)" : ""));
    return true;
  }
  async function execute() {
    if (!run.negotiation) { status("Negotiate first.", true); return false; }
    let payload;
    try { payload = JSON.parse($("#try-payload").value); } catch (e) { status("The payload is not JSON: " + e.message, true); return false; }
    const r = await exchange("EXECUTE", "POST", "/a2a/execute", { "A2A-Negotiation-ID": run.negotiation }, payload);
    if (r.status >= 300) { status("EXECUTE answered " + why(r), true); document.body.dataset.lastResult = "failed"; return false; }
    run.execution = r.json.execution_id;
    status("Execution " + run.execution + " received; confirm it.");
    return true;
  }
  async function confirmRun() {
    if (!run.execution) { status("Execute first.", true); return false; }
    const r = await exchange("CONFIRM", "POST", "/a2a/confirm", {}, { execution_id: run.execution });
    if (r.status >= 300) { status("CONFIRM answered " + why(r), true); document.body.dataset.lastResult = "failed"; return false; }
    status("Confirmed " + run.execution + ".");
    return true;
  }
  async function result() {
    if (!run.execution) { status("Execute first.", true); return false; }
    const stream = $("#try-stream").checked;
    const r = await exchange("RESULT", "GET", "/a2a/result/" + encodeURIComponent(run.execution) + "?wait_ms=5000",
      stream ? { "A2A-Stream": "true" } : {});
    const st = r.json && r.json.status;
    status("RESULT: " + (st || why(r)), !(r.status === 200 && st === "succeeded"));
    document.body.dataset.lastResult = st || String(r.status);
    document.body.dataset.lastExecution = run.execution;
    return r.status === 200;
  }
  async function runAll() {
    $("#try-all").disabled = true;
    run.negotiation = null;
    run.execution = null;
    delete document.body.dataset.lastResult;
    try {
      if (await negotiate() && await execute() && await confirmRun()) await result();
    } catch (e) {
      status(e.message, true);
      document.body.dataset.lastResult = "failed";
    } finally {
      $("#try-all").disabled = false;
    }
  }
  function readKeyFile() {
    const f = $("#try-key-file").files[0];
    if (f) f.text().then((t) => { $("#try-key").value = t; });
  }

  function start(root) {
    render(root);
    $("#try-capability").addEventListener("change", showCapability);
    $("#try-negotiate").addEventListener("click", () => negotiate().catch((e) => status(e.message, true)));
    $("#try-execute").addEventListener("click", () => execute().catch((e) => status(e.message, true)));
    $("#try-confirm").addEventListener("click", () => confirmRun().catch((e) => status(e.message, true)));
    $("#try-result").addEventListener("click", () => result().catch((e) => status(e.message, true)));
    $("#try-all").addEventListener("click", runAll);
    $("#try-key-upload").addEventListener("click", uploadKey);
    $("#try-key-forget").addEventListener("click", forgetKey);
    $("#try-key-file").addEventListener("change", readKeyFile);
    consoleCall("GET", "/console/api/signer").then((r) => showSigner(r.signer)).catch(() => showSigner(null));
  }
  return { start, setCapabilities };
})();
