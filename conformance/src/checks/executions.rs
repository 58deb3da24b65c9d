//! Executions: CONFIRM (§8.2), RESULT (§8.3), CANCEL (§8.4) and the state machine (§8.1).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::applies::{CANCEL, LONG_POLL, MAIN};
use super::{confirm, executed, execution_ref, is_terminal, main_plan, rank, result_req, show, wait_terminal};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, SENDER_B};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "confirm/first",
            ["CONF-1"],
            Must,
            MAIN,
            "the first CONFIRM of a received execution is answered 202 {execution_id, status: accepted} with A2A-Execution-ID",
            first
        ),
        check!(
            "confirm/again",
            ["CONF-2"],
            Must,
            MAIN,
            "confirming again starts nothing: 200 with already_confirmed true and the current status, however many times",
            again
        ),
        check!(
            "confirm/concurrent",
            ["CONF-2"],
            Must,
            MAIN,
            "four concurrent first CONFIRMs of one execution: exactly one 202, the others 200 already_confirmed",
            concurrent
        ),
        check!(
            "confirm/unknown",
            ["CONF-4", "EID-9", "EID-10"],
            Must,
            MAIN,
            "CONFIRM of an unknown execution, or of another sender's, is 404 unknown_execution",
            confirm_unknown
        ),
        check!(
            "result/happy-path",
            ["RES-1", "ST-1", "ST-4", "GW-2"],
            Must,
            MAIN,
            "after CONFIRM, RESULT answers 200 ResultResponses whose status only moves forward to a terminal state, with result exactly when succeeded and error exactly when failed, timed_out or canceled",
            result_happy_path
        ),
        check!(
            "result/other-sender",
            ["RES-1", "EID-10"],
            Must,
            MAIN,
            "RESULT of another sender's execution is 404 unknown_execution",
            other_sender
        ),
        check!(
            "result/deadline",
            ["ST-3"],
            Must,
            MAIN,
            "an accepted execution has a deadline: its acceptance time plus the negotiation's timeout_ms",
            deadline
        ),
        check!(
            "result/timeout",
            ["ST-3", "ST-4"],
            Must,
            MAIN,
            "with timeout_ms 1 the execution ends timed_out (error.code timed_out) unless its handler is faster",
            timeout
        ),
        check!(
            "result/terminal-stays-readable",
            ["RES-3", "ST-2"],
            Must,
            MAIN,
            "a terminal execution stays readable and unchanged",
            terminal_stays
        ),
        check!(
            "result/long-poll",
            ["RES-2"],
            Must,
            LONG_POLL,
            "RESULT with wait_ms holds until the execution is terminal or wait_ms has passed; wait_ms that is not a decimal integer is 400 invalid_request",
            long_poll
        ),
        check!(
            "cancel/received",
            ["CAN-1"],
            Must,
            CANCEL,
            "CANCEL of a received execution is answered 200 with a ResultResponse canceled (error.code canceled)",
            cancel_received
        ),
        check!(
            "cancel/terminal",
            ["CAN-2"],
            Must,
            CANCEL,
            "CANCEL of a terminal execution is 409 invalid_state with details.status; of an unknown one, 404 unknown_execution",
            cancel_terminal
        ),
        check!(
            "cancel/confirm-after-cancel",
            ["CONF-3"],
            Must,
            CANCEL,
            "CONFIRM of an execution canceled before it ran is 409 invalid_state with details.status canceled",
            confirm_after_cancel
        ),
        check!(
            "cancel/final-state",
            ["ST-2", "ST-1"],
            Must,
            CANCEL,
            "the first terminal state is final: a canceled execution stays canceled",
            cancel_final
        ),
    ]
}

async fn first(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t.send("CONFIRM", t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&exe.id))).await?;
    t.expect_status(&r, 202);
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["execution_id"] == exe.id.as_str() && b["status"] == "accepted",
        format!("{{\"execution_id\": {:?}, \"status\": \"accepted\"}}", exe.id),
        show(&b),
    );
    t.check(
        r.header("a2a-execution-id") == Some(exe.id.as_str()),
        "A2A-Execution-ID",
        format!("{:?}", r.header("a2a-execution-id")),
    );
    Ok(())
}

