//! Deadlines and late results (ST-2, ST-3) seen from outside, with a capability slow enough that a 1 ms deadline or
//! a CANCEL falls inside its run: the suite measures the capability's run first and says so when it is too fast.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{confirm, execute, negotiate, negotiate_with, result_req, show, slow_plan, wait_terminal};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::CapPlan;

/// Applies when the suite has a slow capability to drive.
const SLOW: &str = "the agent advertises a capability the suite can drive that runs for a second or more (--slow-capability, or declared estimated_latency_ms, or a duration member in its input)";
/// Applies with `cancel` and a slow capability.
const SLOW_CANCEL: &str = "the agent lists \"cancel\" in features and advertises a capability the suite can drive that runs for a second or more";
/// The shortest run the checks can use: a deadline of 1 ms, or a CANCEL after 100 ms, falls well inside it.
const MIN_RUN: Duration = Duration::from_millis(1000);

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "result/deadline-enforced",
            ["ST-3", "ST-2"],
            Must,
            SLOW,
            "a slow capability (its run measured first) negotiated with timeout_ms 1 ends timed_out (error.code timed_out), and is still timed_out after its handler would have finished",
            deadline_enforced
        ),
        check!(
            "cancel/late-result",
            ["ST-2"],
            Must,
            SLOW_CANCEL,
            "a slow capability canceled while it runs stays canceled after its handler would have finished (its late result is discarded)",
            late_result
        ),
    ]
}

/// Runs the slow capability once with its own schema and returns how long CONFIRM to a terminal state took; skips
/// when it is too fast to outlast a deadline or a CANCEL.
async fn measure(t: &mut Trial<'_>, plan: &CapPlan) -> Result<Duration, Stop> {
    let neg = negotiate(t, plan, &plan.decl.input_schema).await?;
    let exe = execute(t, plan, &neg.id, &plan.payload).await?;
    let started = Instant::now();
    confirm(t, plan, &exe.id).await?;
    let (_, last) = wait_terminal(t, plan, &exe.id).await?;
    let took = started.elapsed();
    let status = last["status"].as_str().unwrap_or("");
    t.step(format!("{} ran for {} ms and ended {status}", plan.decl.name, took.as_millis()));
    t.require(status == "succeeded" || status == "failed" || status == "timed_out", "a terminal state", show(&last))?;
    if took < MIN_RUN {
        return Err(Stop::Skip(format!(
            "the slow capability {} ({}) ran for {} ms, too fast to outlast a deadline or a CANCEL (needs {} ms): name a \
             slower one with --slow-capability, or a payload that makes it slower with --slow-payload",
            plan.decl.name,
            plan.why,
            took.as_millis(),
            MIN_RUN.as_millis()
        )));
    }
    Ok(took)
}

async fn deadline_enforced(t: &mut Trial<'_>) -> Outcome {
    let plan = slow_plan(t)?;
    let took = measure(t, &plan).await?;
    let mut body = super::negotiate_body(&plan.decl.name, &plan.decl.input_schema);
    body["timeout_ms"] = json!(1);
    let neg = negotiate_with(t, &plan, body).await?;
    t.require(
        neg.body["timeout_ms"].as_u64().is_some_and(|ms| ms <= 1),
        "timeout_ms 1 agreed",
        show(&neg.body["timeout_ms"]),
    )?;
    let exe = execute(t, &plan, &neg.id, &plan.payload).await?;
    let confirmed = Instant::now();
    confirm(t, &plan, &exe.id).await?;
    let (_, last) = wait_terminal(t, &plan, &exe.id).await?;
    t.step(format!("the terminal state (the handler runs for about {} ms; the deadline is 1 ms)", took.as_millis()));
    t.check(
        last["status"] == "timed_out" && last["error"]["code"] == "timed_out",
        "status timed_out with error.code timed_out (ST-3: the deadline passed long before the handler could finish)",
        show(&last),
    );
    let wait = (took + Duration::from_millis(1000)).saturating_sub(confirmed.elapsed());
    tokio::time::sleep(wait).await;
    let r = t.send("RESULT after the handler would have finished", result_req(t, &plan, &exe.id, None)).await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && b["status"] == last["status"] && b["result"].is_null() == last["result"].is_null(),
        format!("still {} (ST-2: the first terminal state is final)", last["status"]),
        show(&b),
    );
    Ok(())
}

async fn late_result(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("cancel") {
        return Err(Stop::Skip("the agent does not list cancel".into()));
    }
    let plan = slow_plan(t)?;
    let took = measure(t, &plan).await?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let exe = execute(t, &plan, &neg.id, &plan.payload).await?;
    let confirmed = Instant::now();
    confirm(t, &plan, &exe.id).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = t
        .send(
            "CANCEL 100 ms after CONFIRM, while the handler runs",
            t.ctx.for_cap(&plan, "POST", "/cancel").json(&super::execution_ref(&exe.id)),
        )
        .await?;
    let b = r.json().unwrap_or(Value::Null);
    t.ensure(
        r.status == 200 && b["status"] == "canceled",
        format!("200 canceled (the handler runs for about {} ms)", took.as_millis()),
        r.summary(),
    )?;
    let wait = (took + Duration::from_millis(1000)).saturating_sub(confirmed.elapsed());
    tokio::time::sleep(wait).await;
    let r = t
        .send(
            format!(
                "RESULT {} ms after CONFIRM, after the handler would have finished",
                confirmed.elapsed().as_millis()
            ),
            result_req(t, &plan, &exe.id, None),
        )
        .await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && b["status"] == "canceled" && b["result"].is_null() && b["error"]["code"] == "canceled",
        "still canceled with error.code canceled and no result (ST-2: the handler's late result is discarded)",
        show(&b),
    );
    Ok(())
}
