//! Bounds on what goes in and out of a session: attachments (SND-2) and secrets in the history (HIS-4).

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::{answer, end, fresh_key, inbox_delivery, random_text, register, run_id, send, session_req};
use crate::check::{Outcome, Trial};
use crate::checks::show;

/// The largest attachment the suite sends to find an agent's limit.
const MAX_PROBE_BYTES: u64 = 4 * 1024 * 1024;

fn member(r: &crate::http::Resp) -> String {
    r.error_details()["member"].as_str().unwrap_or("").to_owned()
}

pub(super) async fn attachment_bounds(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("attach");
    register(t, &key).await?;
    let nine: Vec<Value> =
        (0..9).map(|i| json!({"name": format!("a{i}.txt"), "media_type": "text/plain", "data": "aGk="})).collect();
    let body = json!({"target": key, "text": "nine attachments", "attachments": nine, "announce": false});
    let r = send(t, "send with 9 attachments (at most 8)", body, Duration::ZERO).await?;
    t.expect_error(&r, 413, "payload_too_large");
    let limit = r.error_details()["limit_bytes"].as_u64();
    t.check(limit.is_some(), "details.limit_bytes", show(&r.error_details()));
    let limit = limit.unwrap_or(256 * 1024);
    if limit < MAX_PROBE_BYTES {
        let data = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; (limit + 1) as usize]);
        let big = json!({"name": "big.bin", "media_type": "application/octet-stream", "data": data});
        let body =
            json!({"target": key, "text": "one attachment over the limit", "attachments": [big], "announce": false});
        let r = send(
            t,
            format!("send with one attachment of {} bytes (the limit is {limit})", limit + 1),
            body,
            Duration::ZERO,
        )
        .await?;
        t.expect_error(&r, 413, "payload_too_large");
        t.check(r.error_details()["limit_bytes"].is_u64(), "details.limit_bytes", show(&r.error_details()));
    }
    for (what, attachment) in [
        ("data that is not base64", json!({"name": "x.txt", "media_type": "text/plain", "data": "not base64!"})),
        ("a media_type that is not type/subtype", json!({"name": "x.png", "media_type": "png", "data": "aGk="})),
    ] {
        let body = json!({"target": key, "text": "a bad attachment", "attachments": [attachment], "announce": false});
        let r = send(t, format!("send with {what}"), body, Duration::ZERO).await?;
        t.expect_error(&r, 400, "invalid_request");
        t.check(
            member(&r).starts_with("attachments"),
            "details.member naming the attachment",
            show(&r.error_details()),
        );
    }
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n conformance");
    let small = json!({"name": "pixel.png", "media_type": "image/png", "data": png});
    let body = json!({"target": key, "text": "one small image", "attachments": [small.clone()], "announce": false});
    let r = send(t, "send with one small image/png attachment", body, Duration::ZERO).await?;
    t.expect_status(&r, 202);
    let run = run_id(t, &r)?;
    let delivery = inbox_delivery(t, &key, &run).await?;
    let got = &delivery["attachments"][0];
    t.check(
        delivery["attachments"].as_array().map(Vec::len) == Some(1)
            && ["name", "media_type", "data"].iter().all(|m| got[*m] == small[*m]),
        format!("the delivery carries the attachment unchanged ({})", show(&small)),
        show(&delivery["attachments"]),
    );
    end(t, &key).await;
    Ok(())
}