async fn again(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    confirm(t, &plan, &exe.id).await?;
    for i in 2..=3 {
        let r = t
            .send(format!("CONFIRM #{i}"), t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&exe.id)))
            .await?;
        t.expect_status(&r, 200);
        let b = r.json().unwrap_or(Value::Null);
        t.check(b["already_confirmed"] == true, "already_confirmed: true", show(&b));
        let s = b["status"].as_str().unwrap_or("");
        t.check(
            matches!(s, "accepted" | "running") || is_terminal(s),
            "the current status (accepted, running or terminal)",
            s.to_owned(),
        );
    }
    Ok(())
}

async fn concurrent(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let mut reqs: Vec<crate::http::Req> =
        (0..4).map(|_| t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&exe.id))).collect();
    let ctx = t.ctx;
    let id = t.check_id;
    let futs = reqs.iter_mut().map(|r| ctx.send(id, r));
    let results = futures_util::future::join_all(futs).await;
    for (i, (req, res)) in reqs.iter().zip(&results).enumerate() {
        t.record(format!("CONFIRM #{} (sent at once)", i + 1), req, res);
    }
    t.step("compare the four answers");
    let mut accepted = 0;
    let mut already = 0;
    let mut seen = Vec::new();
    for r in &results {
        match r {
            Ok(r) => {
                let b = r.json().unwrap_or(Value::Null);
                if r.status == 202 {
                    accepted += 1;
                } else if r.status == 200 && b["already_confirmed"] == true {
                    already += 1;
                }
                seen.push(r.summary());
            }
            Err(e) => seen.push(format!("no response: {e}")),
        }
    }
    t.check(accepted == 1 && already == 3, "exactly one 202 and three 200 already_confirmed", format!("{seen:?}"));
    Ok(())
}

async fn confirm_unknown(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let unknown = format!("{}_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4", plan.sender());
    let r = t
        .send(
            "CONFIRM of an unknown (well-formed) id",
            t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&unknown)),
        )
        .await?;
    t.expect_error(&r, 404, "unknown_execution");
    if matches!(plan.auth, CallerAuth::None) {
        let (_, exe) = executed(t, &plan).await?;
        let req = t.ctx.for_cap(&plan, "POST", "/confirm").set("A2A-Sender-ID", SENDER_B).json(&execution_ref(&exe.id));
        let r = t.send(format!("CONFIRM as {SENDER_B} of another sender's execution"), req).await?;
        t.expect_error(&r, 404, "unknown_execution");
    }
    Ok(())
}

/// ST-4 on one ResultResponse body.
pub(super) fn st4(t: &mut Trial<'_>, b: &Value) {
    let s = b["status"].as_str().unwrap_or("");
    let has_result = b.get("result").is_some_and(|r| !r.is_null());
    let has_error = b.get("error").is_some_and(|r| !r.is_null());
    let ok = match s {
        "succeeded" => has_result && !has_error,
        "failed" | "timed_out" | "canceled" => has_error && !has_result && b["error"]["code"].is_string(),
        _ => !has_result && !has_error,
    };
    t.check(ok, format!("status {s}: result only when succeeded, error only when failed/timed_out/canceled"), show(b));
}

async fn result_happy_path(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    confirm(t, &plan, &exe.id).await?;
    let started = Instant::now();
    let mut statuses = Vec::new();
    let mut delay = Duration::from_millis(50);
    loop {
        let r = t.send("RESULT", result_req(t, &plan, &exe.id, None)).await?;
        t.expect_status(&r, 200);
        let b = r.json().unwrap_or(Value::Null);
        let parsed: Result<a2a_core::wire::ResultResponse, _> = serde_json::from_value(b.clone());
        t.check(
            parsed.is_ok(),
            "a ResultResponse",
            match &parsed {
                Ok(_) => "a ResultResponse".into(),
                Err(e) => format!("{e}: {}", show(&b)),
            },
        );
        t.check(
            r.header("a2a-execution-id") == Some(exe.id.as_str()),
            "A2A-Execution-ID",
            format!("{:?}", r.header("a2a-execution-id")),
        );
        st4(t, &b);
        let s = b["status"].as_str().unwrap_or("").to_owned();
        statuses.push(s.clone());
        if is_terminal(&s) || t.failed() {
            break;
        }
        if started.elapsed() > t.ctx.opts.result_timeout {
            return Err(Stop::Blocked(format!("still {s} after --result-timeout")));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(800));
    }
    t.step("the statuses seen");
    let forward = statuses.windows(2).all(|w| rank(&w[0]) <= rank(&w[1]) && !(is_terminal(&w[0]) && w[0] != w[1]));
    t.check(
        forward && statuses.first().is_some_and(|s| s != "received"),
        "statuses that only move forward from accepted",
        format!("{statuses:?}"),
    );
    Ok(())
}

