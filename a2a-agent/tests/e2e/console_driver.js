// Drives the agent's console page it is injected into (tests/e2e/console.rs) and posts what it saw to /__test/report.
// Runs after tests/fixtures/console_driver_prelude.js (report, q, qa, sleep, wait, key, axeCheck).
(async () => {
  try {
    // The agent view: its capabilities.
    await wait("the agent", () => document.body.dataset.ready === "true" && qa("#capabilities tbody tr").length >= 1);
    report.capabilities = qa("#capabilities tbody tr").map((tr) =>
      [tr.dataset.capability, tr.querySelector(".cell").textContent, tr.cells[2].textContent]);
    await wait("the totals", () => q("#totals [data-total=requests]"));
    await axeCheck("agent");

    // Keyboard: the arrow keys move between the views, and the focus follows.
    const keyboard = [];
    q("#tab-agent").focus();
    key(document.activeElement, "ArrowRight");
    keyboard.push(document.activeElement.id);
    key(document.activeElement, "ArrowRight");
    keyboard.push(document.activeElement.id);
    key(document.activeElement, "Home");
    keyboard.push(document.activeElement.id);
    report.keyboard = keyboard;

    // Try it: a handshake with the agent, built from the schema-driven form.
    q("#tab-try").click();
    const sel = await wait("the capability list", () => q("#try-capability option") && q("#try-capability"));
    sel.value = "submit_report";
    sel.dispatchEvent(new Event("change"));
    const title = await wait("the form", () => q("#field-title"));
    title.value = "Lift 3 out of service";
    title.dispatchEvent(new Event("input"));
    q("#try-all").click();
    await wait("the RESULT", () => document.body.dataset.lastResult);
    report.try_result = document.body.dataset.lastResult;
    report.try_status = document.body.dataset.tryStatus;
    report.try_steps = qa("#try-log .exchange").map((e) => e.dataset.step);
    await axeCheck("try");

    // Sessions: the hosted session, opened with the keyboard; a run made meanwhile shows up live.
    q("#tab-sessions").click();
    await wait("the sessions", () => qa("#sessions tbody tr").length >= 1);
    report.sessions = qa("#sessions tbody tr").map((tr) => [tr.dataset.agent, tr.dataset.session]);
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
  } catch (e) {
    report.exception = String(e) + "\n" + (e.stack || "");
  }
  report.axe_violations = violations;
  await fetch("/__test/report", { method: "POST", body: JSON.stringify(report) });
})();