pub(super) async fn history_redacted(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("redact");
    register(t, &key).await?;
    let upper = random_text(16).to_ascii_uppercase();
    let secrets = [
        format!("Pw{}", random_text(16)),
        format!("sk-{}", random_text(32)),
        format!("AKIA{upper}"),
        format!("ghp_{}", random_text(36)),
        format!("eyJ{}.eyJ{}.{}", random_text(20), random_text(30), random_text(43)),
        random_text(40),
    ];
    let reply_secret = random_text(24);
    let text = format!(
        "Redaction check. password={} then {} then {} then {} then {} and the header Bearer {} end",
        secrets[0], secrets[1], secrets[2], secrets[3], secrets[4], secrets[5]
    );
    let r = send(
        t,
        "send a message holding six secrets",
        json!({"target": key, "text": text, "announce": false}),
        Duration::ZERO,
    )
    .await?;
    let run = run_id(t, &r)?;
    inbox_delivery(t, &key, &run).await?;
    let r = answer(t, &run, &format!("noted; api_key={reply_secret}")).await?;
    t.require(r.status == 200, "200", r.summary())?;
    let r = t.send("history", session_req(t, "GET", &format!("/sessions/{key}/history"))?).await?;
    t.expect_status(&r, 200);
    let raw = String::from_utf8_lossy(&r.body).into_owned();
    let leaked: Vec<&str> =
        secrets.iter().map(String::as_str).chain([reply_secret.as_str()]).filter(|s| raw.contains(*s)).collect();
    t.check(leaked.is_empty(), "none of the seven secrets in the history body", format!("leaked: {leaked:?}"));
    let b = r.json().unwrap_or(Value::Null);
    let marks: usize = b["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["text"].as_str()).map(|s| s.matches("[REDACTED]").count()).sum())
        .unwrap_or(0);
    t.check(marks >= 7, "at least 7 [REDACTED] in the texts", format!("{marks}"));
    let counted = b["redacted"].as_u64().unwrap_or(0);
    t.check(counted >= 7, "redacted counting at least the 7 secrets", show(&b["redacted"]));
    end(t, &key).await;
    Ok(())
}

pub(super) async fn context_mode(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("context");
    register(t, &key).await?;
    let supplied: Vec<Value> = (0..60)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "text": format!("earlier message {i}: {}", "x".repeat(2000))})
        })
        .collect();
    for mode in ["none", "current", "full"] {
        let mut body =
            json!({"target": key, "text": format!("context_mode {mode}"), "context_mode": mode, "announce": false});
        if mode == "full" {
            body["context"] = json!(supplied);
        }
        let r = send(t, format!("send with context_mode {mode}"), body, Duration::ZERO).await?;
        let run = run_id(t, &r)?;
        let delivery = inbox_delivery(t, &key, &run).await?;
        answer(t, &run, "noted").await?;
        let context = delivery["context"].as_array().cloned().unwrap_or_default();
        t.step(format!("the context of the delivery (context_mode {mode})"));
        if mode == "full" {
            let bytes = serde_json::to_vec(&context).map_or(0, |v| v.len());
            let suffix = context.len() <= supplied.len() && supplied[supplied.len() - context.len()..] == context[..];
            t.check(
                !context.is_empty() && context.len() <= 50 && bytes <= 80 * 1024 && suffix,
                "the newest of the 60 supplied messages (the last one included), at most 50 and 80 KiB of them",
                format!(
                    "{} messages, {bytes} bytes, {}",
                    context.len(),
                    if suffix { "the newest ones" } else { "not the newest supplied ones" }
                ),
            );
        } else {
            t.check(
                context.is_empty(),
                format!("no context (context_mode {mode}, round one)"),
                format!("{} messages", context.len()),
            );
        }
    }
    end(t, &key).await;
    Ok(())
}

/// Milliseconds from `created_at` to `deadline` of a Run.
fn deadline_after(run: &Value) -> Option<i128> {
    let ms = |v: &Value| {
        let at = a2a_core::wire::parse_timestamp(v.as_str()?)?;
        Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i128)
    };
    Some(ms(&run["deadline"])? - ms(&run["created_at"])?)
}

pub(super) async fn run_deadline(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("deadline");
    register(t, &key).await?;
    for (asked, what) in [(45_000u64, "45000"), (1_000_000_000_000, "10^12, beyond any maximum")] {
        let body = json!({"target": key, "text": "how long have you got?", "run_timeout_ms": asked, "announce": false});
        let r = send(t, format!("send with run_timeout_ms {what}"), body, Duration::ZERO).await?;
        let run = run_id(t, &r)?;
        let r = t.send("GET the run", session_req(t, "GET", &super::run_path(&run))?).await?;
        let b = r.json().unwrap_or(Value::Null);
        let after = deadline_after(&b);
        if asked == 45_000 {
            t.check(
                after == Some(45_000),
                "deadline = created_at + 45000 ms",
                format!("{after:?} ms after created_at ({} to {})", b["created_at"], b["deadline"]),
            );
        } else {
            t.check(
                after.is_some_and(|a| a > 0 && a < asked as i128),
                "a deadline lowered to the agent's maximum (less than 10^12 ms after created_at)",
                format!("{after:?} ms after created_at ({} to {})", b["created_at"], b["deadline"]),
            );
        }
    }
    end(t, &key).await;
    Ok(())
}