async fn other_sender(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    if !matches!(plan.auth, CallerAuth::None) {
        return Err(Stop::Skip("the only drivable capability needs credentials bound to one sender".into()));
    }
    let (_, exe) = executed(t, &plan).await?;
    let r = t
        .send(format!("RESULT as {SENDER_B}"), result_req(t, &plan, &exe.id, None).set("A2A-Sender-ID", SENDER_B))
        .await?;
    t.expect_error(&r, 404, "unknown_execution");
    Ok(())
}

async fn deadline(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (neg, exe) = executed(t, &plan).await?;
    let timeout_ms = neg.body["timeout_ms"].as_u64().unwrap_or(0) as i128;
    let before = std::time::SystemTime::now();
    confirm(t, &plan, &exe.id).await?;
    let gap = before.elapsed().map_or(0, |d| d.as_millis()) as i128;
    let r = t.send("RESULT after CONFIRM", result_req(t, &plan, &exe.id, None)).await?;
    let b = r.json().unwrap_or(Value::Null);
    let created = exe.body["created_at"].as_str().and_then(a2a_core::wire::parse_timestamp);
    let dl = b["deadline"].as_str().and_then(a2a_core::wire::parse_timestamp);
    let ms = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()) as i128;
    match (created, dl) {
        (Some(c), Some(d)) => {
            let off = ms(d) - ms(c) - timeout_ms;
            t.check(
                (-1000..=gap + 2000).contains(&off),
                format!("deadline = acceptance + timeout_ms ({timeout_ms} ms): created_at + timeout_ms + at most the {gap} ms before CONFIRM was answered"),
                format!("deadline {} is {off} ms after created_at + timeout_ms", b["deadline"]),
            );
        }
        _ => {
            t.check(false, "a deadline (RFC 3339) once accepted", show(&b));
        }
    }
    Ok(())
}

async fn timeout(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let mut body = super::negotiate_body(&plan.decl.name, &plan.decl.input_schema);
    body["timeout_ms"] = json!(1);
    let neg = super::negotiate_with(t, &plan, body).await?;
    let exe = super::execute(t, &plan, &neg.id, &plan.payload).await?;
    confirm(t, &plan, &exe.id).await?;
    let (_, last) = wait_terminal(t, &plan, &exe.id).await?;
    t.step("the terminal state");
    let s = last["status"].as_str().unwrap_or("");
    if s == "timed_out" {
        t.check(last["error"]["code"] == "timed_out", "error.code timed_out", show(&last["error"]));
    } else {
        t.check(
            matches!(s, "succeeded" | "failed"),
            "timed_out (or succeeded/failed for a handler faster than 1 ms)",
            s.to_owned(),
        );
    }
    st4(t, &last);
    Ok(())
}

async fn terminal_stays(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    confirm(t, &plan, &exe.id).await?;
    let (_, last) = wait_terminal(t, &plan, &exe.id).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = t.send("RESULT again, 500 ms after the terminal state", result_req(t, &plan, &exe.id, None)).await?;
    t.expect_status(&r, 200);
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["status"] == last["status"]
            && super::same_json(&b["result"], &last["result"])
            && b["error"]["code"] == last["error"]["code"],
        format!("the same terminal state {}", last["status"]),
        show(&b),
    );
    Ok(())
}

