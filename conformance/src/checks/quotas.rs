//! Per-sender shares of an agent's state (§13, LIM-4, LIM-5): what the capabilities document announces, and what a
//! sender past its share of executions waiting for CONFIRM is answered. Each check fills only the suite's own
//! share, and only when the agent announces a small one ([`MAX_FILL`]); it cancels what it created.

use serde_json::Value;

use super::{execute_req, execution_ref, main_plan, negotiate, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};

/// The largest announced share the suite fills (that many EXECUTEs, then as many CANCELs).
const MAX_FILL: u64 = 1_000;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "limits/per-sender-shares",
            ["LIM-5"],
            Must,
            super::applies::ALWAYS,
            "the capabilities document's limits announce the per-sender shares max_negotiations_per_sender, max_received_per_sender and max_nonces_per_sender, as positive integers",
            announced
        ),
        check!(
            "limits/sender-share-announced",
            ["LIM-18"],
            May,
            "the capabilities document's limits announce max_in_progress_per_sender, max_queued_per_sender or sender_queue_timeout_ms",
            "the announced sender share and its queue are non-negative integers, the share at least 1",
            share_announced
        ),
        check!(
            "limits/received-per-sender",
            ["LIM-5"],
            Must,
            "the agent announces limits.max_received_per_sender of at most 1 000, lists cancel, and advertises a capability the suite can drive",
            "EXECUTE past the announced max_received_per_sender (executions waiting for CONFIRM) is answered 429 quota_exceeded with Retry-After (seconds, at least 1) and details.quota max_received_per_sender, details.limit the share; CANCEL of one of them makes room again",
            received
        ),
    ]
}

async fn announced(t: &mut Trial<'_>) -> Outcome {
    t.step("read limits");
    let doc = t.ctx.disc.doc.clone().unwrap_or(Value::Null);
    let l = &doc["limits"];
    let keys = ["max_negotiations_per_sender", "max_received_per_sender", "max_nonces_per_sender"];
    let ok = keys.iter().all(|k| l[*k].as_u64().is_some_and(|v| v > 0));
    t.check(ok, "limits with max_negotiations_per_sender, max_received_per_sender, max_nonces_per_sender", show(l));
    Ok(())
}

async fn share_announced(t: &mut Trial<'_>) -> Outcome {
    let doc = t.ctx.disc.doc.clone().unwrap_or(Value::Null);
    let l = &doc["limits"];
    let keys = ["max_in_progress_per_sender", "max_queued_per_sender", "sender_queue_timeout_ms"];
    if keys.iter().all(|k| l.get(*k).is_none()) {
        return Err(Stop::Skip("the agent does not announce its sender share (LIM-18 is optional)".into()));
    }
    t.step("read the announced share");
    for k in keys {
        let Some(v) = l.get(k) else { continue };
        let ok = v.as_u64().is_some_and(|n| k != "max_in_progress_per_sender" || n >= 1);
        t.check(
            ok,
            format!(
                "limits.{k} a non-negative integer{}",
                if k == "max_in_progress_per_sender" { ", at least 1" } else { "" }
            ),
            show(v),
        );
    }
    Ok(())
}

async fn received(t: &mut Trial<'_>) -> Outcome {
    let Some(share) = t.ctx.disc.limits.as_ref().and_then(|l| l.max_received_per_sender) else {
        return Err(Stop::Skip("the agent does not announce limits.max_received_per_sender".into()));
    };
    if share == 0 || share > MAX_FILL {
        return Err(Stop::Skip(format!("the announced share ({share}) is above the {MAX_FILL} the suite fills")));
    }
    if !t.ctx.disc.has_feature("cancel") {
        return Err(Stop::Skip("the agent does not list cancel (the suite could not free what it fills)".into()));
    }
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    // Fill the share: these exchanges are in the transcript, not each a step of the report.
    let mut created = Vec::new();
    let mut refused = None;
    for _ in 0..share + 1 {
        let mut req = execute_req(t, &plan, &neg.id, &plan.payload);
        let r =
            t.ctx.send(t.check_id, &mut req).await.map_err(|e| Stop::Blocked(format!("EXECUTE: no response: {e}")))?;
        match (r.status, r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned))) {
            (201, Some(id)) => created.push(id),
            _ => {
                refused = Some((req, r));
                break;
            }
        }
    }
    let outcome = match refused {
        None => {
            t.step(format!("{} EXECUTEs", created.len()));
            t.check(false, format!("a 429 once {share} executions wait for CONFIRM"), "every EXECUTE was 201");
            Err(Stop::Failed)
        }
        Some((req, r)) => {
            t.record(format!("EXECUTE after {} executions waiting for CONFIRM", created.len()), &req, &Ok(r.clone()));
            // Executions of the suite's sender that earlier checks left waiting count too.
            t.check(
                !created.is_empty() && created.len() as u64 <= share,
                format!("at most {share} EXECUTEs accepted before a refusal (the share announced)"),
                format!("{} accepted", created.len()),
            );
            t.expect_error(&r, 429, "quota_exceeded");
            let retry = r.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok());
            t.check(retry.is_some_and(|s| s >= 1), "Retry-After in seconds, at least 1", format!("{retry:?}"));
            let d = r.json().map(|b| b["error"]["details"].clone()).unwrap_or(Value::Null);
            t.check(
                d["quota"] == "max_received_per_sender" && d["limit"].as_u64() == Some(share),
                format!("details.quota \"max_received_per_sender\", details.limit {share}"),
                show(&d),
            );
            Ok(())
        }
    };
    // Free the share: cancel what was created (the first through a recorded step; it must make room).
    for (i, id) in created.iter().enumerate() {
        let mut req = t.ctx.for_cap(&plan, "POST", "/cancel").json(&execution_ref(id));
        let _ = t.ctx.send(t.check_id, &mut req).await;
        if i == 0 && outcome.is_ok() {
            let again = execute_req(t, &plan, &neg.id, &plan.payload);
            let r = t.send("EXECUTE after one was canceled", again).await?;
            t.expect_status(&r, 201);
            if let Some(id) = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned)) {
                let mut req = t.ctx.for_cap(&plan, "POST", "/cancel").json(&execution_ref(&id));
                let _ = t.ctx.send(t.check_id, &mut req).await;
            }
        }
    }
    outcome
}
