// Drives the console page it is injected into (tests/it/console.rs) and posts what it saw to /__test/report.
// Runs after tests/fixtures/console_driver_prelude.js (report, q, qa, sleep, wait, key, axeCheck).
(async () => {
  try {
    // The network view: the permission matrix.
    await wait("the matrix", () => document.body.dataset.ready === "true" && qa("#matrix tbody tr").length === 2);
    report.matrix_capabilities = qa("#matrix thead th[data-capability]").map((th) => th.dataset.capability);
    report.matrix_rows = qa("#matrix tbody tr").map((tr) => ({
      agent: tr.dataset.agent,
      cells: [...tr.querySelectorAll("td[data-capability]")].map((td) =>
        [td.dataset.capability, td.querySelector(".cell").textContent, td.querySelector(".muted").textContent]),
    }));
    await axeCheck("network");

    // Keyboard: the arrow keys move between the tabs, and the focus follows.
    const keyboard = [];
    q("#tab-network").focus();
    key(document.activeElement, "ArrowRight");
    keyboard.push(document.activeElement.id);
    key(document.activeElement, "ArrowRight");
    keyboard.push(document.activeElement.id);
    key(document.activeElement, "Home");
    keyboard.push(document.activeElement.id);
    report.keyboard = keyboard;

    // Try it: a handshake through the gateway, built from the schema-driven form.
    q("#tab-try").click();
    const sel = q("#try-capability");
    sel.value = "submit_report";
    sel.dispatchEvent(new Event("change"));
    const title = await wait("the form", () => q("#field-title"));
    title.value = "Lift 3 out of service";
    title.dispatchEvent(new Event("input"));
    await axeCheck("try");
    q("#try-all").click();
    await wait("the RESULT", () => document.body.dataset.lastResult);
    const done = performance.now();
    report.try_result = document.body.dataset.lastResult;
    report.try_steps = qa("#try-log .exchange").map((e) => e.dataset.step);
    const execution = document.body.dataset.lastExecution;
    report.execution = execution;

    // Traffic: the RESULT of that execution is in the live view (counted from when the RESULT answered).
    const rows = () => qa("#traffic tbody tr").filter((tr) => tr.dataset.execution === execution);
    await wait("the traffic", () => rows().some((tr) => tr.dataset.step === "result"), 5000);
    report.traffic_ms = performance.now() - done;
    q("#tab-traffic").click();
    report.traffic_steps = rows().map((tr) => tr.dataset.step);
    // Keyboard: Enter on the row opens the execution's timeline.
    const row = rows()[0];
    row.focus();
    key(row, "Enter");
    await wait("the timeline", () => qa("#timeline .tl-row").length >= 4);
    report.timeline_steps = qa("#timeline .tl-row").map((r) => r.dataset.step);
    await axeCheck("traffic");

    // Metrics: the totals once refreshed after the handshake.
    const before = Number(document.body.dataset.metricsAt || 0);
    q("#tab-metrics").click();
    await wait("the metrics", () => Number(document.body.dataset.metricsAt || 0) > before && q("#totals [data-total=requests]"));
    // One more sample so that the charts have a window with the handshake in it.
    await sleep(600);
    const at = Number(document.body.dataset.metricsAt);
    await wait("a second refresh", () => Number(document.body.dataset.metricsAt) > at, 5000);
    report.metrics_requests = q("#totals [data-total=requests]").textContent;
    report.metrics_by_agent = Object.fromEntries(qa("#per-agent tbody tr").map((tr) =>
      [tr.dataset.agent, tr.querySelector("[data-total=requests]").textContent]));
    report.chart_paths = qa("#charts svg path").length;
    await axeCheck("metrics");
  } catch (e) {
    report.exception = String(e) + "\n" + (e.stack || "");
  }
  report.axe_violations = violations;
  await fetch("/__test/report", { method: "POST", body: JSON.stringify(report) });
})();