async fn long_poll(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("long_poll") {
        return Err(Stop::Skip("the agent does not list long_poll".into()));
    }
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t
        .send(
            "RESULT with wait_ms=abc of a real execution",
            t.ctx.for_cap(&plan, "GET", &format!("{}?wait_ms=abc", super::result_path(&exe.id))),
        )
        .await?;
    t.expect_error(&r, 400, "invalid_request");
    let r = t
        .send("RESULT with wait_ms=1000 of an unconfirmed execution", result_req(t, &plan, &exe.id, Some(1000)))
        .await?;
    t.expect_status(&r, 200);
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["status"] == "received" && r.elapsed >= Duration::from_millis(900),
        "status received, answered after about 1 000 ms (it cannot become terminal)",
        format!("{} after {} ms", b["status"], r.elapsed.as_millis()),
    );
    confirm(t, &plan, &exe.id).await?;
    let wait = t.ctx.disc.limits.as_ref().map_or(10_000, |l| l.max_wait_ms.clamp(1, 10_000));
    let r =
        t.send(format!("RESULT with wait_ms={wait} after CONFIRM"), result_req(t, &plan, &exe.id, Some(wait))).await?;
    let b = r.json().unwrap_or(Value::Null);
    let s = b["status"].as_str().unwrap_or("");
    t.check(
        is_terminal(s) || r.elapsed >= Duration::from_millis(wait.saturating_sub(100)),
        format!("a terminal state, or the current one after {wait} ms"),
        format!("{s} after {} ms", r.elapsed.as_millis()),
    );
    Ok(())
}

fn cancel_req(t: &Trial<'_>, plan: &crate::ctx::CapPlan, id: &str) -> crate::http::Req {
    t.ctx.for_cap(plan, "POST", "/cancel").json(&execution_ref(id))
}

fn needs_cancel(t: &Trial<'_>) -> Outcome {
    if t.ctx.disc.has_feature("cancel") { Ok(()) } else { Err(Stop::Skip("the agent does not list cancel".into())) }
}

async fn cancel_received(t: &mut Trial<'_>) -> Outcome {
    needs_cancel(t)?;
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t.send("CANCEL a received execution", cancel_req(t, &plan, &exe.id)).await?;
    t.expect_status(&r, 200);
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["status"] == "canceled" && b["error"]["code"] == "canceled",
        "a ResultResponse with status canceled and error.code canceled",
        show(&b),
    );
    let r = t.send("RESULT after CANCEL", result_req(t, &plan, &exe.id, None)).await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(b["status"] == "canceled", "status canceled", format!("{}", b["status"]));
    Ok(())
}

async fn cancel_terminal(t: &mut Trial<'_>) -> Outcome {
    needs_cancel(t)?;
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t.setup("CANCEL (preparation)", cancel_req(t, &plan, &exe.id)).await?;
    t.require(r.status == 200, "200", r.summary())?;
    let r = t.send("CANCEL again", cancel_req(t, &plan, &exe.id)).await?;
    t.expect_error(&r, 409, "invalid_state");
    let d = r.error_details();
    t.check(d["status"] == "canceled", "details.status \"canceled\"", show(&d));
    let unknown = format!("{}_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4", plan.sender());
    let r = t.send("CANCEL an unknown execution", cancel_req(t, &plan, &unknown)).await?;
    t.expect_error(&r, 404, "unknown_execution");
    Ok(())
}

async fn confirm_after_cancel(t: &mut Trial<'_>) -> Outcome {
    needs_cancel(t)?;
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    let r = t.setup("CANCEL (preparation)", cancel_req(t, &plan, &exe.id)).await?;
    t.require(r.status == 200, "200", r.summary())?;
    let r = t
        .send("CONFIRM the canceled execution", t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&exe.id)))
        .await?;
    t.expect_error(&r, 409, "invalid_state");
    let d = r.error_details();
    t.check(d["status"] == "canceled", "details.status \"canceled\"", show(&d));
    Ok(())
}

async fn cancel_final(t: &mut Trial<'_>) -> Outcome {
    needs_cancel(t)?;
    let plan = main_plan(t)?;
    let (_, exe) = executed(t, &plan).await?;
    confirm(t, &plan, &exe.id).await?;
    let r = t.send("CANCEL the confirmed execution", cancel_req(t, &plan, &exe.id)).await?;
    let b = r.json().unwrap_or(Value::Null);
    let state = if r.status == 200 {
        t.check(b["status"] == "canceled", "status canceled", show(&b));
        "canceled".to_owned()
    } else {
        t.expect_error(&r, 409, "invalid_state");
        b["error"]["details"]["status"].as_str().unwrap_or("").to_owned()
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let r = t.send("RESULT 700 ms later", result_req(t, &plan, &exe.id, None)).await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        b["status"] == state.as_str(),
        format!("still {state}: the first terminal state is final"),
        format!("{}", b["status"]),
    );
    Ok(())
}
