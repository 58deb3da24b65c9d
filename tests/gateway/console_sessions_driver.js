// Drives the gateway console's Sessions view and signed "Try it" (tests/gateway/console.rs) and posts what it saw
// to /__test/report.
// Runs after tests/fixtures/console_driver_prelude.js (report, q, qa, sleep, wait, key, axeCheck).
(async () => {
  async function runAll() {
    q("#try-all").click();
    await wait("the handshake", () => document.body.dataset.lastResult);
    return { result: document.body.dataset.lastResult, status: document.body.dataset.tryStatus };
  }
  try {
    await wait("the matrix", () => document.body.dataset.ready === "true" && qa("#matrix tbody tr").length === 2);

    // Sessions: the desk agent's session, opened with the keyboard; a run made meanwhile shows up live.
    q("#tab-sessions").click();
    await wait("the sessions", () => qa("#sessions tbody tr").length >= 1);
    report.sessions = qa("#sessions tbody tr").map((tr) => [tr.dataset.agent, tr.dataset.session]);
    report.sessions_as = q("#sessions-as").textContent;
    const row = qa("#sessions tbody tr").find((tr) => tr.dataset.session === "desk");
    row.focus();
    key(row, "Enter");
    await wait("the event stream", () => document.body.dataset.sessionStream === "live");
    // Timed from before the send: the run (round one, announce) and its events reaching the page.
    const t0 = performance.now();
    const sent = await (await fetch("/__test/send", { method: "POST" })).json();
    report.send_status = sent.status;
    await wait("the run's events", () => qa("#session-events li[data-event=run]").some((li) => li.dataset.run === sent.run_id), 10000);
    report.events_ms = performance.now() - t0;
    report.events = qa("#session-events li").map((li) => li.dataset.event).reverse();
    const runRow = q("#session-runs tr[data-run=\"" + sent.run_id + "\"]");
    report.run_row = runRow ? [runRow.dataset.status, runRow.dataset.state] : null;
    await wait("the transcript", () => qa("#session-history li[data-role=assistant]").length >= 1);
    report.history_roles = qa("#session-history li").map((li) => li.dataset.role);
    await axeCheck("sessions");

    // Try it on notarize_message (did_auth): unsigned, with a key that is not the DID's, then with the DID's own key.
    q("#tab-try").click();
    const sel = q("#try-capability");
    sel.value = "notarize_message";
    sel.dispatchEvent(new Event("change"));
    const title = await wait("the form", () => q("#field-title"));
    title.value = "Contract 7";
    title.dispatchEvent(new Event("input"));
    report.unsigned = await runAll();
    const keys = await (await fetch("/__test/keys")).json();
    q("#try-signing").open = true;
    async function upload(text) {
      q("#try-signer-status").textContent = "";
      q("#try-key-did").value = keys.did;
      q("#try-key-id").value = keys.key_id;
      q("#try-key").value = text;
      q("#try-key-upload").click();
      await wait("the key", () => /Signing as|not taken/.test(q("#try-signer-status").textContent));
      if (!/Signing as/.test(q("#try-signer-status").textContent)) throw new Error(q("#try-signer-status").textContent);
    }
    await upload(keys.wrong_pem);
    report.key_cleared = q("#try-key").value === "";
    report.wrong_key = await runAll();
    await upload(keys.good_jwk);
    q("#try-log").replaceChildren();
    report.signed = await runAll();
    report.signed_requests = qa("#try-log .exchange").filter((e) => /A2A-Signature: ey/.test(e.querySelector("pre").textContent)).length;
    await axeCheck("try-signed");
  } catch (e) {
    report.exception = String(e) + "\n" + (e.stack || "");
  }
  report.axe_violations = violations;
  await fetch("/__test/report", { method: "POST", body: JSON.stringify(report) });
})();
